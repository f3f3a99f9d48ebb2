#!/bin/sh
# A load test of huskd (ASan) on the host: no KVM, husk-vmm played by
# build/tests/fake-vmm (tests/fakes/README.md), driven by tests/api/load.mjs
# with the published client. huskd must survive it all, answer no 5xx, cut no
# stream, leave no VMM behind, log no sanitizer report and no "a bug in
# huskd", and exit 0 on SIGTERM. Prints PASS/FAIL lines "load/<name>".
set -u
port=18374
. "$(dirname "$0")/lib.sh"

began=$(date +%s)
state=$T/state
img=$T/images
limit=$((16 << 20)) # huskd --output-limit: endless output stops being kept here
rc=0

# The fake-vmm processes of this test's state folder (by /proc: the command
# line is long, and no grep of ours may match itself).
vmms() {
	for p in /proc/[0-9]*; do
		cmd=$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
		case $cmd in
		*fake-vmm*"$state/sandboxes/"*)
			# A warm VMM (huskd --warm-pool) is no sandbox's: its folder holds warm.pid.
			id=$(echo "$cmd" | sed -n "s|.*$state/sandboxes/\([^/ ]*\)/.*|\1|p")
			[ -e "$state/sandboxes/$id/warm.pid" ] || echo "${p#/proc/}"
			;;
		esac
	done
}
# Whether huskd runs (it is our child: a zombie once it ended, until waited for).
running() {
	s=$(cut -d' ' -f3 /proc/$pid/stat 2>/dev/null)
	[ -n "$s" ] && [ "$s" != Z ]
}
# On any exit: huskd and what it left running go (VMMs outlive huskd by design).
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; for v in $(vmms); do kill -9 $v; done; rm -rf "$T"' EXIT

# A runtime catalog of one small base: the kernel files only have to exist.
fake_images "$img" || {
	echo "FAIL load/huskd_starts: cannot make a base image with husk-img"
	exit 1
}

# huskd as lib.sh's start_huskd starts it, with the fake VMM and these images.
# --max-guest-memory: the load fits, a 64Gi sandbox does not (503 HOST_FULL);
# --max-vcpus: fakes have none to run, the load's 40 and more fit.
HUSK_API_KEY=$key "$top/build/bin/huskd-san" --port "$port" --state "$state" --images "$img" \
	--vmm "$top/build/tests/fake-vmm" --output-limit $limit --max-guest-memory 64Gi --max-vcpus 1000 \
	>>"$T/huskd.log" 2>&1 &
pid=$!
i=0
while [ $i -lt 100 ] && ! grep -q listening "$T/huskd.log" 2>/dev/null && running; do
	sleep 0.1
	i=$((i + 1))
done
if ! grep -q listening "$T/huskd.log"; then
	echo "FAIL load/huskd_starts: huskd did not start; its log:"
	cat "$T/huskd.log"
	exit 1
fi
echo "PASS load/huskd_starts"

# The load itself; load.mjs has its own deadline, timeout is the backstop.
HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key HUSK_OUTPUT_LIMIT=$limit HUSKD_PID=$pid \
	timeout 170 node "$top/tests/api/load.mjs"
status=$?
if [ $status = 124 ]; then
	echo "FAIL load/finished_in_time: load.mjs was stopped after 170 s"
	rc=1
elif [ $status != 0 ]; then
	rc=1
fi

# huskd is still there after it all.
if ! running; then
	echo "FAIL load/huskd_alive: huskd is gone (its log is below)"
	rc=1
else
	echo "PASS load/huskd_alive"
fi

# A pause: the fake VMM saves, quits and exits by itself, in its jail (where
# there is no /proc for the sanitizers' exit check); the sandbox must be
# paused, not failed, and resume.
suite=load
if h create --json --runtime base:latest; then
	p_id=$(sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1)
	# An exec first: it waits for the guest to be up, which a pause does not.
	h exec "$p_id" -- true && h pause "$p_id" && h get "$p_id" --json
	p_paused=$(grep -o '"status": *"[a-z]*"' "$T/o" | head -n 1)
	h resume "$p_id" && h exec "$p_id" -- echo back
	if [ "$p_paused" = '"status": "paused"' ] && [ "$(cat "$T/o")" = back ]; then
		pass pause_quits_cleanly
	else
		fail pause_quits_cleanly "after the pause: $p_paused; exec after the resume: '$(cat "$T/o")'; $(cat "$T/e") $(grep "$p_id" "$T/huskd.log" | tail -n 3)"
	fi
	h destroy "$p_id"
