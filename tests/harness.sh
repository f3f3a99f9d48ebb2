#!/bin/sh
# Checks tools/husk-kvm-run itself: the command's exit status comes back, and
# a command that outlives the hard timeout is killed with status 124.
set -u
cd "$(dirname "$0")/.."
failed=0

out=$(tools/husk-kvm-run --timeout 900 -- sh -c 'echo marker-$((6 * 7)); exit 7' 2>&1)
rc=$?
if [ "$rc" = 7 ] && echo "$out" | grep -q '^marker-42$'; then
	echo "PASS harness/exit_status_and_output"
else
	echo "FAIL harness/exit_status_and_output: status $rc, output: $(echo "$out" | tail -n 5)"
	failed=1
fi

start=$(date +%s)
out=$(tools/husk-kvm-run --timeout 20 -- sleep 1000 2>&1)
rc=$?
took=$(($(date +%s) - start))
if [ "$rc" = 124 ] && [ "$took" -lt 120 ]; then
	echo "PASS harness/hard_timeout"
else
	echo "FAIL harness/hard_timeout: status $rc after ${took}s (want 124 soon after 20s)"
	failed=1
fi
exit $failed
