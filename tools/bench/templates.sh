#!/bin/sh
# Template benchmark (issue J): huskd (release build) and the published
# client (tools/bench/templates.mjs). create -> first exec of base:latest
# (256Mi) booting every time (--templates off) against restoring the shape's
# template; then 20 sandboxes of the template held at once: the sum of their
# VMMs' PSS against 20 copies (20 times the RSS of one VMM of a booted
# sandbox, which holds its guest's memory as its own); and a pause after the
# guest dirtied 64 MiB, a diff over the template's memory against a booted
# sandbox's full snapshot, each against a raw write of those bytes (and, not a
# goal, against sealing them: pauses are AES-256-GCM, which emulated AES-NI makes
# slow in the nested host), then resumed to its first exec. Run through
# tools/husk-kvm-run (make bench does). Also a snapshot's child mapping the
# snapshot's memory file, create -> first exec; 100 creates from the template, 8
# at a time, each to its first exec and destroyed: creates per second, p50, p99.
# Then with huskd --warm-pool 1: create -> first exec when a warm VMM is ready,
# of the template and of a snapshot's memory; and a template child's resume
# with its next VMM made ahead (huskd --resume-ahead; off in the runs before).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
port=18377
# shellcheck source=tools/bench/lib.sh
. "$top/tools/bench/lib.sh"
export HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key HUSKD_LOG=$T/huskd.log HUSK_STATE=$T/state

# run MODE WHAT HUSKD-ARGS...: huskd started with the arguments, templates.mjs in MODE
# appending its figures, huskd stopped.
run() {
	mode=$1 what=$2
	shift 2
	echo "templates bench: $what..." >&2
	bench_huskd "$@"
	MODE=$mode node "$top/tools/bench/templates.mjs" >>"$T/out" ||
		bench_failed "templates.mjs ($what) failed"
	kill "$pid"
	wait "$pid" 2>/dev/null || true
}
: >"$T/out"
run cold "create -> first exec, booting (--templates off)" --templates off --max-vcpus 64 --resume-ahead 0
# Unsealed: a snapshot's memory file (what the snapshot child figure is about) is made only of
# memory in the clear; sealing's own cost is in the snapshot benchmark.
run template "the same restoring the template (--warm-pool 0)" --max-vcpus 64 --seal off --warm-pool 0 \
	--resume-ahead 0
