#!/bin/sh
# Checks tools/husk-kvm-run itself: the command's exit status comes back, a
# command that outlives the hard timeout is killed with status 124, and the
# boot, idle, heartbeat and killed-thread watchdogs end a wedged nested host.
set -u
cd "$(dirname "$0")/.."
failed=0

# One nested host for two checks: the command's output and exit status come
# back; and a brought program where the nested host has a busybox applet of
# that name (dpkg-deb is one) replaces the applet there and leaves this
# host's busybox as it was (it once wrote through the applet's link onto it).
before=$(sha256sum </bin/busybox)
# (by path: the nested host's busybox shell runs its own applet for a bare name)
dd=$(command -v dpkg-deb)
out=$(tools/husk-kvm-run --timeout 900 --bring "$dd" -- sh -c "echo marker-\$((6 * 7)); '$dd' --version; exit 7" 2>&1)
rc=$?
if [ "$rc" = 7 ] && echo "$out" | grep -q '^marker-42$'; then
	echo "PASS harness/exit_status_and_output"
else
	echo "FAIL harness/exit_status_and_output: status $rc, output: $(echo "$out" | tail -n 5)"
	failed=1
fi
if echo "$out" | grep -q "^Debian 'dpkg-deb'" && [ "$(sha256sum </bin/busybox)" = "$before" ]; then
	echo "PASS harness/bring_over_applet"
else
	echo "FAIL harness/bring_over_applet: busybox here $([ "$(sha256sum </bin/busybox)" = "$before" ] && echo unchanged || echo CHANGED), output: $(echo "$out" | tail -n 3)"
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

# Stopping the harness stops what it started (a stray emulator would eat the
# machine's CPU for the rest of its timeout).
# descendants PID: every process below PID.
descendants() {
	for c in $(pgrep -P "$1"); do
		echo "$c"
		descendants "$c"
	done
}
# The emulator is looked for once the command runs in it (it says so), not
# after a guess at how long a boot takes.
log=$(mktemp)
tools/husk-kvm-run --timeout 900 -- sh -c 'echo running-1017; exec sleep 1017' >"$log" 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null && ! grep -q '^running-1017' "$log"; do
	sleep 0.2
done
# Only our own emulator counts: other jobs on this machine may run theirs.
ours=$(for p in $(descendants $pid); do
	grep -q qemu-system "/proc/$p/comm" 2>/dev/null && echo "$p"
done)
kill -TERM $pid
wait $pid
rc=$?
# An emulator told to stop may take a moment to go; 60 s is far beyond that.
tries=0
while :; do
	left=0
	for p in $ours; do
		kill -0 "$p" 2>/dev/null && left=$((left + 1))
	done
	[ "$left" -gt 0 ] && [ $tries -lt 300 ] || break
	tries=$((tries + 1))
	sleep 0.2
done
if [ -n "$ours" ] && [ "$rc" -ge 128 ] && [ "$left" -le 0 ] && ! pgrep -f 'sleep 1017' >/dev/null; then
	echo "PASS harness/term_stops_everything"
else
	echo "FAIL harness/term_stops_everything: status $rc, $left of its emulator(s) (${ours:-none found}) left running, output: $(tail -n 5 "$log")"
	failed=1
fi
rm -f "$log"

# A nested host that never reaches the command is retried once, then
# reported with its console instead of hanging until the hard timeout.
# HUSK_L1_HOLD_BOOT holds the boot for good, so the watchdog must fire
# however fast the nested host boots (before or after the hold is reached).
if [ -e /sys/module/kvm_intel ] || [ -e /sys/module/kvm_amd ]; then
	echo "SKIP harness/boot_watchdog: hardware KVM here, no nested host"
else
	out=$(HUSK_L1_HOLD_BOOT=1 HUSK_L1_BOOT_LIMIT=1 tools/husk-kvm-run --timeout 900 -- true 2>&1)
	rc=$?
	if [ "$rc" = 125 ] && echo "$out" | grep -q 'wedged twice'; then
		echo "PASS harness/boot_watchdog"
	else
		echo "FAIL harness/boot_watchdog: status $rc, output: $(echo "$out" | tail -n 5)"
		failed=1
	fi
fi
# early_wedge NAME VAR=VALUE MARK SAYS SCRIPT [ALSO]...: SCRIPT makes the
# nested host look wedged in a way husk-kvm-run (a limit of it set by VAR)
# takes before --idle: it must exit 123 with a line matching MARK, one
# saying SAYS and one matching each ALSO.
early_wedge() {
	name=$1 var=$2 mark=$3 says=$4 script=$5
	shift 5
	out=$(env "$var" tools/husk-kvm-run --timeout 900 --idle 600 -- sh -c "$script" 2>&1)
	rc=$?
	also=1
	for re in "$@"; do echo "$out" | grep -q "$re" || also=0; done
	if [ "$rc" = 123 ] && echo "$out" | grep -q "$mark" && echo "$out" | grep -q "$says" && [ $also = 1 ]; then
		echo "PASS harness/$name"
	else
		echo "FAIL harness/$name: status $rc, output: $(echo "$out" | tail -n 8)"
		failed=1
	fi
}

