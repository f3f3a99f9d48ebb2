#!/bin/sh
# Agent benchmark: exec round trips of `true` and stream throughput, against
# the agent in a guest over virtio-vsock, and against the same agent as a
# host process on a Unix socket (the ceiling). Run through tools/husk-kvm-run.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$top/build/bin
runs=${HUSK_BENCH_RUNS:-200}
mib=${HUSK_BENCH_MIB:-64}
T=$(mktemp -d)
trap 'kill $agent $vmm 2>/dev/null; rm -rf "$T"' EXIT
agent= vmm=

"$bin/husk-agent" --listen "unix:$T/agent.sock" >/dev/null 2>&1 &
agent=$!
for i in $(seq 1 100); do [ -S "$T/agent.sock" ] && break; sleep 0.05; done
echo "measuring the agent on a Unix socket..." >&2
"$bin/agentbench" --unix "$T/agent.sock" "$runs" "$mib" >"$T/host"

"$bin/husk-vmm" --kernel "$top/build/images/vmlinux" --initrd "$top/build/images/initramfs.cpio" \
	--mem 512M --vcpus 2 --cmdline quiet --vsock "$T/vsock.sock" --console "$T/console" &
vmm=$!
for i in $(seq 1 600); do grep -q "ready, guest" "$T/console" 2>/dev/null && break; sleep 0.1; done
echo "measuring the agent in a guest over vsock..." >&2
"$bin/agentbench" --vsock "$T/vsock.sock" "$runs" "$mib" >"$T/guest"

echo "agent benchmark: $runs execs of true, $mib MiB each way"
awk -v host="$(cat "$T/host")" -v guest="$(cat "$T/guest")" 'BEGIN {
	n = split(host, h, " "); for (i = 1; i <= n; i++) { split(h[i], kv, "="); H[kv[1]] = kv[2] }
	n = split(guest, g, " "); for (i = 1; i <= n; i++) { split(g[i], kv, "="); G[kv[1]] = kv[2] }
	printf "\n%-22s %14s %14s %10s\n", "", "guest (vsock)", "host (unix)", "ratio"
	printf "%-22s %14.3f %14.3f %10.2f\n", "exec true p50 ms", G["exec_p50_ms"], H["exec_p50_ms"], G["exec_p50_ms"] / H["exec_p50_ms"]
	printf "%-22s %14.3f %14.3f %10.2f\n", "exec true p99 ms", G["exec_p99_ms"], H["exec_p99_ms"], G["exec_p99_ms"] / H["exec_p99_ms"]
	printf "%-22s %14.3f %14.3f %10.2f\n", "info p50 ms (no proc)", G["info_p50_ms"], H["info_p50_ms"], G["info_p50_ms"] / H["info_p50_ms"]
	printf "%-22s %14.1f %14.1f %10.2f\n", "host->guest MB/s", G["h2g_mbs"], H["h2g_mbs"], G["h2g_mbs"] / H["h2g_mbs"]
	printf "%-22s %14.1f %14.1f %10.2f\n", "guest->host MB/s", G["g2h_mbs"], H["g2h_mbs"], G["g2h_mbs"] / H["g2h_mbs"]
	print "(ratio: guest / host; for latency lower is better, for throughput higher)"
	e = G["exec_p50_ms"] / H["exec_p50_ms"]; hg = G["h2g_mbs"] / H["h2g_mbs"]; gh = G["g2h_mbs"] / H["g2h_mbs"]
	printf "goal: exec p50 over vsock <= 1.2 x a Unix socket (%.2f): %s\n", e, e <= 1.2 ? "met" : "NOT met"
	printf "goal: vsock >= 0.8 of a Unix socket both ways (%.2f, %.2f): %s\n", hg, gh, (hg >= 0.8 && gh >= 0.8) ? "met" : "NOT met"
}'
"$bin/husk-agentctl" --vsock "$T/vsock.sock" exec -- poweroff -f >/dev/null 2>&1 || true
wait $vmm || true
vmm=