run warm "the same with a warm VMM ready (--warm-pool 1)" --max-vcpus 64 --seal off --warm-pool 1
awk -F= '{ v[$1] = $2 } END {
	r = v["template_first_exec_p50_ms"] / v["cold_first_exec_p50_ms"]
	d = v["children_pss_kib"] / (v["children_n"] * v["copy_rss_kib"])
	print "\ntemplate benchmark (huskd + @agentuity/core; base:latest, 256Mi)"
	printf "%-44s %10.1f\n", "create -> first exec, booting p50 ms", v["cold_first_exec_p50_ms"]
	printf "%-44s %10.1f\n", "create -> first exec, booting max ms", v["cold_first_exec_max_ms"]
	printf "%-44s %10.1f  %.2f of booting\n", "create -> first exec, from template p50 ms", v["template_first_exec_p50_ms"], r
	printf "%-44s %10.1f\n", "create -> first exec, from template max ms", v["template_first_exec_max_ms"]
	w = v["warm_first_exec_p50_ms"] / v["cold_first_exec_p50_ms"]
	printf "%-44s %10.1f  %.2f of booting (%d of %d took a warm VMM)\n", "create -> first exec, a warm VMM ready p50", v["warm_first_exec_p50_ms"], w, v["warm_taken"], v["warm_runs"]
	printf "%-44s %10.1f\n", "create -> first exec, a warm VMM ready max ms", v["warm_first_exec_max_ms"]
	k = v["snapchild_first_exec_p50_ms"] / v["cold_first_exec_p50_ms"]
	printf "%-44s %10.1f  %.2f of booting\n", "snapshot child (memory file) -> first exec p50", v["snapchild_first_exec_p50_ms"], k
	ks = v["warm_snapchild_first_exec_p50_ms"] / v["cold_first_exec_p50_ms"]
	printf "%-44s %10.1f  %.2f of booting (%d of %d took a warm VMM)\n", "snapshot child, a warm VMM ready p50", v["warm_snapchild_first_exec_p50_ms"], ks, v["warm_snap_taken"], v["warm_runs"]
	printf "%d sandboxes of the template at once: PSS %.1f MiB in all; %d copies of a booted one %.1f MiB: ratio %.2f\n", \
		v["children_n"], v["children_pss_kib"] / 1024, v["children_n"], v["children_n"] * v["copy_rss_kib"] / 1024, d
	printf "%d creates from the template, %d at a time: %.2f per second; create -> first exec p50 %.0f ms, p99 %.0f ms; %d failed\n", \
		v["burst_n"], v["burst_at_once"], v["burst_per_s"], v["burst_first_exec_p50_ms"], v["burst_first_exec_p99_ms"], v["burst_failed"]
	pd = v["template_pause_ms"] / v["raw_write_ms"]
	pf = v["cold_pause_ms"] / v["raw_write_ms"]
	gib = v["dirty_mib"] / 1024
	printf "pause after the guest dirtied %d MiB (random bytes):\n", v["dirty_mib"]
	printf "  %-42s %10.1f ms  %7.0f ms/GiB  file %6.1f MiB  %.2f of a raw write\n", "diff over the template (a child)", v["template_pause_ms"], v["template_pause_ms"] / gib, v["template_pause_bytes"] / 1048576, pd
	printf "  %-42s %10.1f ms  %7.0f ms/GiB  file %6.1f MiB  %.2f of a raw write\n", "full (a booted sandbox)", v["cold_pause_ms"], v["cold_pause_ms"] / gib, v["cold_pause_bytes"] / 1048576, pf
	printf "  %-42s %10.1f ms  %7.0f ms/GiB\n", "raw write of the same bytes, fsynced", v["raw_write_ms"], v["raw_write_ms"] / gib
	# Not a goal: what sealing alone costs here, and the diff against writing and sealing.
	printf "  %-42s %10.1f ms  %7.0f ms/GiB  (%.0f MB/s, one thread)\n", "AES-256-GCM of the same bytes", v["seal_ms"], v["seal_ms"] / gib, v["dirty_mib"] * 1.048576 / (v["seal_ms"] / 1000)
	printf "  %-42s %10.2f\n", "diff pause / (raw write + sealing)", v["template_pause_ms"] / (v["raw_write_ms"] + v["seal_ms"])
	u = v["template_resume_first_exec_ms"] / v["cold_first_exec_p50_ms"]
	printf "resume -> first exec after that pause (one each):\n"
	printf "  %-42s %10.1f ms  %.2f of booting\n", "a child of the template (diff)", v["template_resume_first_exec_ms"], u
	printf "  %-42s %10.1f ms  %.2f of booting\n", "a booted sandbox (full)", v["cold_resume_first_exec_ms"], v["cold_resume_first_exec_ms"] / v["cold_first_exec_p50_ms"]
	a = v["ahead_resume_first_exec_ms"] / v["cold_first_exec_p50_ms"]
	printf "  %-42s %10.1f ms  %.2f of booting\n", "a template child, its VMM made ahead", v["ahead_resume_first_exec_ms"], a
	printf "  (that VMM while it held the paused guest: RSS %.1f MiB, PSS %.1f MiB)\n", v["held_rss_kib"] / 1024, v["held_pss_kib"] / 1024
	printf "goal: create -> first exec from a template <= 0.10 of booting (%.2f): %s\n", r, r <= 0.10 ? "met" : "NOT met"
	printf "goal: create -> first exec, a warm VMM ready (huskd --warm-pool 1) <= 0.10 of booting (%.2f): %s\n", w, w <= 0.10 ? "met" : "NOT met"
	printf "goal: snapshot child -> first exec <= 0.10 of booting (%.2f): %s\n", k, k <= 0.10 ? "met" : "NOT met"
	printf "goal: snapshot child -> first exec, a warm VMM ready <= 0.10 of booting (%.2f): %s\n", ks, ks <= 0.10 ? "met" : "NOT met"
	printf "goal: resume -> first exec (a template child, %d MiB dirtied) <= 0.10 of booting (%.2f): %s\n", v["dirty_mib"], u, u <= 0.10 ? "met" : "NOT met"
	printf "goal: resume -> first exec, its VMM made ahead (huskd --resume-ahead) <= 0.10 of booting (%.2f): %s\n", a, a <= 0.10 ? "met" : "NOT met"
	printf "goal: pause (diff) <= 0.25 of a raw write of the dirtied memory (%.2f): %s\n", pd, pd <= 0.25 ? "met" : "NOT met"
	printf "goal: %d sandboxes of one template <= 0.25 of %d copies (%.2f): %s\n", v["children_n"], v["children_n"], d, d <= 0.25 ? "met" : "NOT met"
}' "$T/out"
