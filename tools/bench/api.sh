#!/bin/sh
# API benchmark: huskd (release build) driven by the published client
# (tools/bench/api.mjs): create → first exec, exec round trips through the
# API (the published client, and the same two requests from a C client on
# one kept connection, as both the published client and agentbench keep theirs:
# tools/bench/apibench.c, its execs in turn with execs straight to the agent)
# against the same sandbox's agent reached directly over vsock, and
# HUSK_BENCH_API_PARALLEL (20) sandboxes at once. Run through tools/husk-kvm-run.
# Templates are off here, so that a create is a cold boot (and a snapshot's
# child reads the snapshot's file): tools/bench/templates.sh measures them.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$top/build/bin
port=18375
# shellcheck source=tools/bench/lib.sh
. "$top/tools/bench/lib.sh"
# HUSK_BENCH_HUSKD_ARGS: more huskd flags (e.g. --seal off, to compare with a tree without sealing).
bench_huskd --templates off ${HUSK_BENCH_HUSKD_ARGS:-}
echo "measuring the API with the published client..." >&2
# Each figure is shown as it is measured (a long run is not silent), and kept for the table.
# (tee's status is the pipe's: a run that ended early shows as a missing last figure.)
HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key node "$top/tools/bench/api.mjs" | tee "$T/api" >&2
grep -q '^hold_n=' "$T/api" || bench_failed "api.mjs ended early"
# What went wrong on the way, if anything did (a refusal at create is expected past --max-vcpus).
grep -E '^[^ ]+ (warn|error) ' "$T/huskd.log" | grep -v ' 503 HOST_FULL: ' | tail -n 40 >&2
id=$(sed -n 's/^direct_id=//p' "$T/api")
echo "measuring the same execs through the API with a C client (huskd's own cost), in turn with execs straight to the agent..." >&2
"$bin/apibench" http://127.0.0.1:$port $key "$id" "${HUSK_BENCH_API_EXECS:-50}" \
	"$T/state/sandboxes/$id/vsock.sock" >"$T/capi"
tr ' ' '\n' <"$T/capi" >>"$T/api"
echo "measuring the same sandbox's agent directly over vsock..." >&2
"$bin/agentbench" --vsock "$T/state/sandboxes/$id/vsock.sock" "${HUSK_BENCH_API_EXECS:-50}" 1 >"$T/direct"
tr ' ' '\n' <"$T/direct" >>"$T/api"

