#!/bin/sh
# huskd end to end on real KVM, driven by the published client
# (@agentuity/core, tests/api/client). Runs through tools/husk-kvm-run.
# Prints PASS/FAIL lines.
set -u
port=18371
# A small output limit, so that outputTruncated can be seen; the nested host's
# disk is its memory, so huskd's reserve stays small here.
HUSKD_ARGS="--output-limit 1Mi --min-free-disk 64Mi"
. "$(dirname "$0")/lib.sh"

# up: huskd (with HUSKD_ARGS as they are) running, started if it is not.
up() {
	[ -z "$pid" ] || return 0
	if ! start_huskd $(($(listening) + 1)); then
		echo "FAIL api/huskd_starts: huskd did not start"
		cat "$T/huskd.log"
		exit 1
	fi
	echo "PASS api/huskd_starts"
}
rc=0

# The clients' errors hide huskd's reasons (any 409 reads "busy"): show them.
show_errors() {
	echo "--- huskd's errors ($1)"
	grep -E ' (error|warn) ' "$T/huskd.log" | tail -n 30
}

# The published client's checks, each a section of its own (HUSK_CHECK_SECTIONS:
# e2e_lib.mjs announces them and applies HUSK_SKIP and HUSK_ONLY).
case " ${HUSK_ONLY:-t_client_} " in
*" t_client_"*)
	up
	HUSK_CHECK_SECTIONS=1 client run.mjs || rc=1
	HUSK_CHECK_SECTIONS=1 client run_snap.mjs || rc=1
	;;
esac
[ $rc = 0 ] || show_errors client

if section restart; then
	up
	# A huskd restart keeps live sandboxes: their VMMs are adopted again.
	ids=$(client lifecycle.mjs create 2)
	stop_huskd api/huskd_stops_clean_with_sandboxes || rc=1
	start_huskd $(($(listening) + 1))
	TEST_NAME=restart_keeps_sandboxes client lifecycle.mjs alive $ids || rc=1

	# kill -9 of one VMM fails that sandbox, with an event, and no other.
	a=${ids%% *}
	# (by /proc: busybox's pkill reads only the start of a long command line)
	killed=
	for p in /proc/[0-9]*; do
		if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q "husk-vmm .*sandboxes/$a/"; then
			kill -9 "${p#/proc/}" && killed=1
		fi
	done
	[ -n "$killed" ] || { echo "FAIL api/vmm_killed: no VMM for $a"; rc=1; }
	TEST_NAME=vmm_kill_fails_that_sandbox client lifecycle.mjs failed "$a" || rc=1
	TEST_NAME=vmm_kill_leaves_others_working client lifecycle.mjs alive "${ids#* }" || rc=1
fi

if section cli; then
	up
	. "$(dirname "$0")/cli_e2e.sh"
fi
# E2B's API (API.md §11) with the unmodified e2b SDK, on a real guest.
if section e2b; then
	up
	E2B_REAL=1 client e2b.mjs || { rc=1; show_errors e2b; }
fi
[ -z "$pid" ] || stop_huskd api/huskd_clean_exit || rc=1

# huskd --on-idle pause: idle sandboxes go to disk instead of ending.
if section on_idle_pause; then
	HUSKD_ARGS="--on-idle pause --min-free-disk 64Mi"
	up
	HUSK_ON_IDLE=pause HUSK_TEST_ONLY=idle_pauses client run.mjs || rc=1
	stop_huskd api/huskd_clean_exit_on_idle_pause || rc=1
fi
exit $rc
