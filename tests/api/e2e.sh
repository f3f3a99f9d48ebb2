#!/bin/sh
# huskd end to end on real KVM, driven by the published client
# (@agentuity/core, tests/api/client). Runs through tools/husk-kvm-run.
# Prints PASS/FAIL lines.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
port=18371
key=husk-test-key
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$T"' EXIT

HUSK_API_KEY=$key "$top/build/bin/huskd-san" --port $port --state "$T/state" \
	--images "$top/build/images" --vmm "$top/build/bin/husk-vmm" >"$T/huskd.log" 2>&1 &
pid=$!
i=0
while [ $i -lt 100 ] && ! grep -q listening "$T/huskd.log"; do sleep 0.1; i=$((i + 1)); done
if ! grep -q listening "$T/huskd.log"; then
	echo "FAIL api/huskd_starts: huskd did not start"
	cat "$T/huskd.log"
	exit 1
fi
echo "PASS api/huskd_starts"

HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key node "$top/tests/api/client/run.mjs"
rc=$?

kill -TERM $pid
wait $pid
status=$?
if [ "$status" = 0 ] && ! grep -q "ERROR: AddressSanitizer\|runtime error:" "$T/huskd.log"; then
	echo "PASS api/huskd_clean_exit"
else
	echo "FAIL api/huskd_clean_exit: status $status; its log:"
	tail -n 30 "$T/huskd.log"
	rc=1
fi
[ $rc = 0 ] || { echo "--- huskd log"; tail -n 40 "$T/huskd.log"; }
exit $rc