awk '{ k = $0; sub(/=.*/, "", k); sub(/^[^=]*=/, ""); v[k] = $0 } END {
	print "\napi benchmark (huskd + @agentuity/core; base:latest, 256Mi guests)"
	printf "%-34s %12s %12s %8s\n", "", "through API", "direct", "ratio"
	printf "%-34s %12.1f %12.1f %8.2f\n", "exec true p50 ms", v["api_exec_p50_ms"], v["exec_p50_ms"], v["api_exec_p50_ms"] / v["exec_p50_ms"]
	printf "%-34s %12.1f %12.1f %8.2f\n", "exec true p99 ms", v["api_exec_p99_ms"], v["exec_p99_ms"], v["api_exec_p99_ms"] / v["exec_p99_ms"]
	printf "%-34s %12.1f\n", "  of which the client itself p50", v["client_own_exec_p50_ms"]
	printf "%-34s %12.1f %12.1f %8.2f\n", "  the rest (huskd, guest) p50 ms", v["api_exec_p50_ms"] - v["client_own_exec_p50_ms"], v["exec_p50_ms"], (v["api_exec_p50_ms"] - v["client_own_exec_p50_ms"]) / v["exec_p50_ms"]
	printf "%-34s %12.1f %12.1f %8.2f\n", "  same, C client p50 ms (in turn)", v["capi_exec_p50_ms"], v["pair_exec_p50_ms"], v["capi_exec_p50_ms"] / v["pair_exec_p50_ms"]
	printf "%-34s %12.1f %12.1f %8.2f\n", "  same, C client p99 ms (in turn)", v["capi_exec_p99_ms"], v["pair_exec_p99_ms"], v["capi_exec_p99_ms"] / v["pair_exec_p99_ms"]
	printf "%-34s %12.1f %12s %8s\n", "one HTTP request (GET sandbox) p50", v["api_get_p50_ms"], "", ""
	printf "%-34s %12.1f\n", "create reply (creating) p50 ms", v["create_p50_ms"]
	printf "%-34s %12.1f\n", "create -> first exec p50 ms", v["create_first_exec_p50_ms"]
	printf "%-34s %12.1f\n", "create -> first exec max ms", v["create_first_exec_max_ms"]
	printf "%-34s %12.1f %12s %8.2f\n", "snapshot (memory) -> first exec p50", v["warm_first_exec_p50_ms"], "cold", v["warm_first_exec_p50_ms"] / v["create_first_exec_p50_ms"]
	printf "%-34s %12.1f %12s %8.2f\n", "snapshot (memory) -> first exec max", v["warm_first_exec_max_ms"], "cold", v["warm_first_exec_max_ms"] / v["create_first_exec_max_ms"]
	printf "%-34s %12.1f %12s %8.2f\n", "snapshot (disk) -> first exec p50", v["disk_first_exec_p50_ms"], "cold", v["disk_first_exec_p50_ms"] / v["create_first_exec_p50_ms"]
	printf "%-34s %12.1f\n", "take snapshot with memory ms", v["snapshot_memory_ms"]
	printf "%-34s %12.1f\n", "take snapshot, disk only ms", v["snapshot_disk_ms"]
	printf "%-34s %12.1f %12s %8.2f\n", "pause -> first exec after resume p50", v["resume_first_exec_p50_ms"], "cold", v["resume_first_exec_p50_ms"] / v["create_first_exec_p50_ms"]
	printf "%-34s %12.1f\n", "pause p50 ms", v["pause_p50_ms"]
	w = v["warm_first_exec_p50_ms"] / v["create_first_exec_p50_ms"]
	printf "goal: snapshot (memory) start to first exec <= 0.10 of a cold boot (%.2f): %s\n", w, w <= 0.10 ? "met" : "NOT met"
	u = v["resume_first_exec_p50_ms"] / v["create_first_exec_p50_ms"]
	printf "goal: resume to first exec <= 0.10 of a cold boot (%.2f): %s\n", u, u <= 0.10 ? "met" : "NOT met"
	printf "%d at once: %d ok, %d refused at create (after the client retried each 503), wall %.0f ms; each create+exec+destroy p50 %.0f ms, max %.0f ms\n", \
		v["parallel_n"], v["parallel_ok"], v["parallel_refused"], v["parallel_wall_ms"], v["parallel_each_p50_ms"], v["parallel_each_max_ms"]
	if (v["parallel_refused"] > 0)
		printf "  (refused: %s)\n", v["parallel_refused_why"]
	printf "parallel speed-up: %.2f (%d x one create+first exec / wall)\n", \
		v["parallel_ok"] * v["create_first_exec_p50_ms"] / v["parallel_wall_ms"], v["parallel_ok"]
	print "(ratio: through API / direct to the agent; lower is better)"
	r = v["api_exec_p50_ms"] / v["exec_p50_ms"]
	printf "goal: exec true through the API p50 <= 1.3 x the same exec straight to the agent, published client (%.2f): %s\n", r, r <= 1.3 ? "met" : "NOT met"
	c = v["capi_exec_p50_ms"] / v["pair_exec_p50_ms"]
	printf "goal: exec true through the API p50 <= 1.3 x the same exec straight to the agent, C client (%.2f): %s\n", c, c <= 1.3 ? "met" : "NOT met"
	printf "concurrency: this host held %d sandboxes at once (256Mi guests, each up with one command), %.0f s to start them; it stopped at: %s\n", \
		v["hold_n"], v["hold_ms"] / 1000, v["hold_why"]
}' "$T/api"
