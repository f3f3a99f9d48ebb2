#!/bin/sh
# The agent as a plain host process (ASan+UBSan build) on a Unix socket:
# the protocol tests, then a clean shutdown with no sanitizer report.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
sock=$T/agent.sock
# --dial: nothing listens there until tests/agent/dial.sh, so it keeps retrying.
"$top/build/bin/husk-agent-san" --listen "unix:$sock" --dial "unix:$T/home.sock" >"$T/agent.log" 2>&1 &
agent=$!
trap 'kill $agent 2>/dev/null; rm -rf "$T"' EXIT
for i in $(seq 1 100); do [ -S "$sock" ] && break; sleep 0.05; done
failed=0
"$top/tests/agent/run.sh" --unix "$sock" agent || failed=1
"$top/build/tests/rawframes" --unix "$sock" || failed=1
# agent_session (the libuv client) against it; T holds its files.
"$top/build/tests/session-test" "$sock" "$T" || failed=1
"$top/tests/agent/dial.sh" $agent "$sock" "$T/home.sock" "$T/agent.log" || failed=1
kill -TERM $agent
wait $agent
rc=$?
if [ "$rc" = 0 ] && ! grep -q -e "runtime error" -e "Sanitizer" "$T/agent.log"; then
	echo "PASS agent/clean_exit_no_sanitizer_report"
else
	echo "FAIL agent/clean_exit_no_sanitizer_report: status $rc"
	cat "$T/agent.log"
	failed=1
fi
exit $failed