# nested_death NAME SYSRQ SAYS: the nested host's kernel takes sysrq SYSRQ
# (c: panic, b: reset) while the command runs; husk-kvm-run must exit 123 saying SAYS.
# The command's mark goes through the kernel log at KERN_EMERG (the nested
# host's console level is 1), which reaches the serial console before the
# write returns: a line on stdout may still sit in the tty's buffer when the
# reset comes, and be lost (seen in CI).
nested_death() {
	early_wedge "$1" HUSK_TEST_CASE="$1" "\] before-$2\$" "$3" \
		"echo '<0>before-$2' >/dev/kmsg; echo $2 >/proc/sysrq-trigger; sleep 1019"
}

if [ -e /sys/module/kvm_intel ] || [ -e /sys/module/kvm_amd ]; then
	echo "SKIP harness/idle_watchdog: hardware KVM here, no nested host"
else
	start=$(date +%s)
	out=$(tools/husk-kvm-run --timeout 900 --idle 10 -- sh -c 'echo before-idle; sleep 1019' 2>&1)
	rc=$?
	took=$(($(date +%s) - start))
	if [ "$rc" = 123 ] && [ "$took" -lt 300 ] && echo "$out" | grep -q '^before-idle$' &&
		echo "$out" | grep -q 'no output from the command for 10s' && ! pgrep -f 'sleep 1019' >/dev/null; then
		echo "PASS harness/idle_watchdog"
	else
		echo "FAIL harness/idle_watchdog: status $rc after ${took}s, output: $(echo "$out" | tail -n 8)"
		failed=1
	fi
	# A panic of the nested host's own kernel, or a reset without a word, is
	# taken like a wedge (123), not as the command failing: seen under TCG.
	nested_death panic_is_a_wedge c "kernel panicked (above); exit 123"
	nested_death reset_is_a_wedge b "reset itself before the command ended; exit 123"
	# A nested host where nothing runs any more (seen under TCG: both CPUs
	# lost in KVM_RUN) stops its heartbeat: ended well before --idle, once
	# husk-kvm-unstick.mjs has shown where its CPUs were (through QEMU's
	# monitor), dropped the emulator's code (through its gdb stub), woken
	# its CPUs (all idle here) with an NMI, and the heartbeat still did not
	# come back. Here the command stops the watcher that beats.
	early_wedge heartbeat_watchdog HUSK_L1_HEARTBEAT_LIMIT=30 '^watcher-gone$' \
		'no heartbeat from the nested host for 30s, nor after its code was dropped' '
		for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = husk-watch ] && kill -9 ${p##*/}; done
		echo watcher-gone; sleep 1019' \
		'stuck: CPU 1: RIP [0-9a-f]\{16\} CPL [0-3] HLT [01]; code there: [0-9a-f ]* (' \
		"dropped the emulator's code translated from [12] page(s) (gdb stub: T[0-9a-f][0-9a-f], detach OK; QEMU's count of invalidated blocks [0-9][0-9]* -> [0-9][0-9]*)"
	# The write-back made QEMU invalidate code it had translated from those pages.
	counts=$(echo "$out" | sed -n "s/.*QEMU's count of invalidated blocks \([0-9]*\) -> \([0-9]*\)).*/\1 \2/p")
	if [ -n "$counts" ] && [ "${counts#* }" -gt "${counts% *}" ]; then
		echo "PASS harness/write_back_invalidates ($counts)"
	else
		echo "FAIL harness/write_back_invalidates: the count did not rise: '$counts'"
		failed=1
	fi
	# Its CPUs (idle) get an NMI when the look after the flush found both
	# halted, and only then (a CPU seen running makes this a skip).
	if echo "$out" | grep -q 'after the flush: CPU 0: .* HLT 1;' &&
		echo "$out" | grep -q 'after the flush: CPU 1: .* HLT 1;'; then
		if echo "$out" | grep -q 'every CPU was halted: sent them an NMI' &&
			echo "$out" | grep -q 'after the NMI: CPU 1: RIP'; then
			echo "PASS harness/halted_host_gets_an_nmi"
		else
			echo "FAIL harness/halted_host_gets_an_nmi: $(echo "$out" | grep 'husk-kvm-run:' | tail -n 6)"
			failed=1
		fi
	elif echo "$out" | grep -q 'sent them an NMI'; then
		echo "FAIL harness/halted_host_gets_an_nmi: sent though a CPU ran: $(echo "$out" | grep 'after the flush')"
		failed=1
	else
		echo "SKIP harness/halted_host_gets_an_nmi: a CPU ran when looked at"
	fi
	# A thread that outlives its SIGKILL (a vCPU stuck in the nested host's
	# KVM_RUN, seen under TCG) makes the host wedged, long before --idle. The
	# stand-in: a task frozen by the cgroup v1 freezer keeps its SIGKILL
	# pending until thawed.
	early_wedge killed_thread_is_a_wedge HUSK_L1_STUCK_LIMIT=10 '^killed-frozen$' \
		'of sleep has outlived its SIGKILL by 10s' '
		mkdir -p /tmp/fz && mount -t cgroup -o freezer none /tmp/fz && mkdir /tmp/fz/a || exit 1
		sleep 1021 & echo $! >/tmp/fz/a/cgroup.procs && echo FROZEN >/tmp/fz/a/freezer.state
		while [ "$(cat /tmp/fz/a/freezer.state)" != FROZEN ]; do sleep 0.1; done
		kill -9 $!; echo killed-frozen; sleep 1019'
fi
exit $failed
