#!/bin/sh
# Dialling home (guest-agent/PROTOCOL.md) with the agent as a host process.
# host.sh started it with --dial unix:HOME before anything listened there:
# it must have kept retrying, quietly; say HELLO to a listener that appears
# later and serve requests on that connection; dial again when the host
# closes it or goes away and comes back; and serve its own listener all along.
# usage: dial.sh AGENT_PID AGENT_SOCK HOME_SOCK AGENT_LOG
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
agent=$1
sock=$2
home=$3
log=$4
ctl="$top/build/bin/husk-agentctl --unix $sock"
T=$(mktemp -d)
host=""
trap '[ -n "$host" ] && kill $host 2>/dev/null; rm -rf "$T"' EXIT
failed=0

ok() { echo "PASS agent/$1"; }
bad() {
	echo "FAIL agent/$1: $2"
	failed=1
	for f in "$T"/host*.out; do
		[ -s "$f" ] && { echo "--- $f"; cat "$f"; }
	done
	echo "--- agent log"
	tail -n 20 "$log"
	return 0
}
# line FILE PATTERN: waits up to 30 s for a line of dialhost's output; fails
# at once if it reported an error.
line() {
	i=0
	until grep -q -- "$2" "$1" 2>/dev/null; do
		grep -q '^error' "$1" 2>/dev/null && return 1
		[ $i -ge 600 ] && return 1
		sleep 0.05
		i=$((i + 1))
	done
}
# host N ARGS...: dialhost on HOME in the background, output in $T/hostN.out
start_host() {
	out=$T/host$1.out
	shift
	"$top/build/tests/dialhost" "$home" --timeout 30 "$@" >"$out" 2>&1 &
	host=$!
}

boot_id=$(cat /proc/sys/kernel/random/boot_id)

# The agent has been dialling since it started, long before this listener.
if grep -q "dial unix:$home: No such file or directory" "$log"; then
	ok dial_retries_before_listener
else
	bad dial_retries_before_listener "no failed dial in the agent's log"
fi

# A host that serves two dials and closes each: the agent dials again.
start_host 1 --conns 2 --then close
wait $host
rc=$?
host=""
out=$T/host1.out
if grep -qx "hello 1 dial=1 protocol=1 boot_id=$boot_id agent=husk-agent [0-9.]*" "$out"; then
	ok dial_hello
else
	bad dial_hello "want dial 1, protocol 1, this boot's id"
fi
if grep -qx "info 1 protocol=1" "$out" && grep -qx "exec 1 exit=0 stdout=hi" "$out"; then
	ok dial_serves_requests
else
	bad dial_serves_requests "info or exec failed on the dialled connection"
fi
if [ "$rc" = 0 ] && grep -q "^hello 2 dial=2 " "$out" && grep -qx "exec 2 exit=0 stdout=hi" "$out"; then
	ok dial_again_after_host_close
else
	bad dial_again_after_host_close "dialhost exited $rc; want a second dial, dial 2"
fi

# No host now: the agent redials in the background and still serves its listener.
x=$(timeout 30 $ctl exec -- echo hi 2>&1)
[ "$x" = hi ] && ok dial_listener_while_redialling || bad dial_listener_while_redialling "got '$x'"

# The host comes back (a daemon restart): a new dial, held open; the
# listener serves alongside it.
start_host 2 --conns 1 --then wait
if line "$T/host2.out" "^exec 1 " && grep -q "^hello 1 dial=3 " "$T/host2.out" &&
	grep -qx "exec 1 exit=0 stdout=hi" "$T/host2.out"; then
	ok dial_again_after_host_restart
else
	bad dial_again_after_host_restart "want a dial with dial 3 served"
fi
x=$(timeout 30 $ctl exec -- echo hi 2>&1)
if [ "$x" = hi ] && kill -0 $host 2>/dev/null && ! grep -q "^ended" "$T/host2.out"; then
	ok dial_listener_meanwhile
else
	bad dial_listener_meanwhile "got '$x' with the dialled connection open"
fi
# That connection has lived over a second when the host goes (what counts
# as a connection that worked): the agent dials again at once.
sleep 1.2
kill $host
wait $host 2>/dev/null
start_host 3 --conns 1 --then close
wait $host
rc=$?
host=""
# (A redial may reach the dying host's listener first and be reset: dial 4
# or a later one, not exactly 4.)
n=$(sed -n 's/^hello 1 dial=\([0-9]*\) .*/\1/p' "$T/host3.out")
if [ "$rc" = 0 ] && [ "${n:-0}" -ge 4 ]; then
	ok dial_again_after_long_connection
else
	bad dial_again_after_long_connection "dialhost exited $rc with dial '${n}'; want a dial, the 4th or later"
fi

# Retrying stays quiet: at most one line a minute.
lines=$(grep -c "dial unix:$home: .*retrying" "$log")
age=$(ps -o etimes= -p "$agent" | tr -d ' ')
if [ -n "$age" ] && [ "$lines" -le $((1 + age / 60)) ]; then
	ok dial_retries_quietly
else
	bad dial_retries_quietly "$lines failure lines in ${age}s"
fi
exit $failed
