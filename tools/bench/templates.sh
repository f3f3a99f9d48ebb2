#!/bin/sh
# Template benchmark (issue J): huskd (release build) and the published
# client (tools/bench/templates.mjs). create -> first exec of base:latest
# (256Mi) booting every time (--templates off) against restoring the shape's
# template; then 20 sandboxes of the template held at once: the sum of their
# VMMs' PSS against 20 copies (20 times the RSS of one VMM of a booted
# sandbox, which holds its guest's memory as its own). Run through
# tools/husk-kvm-run (make bench does).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
port=18377
# shellcheck source=tools/bench/lib.sh
. "$top/tools/bench/lib.sh"
export HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key HUSKD_LOG=$T/huskd.log

echo "templates bench: create -> first exec, booting (--templates off)..." >&2
bench_huskd --templates off --max-vcpus 64
MODE=cold node "$top/tools/bench/templates.mjs" >"$T/out" || { tail -n 20 "$T/huskd.log" >&2; exit 1; }
kill "$pid"
wait "$pid" 2>/dev/null || true
echo "templates bench: the same restoring the template..." >&2
bench_huskd --max-vcpus 64
MODE=template node "$top/tools/bench/templates.mjs" >>"$T/out" ||
	{ grep -i "template\|error" "$T/huskd.log" | tail -n 20 >&2; exit 1; }
awk -F= '{ v[$1] = $2 } END {
	r = v["template_first_exec_p50_ms"] / v["cold_first_exec_p50_ms"]
	d = v["children_pss_kib"] / (v["children_n"] * v["copy_rss_kib"])
	print "\ntemplate benchmark (huskd + @agentuity/core; base:latest, 256Mi)"
	printf "%-44s %10.1f\n", "create -> first exec, booting p50 ms", v["cold_first_exec_p50_ms"]
	printf "%-44s %10.1f\n", "create -> first exec, booting max ms", v["cold_first_exec_max_ms"]
	printf "%-44s %10.1f  %.2f of booting\n", "create -> first exec, from template p50 ms", v["template_first_exec_p50_ms"], r
	printf "%-44s %10.1f\n", "create -> first exec, from template max ms", v["template_first_exec_max_ms"]
	printf "%d sandboxes of the template at once: PSS %.1f MiB in all; %d copies of a booted one %.1f MiB: ratio %.2f\n", \
		v["children_n"], v["children_pss_kib"] / 1024, v["children_n"], v["children_n"] * v["copy_rss_kib"] / 1024, d
	printf "goal: create -> first exec from a template <= 0.10 of booting (%.2f): %s\n", r, r <= 0.10 ? "met" : "NOT met"
	printf "goal: %d sandboxes of one template <= 0.25 of %d copies (%.2f): %s\n", v["children_n"], v["children_n"], d, d <= 0.25 ? "met" : "NOT met"
}' "$T/out"
