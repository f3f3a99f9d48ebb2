#!/bin/sh
# huskd (ASan) against bad requests, on the host: nothing here needs KVM.
# Prints PASS/FAIL lines; the daemon must survive and exit clean.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
port=18372
key=husk-test-key
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$T"' EXIT

HUSK_API_KEY=$key "$top/build/bin/huskd-san" --port $port --state "$T/state" \
	--images "$top/build/images" --vmm "$top/build/bin/husk-vmm" >"$T/huskd.log" 2>&1 &
pid=$!
i=0
while [ $i -lt 100 ] && ! grep -q listening "$T/huskd.log"; do sleep 0.1; i=$((i + 1)); done
HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key node "$top/tests/api/client/badinput.mjs"
rc=$?
kill -TERM $pid
wait $pid
status=$?
if [ "$status" = 0 ] && ! grep -q "ERROR: AddressSanitizer\|runtime error:" "$T/huskd.log"; then
	echo "PASS badinput/huskd_clean_exit"
else
	echo "FAIL badinput/huskd_clean_exit: status $status"
	tail -n 30 "$T/huskd.log"
	rc=1
fi
exit $rc
