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
# PSS, RSS (KiB) of the husk-vmm processes; RSS of one.
vmm_kib() {
	for p in $(ps -o pid,args | awk '/husk-vmm --(restore|kernel)/ && !/awk/ { print $1 }'); do
		awk -v k="$1" '$1 == k ":" { print $2 }' "/proc/$p/smaps_rollup"
	done
}

echo "templates bench: create -> first exec, booting (--templates off)..." >&2
bench_huskd --templates off --max-vcpus 64
node "$top/tools/bench/templates.mjs" >"$T/out" <&- || { tail -n 20 "$T/huskd.log" >&2; exit 1; }
# One booted sandbox's VMM, for a copy's size.
"$top/build/bin/husk" create --memory 256Mi >"$T/id"
copy=$(tail -n 1 "$T/id")
"$top/build/bin/husk" exec "$copy" -- true
echo "copy_rss_kib=$(vmm_kib Rss | head -n 1)" >>"$T/out"
"$top/build/bin/husk" delete "$copy" --confirm >/dev/null
kill "$pid"
wait "$pid" 2>/dev/null || true
echo "templates bench: the same restoring the template..." >&2
bench_huskd --max-vcpus 64
mkfifo "$T/in"
MODE=template node "$top/tools/bench/templates.mjs" <"$T/in" >>"$T/out" &
node_pid=$!
exec 3>"$T/in"
i=0
until grep -q '^children_held=' "$T/out" || ! kill -0 $node_pid 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 36000 ] || { echo "templates bench: the children never came up" >&2; exit 1; }
	sleep 0.1
done
grep -q '^children_held=' "$T/out" || { tail -n 20 "$T/huskd.log" >&2; exit 1; }
# Every running VMM is a template child now (the booted one was deleted).
echo "children_pss_kib=$(vmm_kib Pss | awk '{ s += $1 } END { print s }')" >>"$T/out"
echo "children_n=$(vmm_kib Pss | wc -l)" >>"$T/out"
echo done >&3
wait $node_pid
exec 3>&-
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