else
	fail pause_quits_cleanly "create: status $cli_s"
fi

# A command whose sandbox fails under it (its VMM killed): husk exec says why,
# not only status 1 (CI27: a bare "exit 1" hid a sandbox that had failed).
if h create --json --runtime base:latest; then
	f_id=$(sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1)
	(
		HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key "$top/build/bin/husk-san" exec "$f_id" -- sleep 600 \
			>"$T/f.o" 2>"$T/f.e"
		echo $? >"$T/f.s"
	) &
	bg=$!
	# Its command runs: huskd's long-poll answers once the sandbox's status says so.
	U=http://127.0.0.1:$port K=$key node --input-type=module -e "
		import { request } from '$top/tests/api/client/checks.mjs';
		await request(process.env.U, process.env.K, 'GET', '/sandbox/$f_id?waitForStatus=running&waitMs=60000');"
	for p in /proc/[0-9]*; do
		case $({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) in
		*fake-vmm*"$state/sandboxes/$f_id/"*) kill -9 "${p#/proc/}" ;;
		esac
	done
	wait $bg
	if [ "$(cat "$T/f.s")" = 1 ] && grep -q "husk: the command ended with status failed: ." "$T/f.e"; then
		pass exec_says_its_sandbox_failed
	else
		fail exec_says_its_sandbox_failed "status $(cat "$T/f.s"), stderr '$(cat "$T/f.e")'"
	fi
	h destroy "$f_id"
else
	fail exec_says_its_sandbox_failed "create: status $cli_s"
fi

# Every sandbox was destroyed: no VMM of this state folder may be left (their
# exit after SIGKILL is asynchronous: allow them 10 s to go; a dead huskd
# leaves them running by design, and kills none).
i=0
while running && [ -n "$(vmms)" ] && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
left=$(vmms)
if [ -n "$left" ]; then
	echo "FAIL load/no_vmm_left: fake-vmm still running after every sandbox was destroyed: $(echo "$left" | tr "\n" " ")"
	for v in $(echo "$left" | head -n 3); do { tr '\0' ' ' <"/proc/$v/cmdline"; } 2>/dev/null | cut -c1-300; echo; done
	rc=1
else
	echo "PASS load/no_vmm_left"
fi

# SIGTERM: huskd must exit 0 within 30 s.
kill -TERM $pid 2>/dev/null
i=0
while [ $i -lt 300 ] && running; do
	sleep 0.1
	i=$((i + 1))
done
if running; then
	echo "FAIL load/huskd_clean_exit: still running 30 s after SIGTERM; killed"
	kill -KILL $pid
	wait $pid
	rc=1
else
	wait $pid
	status=$?
	if [ $status = 0 ]; then
		echo "PASS load/huskd_clean_exit"
	else
		echo "FAIL load/huskd_clean_exit: exit status $status"
		rc=1
	fi
fi
pid=

# Its log: no sanitizer report, no refused state move, no error but those asked for
# (HOST_FULL; the failure of the sandbox whose VMM was killed).
bad=$(grep -n "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:\|a bug in huskd" "$T/huskd.log")
errors=$(grep -n '^[0-9TZ:.-]* error ' "$T/huskd.log" | grep -v ' 503 HOST_FULL: ' |
	grep -v " \[${f_id:-none}\] failed: husk-vmm was killed by signal 9")
if [ -n "$bad" ]; then
	echo "FAIL load/huskd_log_clean: $(echo "$bad" | head -n 5 | tr '\n' ' ')"
	# The report, with the log lines before it.
	first=$(echo "$bad" | head -n 1 | cut -d: -f1)
	sed -n "$((first > 10 ? first - 10 : 1)),$((first + 60))p" "$T/huskd.log"
	rc=1
	shown=1
elif [ -n "$errors" ]; then
	echo "FAIL load/huskd_log_clean: $(echo "$errors" | wc -l) error lines, first: $(echo "$errors" | head -n 3 | tr '\n' ' ')"
	rc=1
else
	echo "PASS load/huskd_log_clean"
fi
if [ $rc != 0 ] && [ -z "${shown:-}" ]; then
	echo "load: the end of huskd's log:"
	tail -n 30 "$T/huskd.log"
fi
echo "load: took $(($(date +%s) - began)) s"
exit $rc
