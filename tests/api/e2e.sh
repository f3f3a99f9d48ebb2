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

start_huskd() {
	HUSK_API_KEY=$key "$top/build/bin/huskd-san" --port $port --state "$T/state" \
		--images "$top/build/images" --vmm "$top/build/bin/husk-vmm" >>"$T/huskd.log" 2>&1 &
	pid=$!
	i=0
	while [ $i -lt 100 ] && [ "$(grep -c listening "$T/huskd.log")" -lt "$1" ]; do
		sleep 0.1
		i=$((i + 1))
	done
}
client() { HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key node "$top/tests/api/client/$@"; }

client run.mjs
rc=$?

# A huskd restart keeps live sandboxes: their VMMs are adopted again.
ids=$(client lifecycle.mjs create 2)
kill -TERM $pid
wait $pid
start_huskd 2
TEST_NAME=restart_keeps_sandboxes client lifecycle.mjs alive $ids || rc=1

# kill -9 of one VMM fails that sandbox, with an event, and no other.
a=${ids%% *}
# (by /proc: busybox's pkill reads only the start of a long command line)
killed=
for p in /proc/[0-9]*; do
	if tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q "husk-vmm .*sandboxes/$a/"; then
		kill -9 "${p#/proc/}" && killed=1
	fi
done
[ -n "$killed" ] || echo "FAIL api/vmm_killed: no VMM for $a"
sleep 2
TEST_NAME=vmm_kill_fails_that_sandbox client lifecycle.mjs failed "$a" || rc=1
TEST_NAME=vmm_kill_leaves_others_working client lifecycle.mjs alive "${ids#* }" || rc=1

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
