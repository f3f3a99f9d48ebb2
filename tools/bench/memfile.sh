#!/bin/sh
# Memory-file benchmark (issue J): a 256 MiB guest booted to its agent with
# 64 MiB of tmpfs data (what a runtime's template holds), paused and saved;
# its RAM extracted once to a memory file. Then restore to first exec three
# ways (--eager, --lazy, --mem-file), and density: N children restored at
# once from the one memory file (HUSK_BENCH_CHILDREN, default 20), the sum
# of their PSS against N copies (N times the RSS of one child restored
# --eager, which holds the guest's memory as its own). Run through
# tools/husk-kvm-run (make bench does).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$top/build/bin
n=${HUSK_BENCH_CHILDREN:-20}
mem=256
T=$(mktemp -d)
pids=""
trap 'for p in $pids; do kill -9 $p 2>/dev/null || true; done; rm -rf "$T"' EXIT

ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; } # 10 ms resolution
agent() {
	v=$1
	shift
	"$bin/husk-agentctl" --vsock "$T/vsock$v" "$@"
}
fail() {
	echo "memfile bench: $1" >&2
	tail -n 20 "$T"/stderr* >&2 2>/dev/null || true
	exit 1
}
# until_agent I PID: retries a trivial exec on child I until it answers (bounded).
until_agent() {
	i_=0
	until agent "$1" exec -- true >/dev/null 2>&1; do
		kill -0 "$2" 2>/dev/null || return 1
		i_=$((i_ + 1))
		[ $i_ -lt 6000 ] || return 1
		sleep 0.05
	done
}
rollup() { awk -v k="$2" '$1 == k ":" { print $2 }' "/proc/$1/smaps_rollup"; }

# The template: booted, 64 MiB of data, saved.
"$bin/husk-vmm" --kernel "$top/build/images/vmlinux" --initrd "$top/build/images/initramfs.cpio" \
	--mem ${mem}M --vcpus 1 --cmdline quiet --vsock "$T/vsock0" --control "$T/ctl" \
	--console "$T/console" 2>"$T/stderr" &
p=$!
pids=$p
until_agent 0 $p || fail "the guest did not boot"
agent 0 exec -- sh -c 'dd if=/dev/urandom of=/dev/shm/data bs=1048576 count=64 2>/dev/null' ||
	fail "the guest could not write its data"
[ "$("$bin/husk-agentctl" --control "$T/ctl" pause)" = paused ] || fail "pause failed"
"$bin/husk-agentctl" --control "$T/ctl" "snapshot $T/snap" >/dev/null || true
i=0
until [ "$("$bin/husk-agentctl" --control "$T/ctl" status)" = paused ] || [ $i -ge 60 ]; do i=$((i + 1)); done
"$bin/husk-agentctl" --control "$T/ctl" quit >/dev/null || fail "quit failed"
wait $p || fail "the saved VMM exited with $?"
t=$(ms)
"$bin/husk-vmm" --restore "$T/snap" --extract-memory "$T/mem" 2>>"$T/stderr" || fail "extract failed"
extract=$(($(ms) - t))

# restore MODE I: a child restored in MODE (--eager, --lazy, or --mem-file FILE) on vsock I;
# sets child (its pid) and took (ms to its first exec).
restore() {
	t=$(ms)
	# shellcheck disable=SC2086
	"$bin/husk-vmm" --restore "$T/snap" $1 --mem ${mem}M --vcpus 1 --vsock "$T/vsock$2" \
		--control "$T/ctl$2" --console "$T/console$2" 2>>"$T/stderr$2" &
	child=$!
	pids="$pids $child"
	until_agent "$2" $child || fail "child $2 ($1) did not answer"
	took=$(($(ms) - t))
}
stop() { agent "$1" exec -- poweroff -f >/dev/null 2>&1 || true; wait "$2" 2>/dev/null || true; }

restore --eager 100
eager=$took
eager_rss=$(rollup $child Rss)
stop 100 $child
restore --lazy 101
lazy=$took
stop 101 $child
restore "--mem-file $T/mem" 102
mapped=$took
stop 102 $child

# Density: n children at once from the one memory file.
i=1
while [ $i -le "$n" ]; do
	restore "--mem-file $T/mem" $i
	eval "c$i=$child"
	i=$((i + 1))
done
pss=0 dirty=0
i=1
while [ $i -le "$n" ]; do
	eval "c=\$c$i"
	pss=$((pss + $(rollup $c Pss)))
	dirty=$((dirty + $(rollup $c Private_Dirty)))
	i=$((i + 1))
done
copies=$((n * eager_rss))

awk -v eager="$eager" -v lazy="$lazy" -v mapped="$mapped" -v extract="$extract" -v n="$n" \
	-v pss="$pss" -v dirty="$dirty" -v copies="$copies" -v rss="$eager_rss" \
	-v size="$(($(stat -c %s "$T/snap") / 1024))" -v disk="$(($(du -sk "$T/mem" | cut -f1)))" '
function met(ok) { return ok ? "met" : "NOT met" }
BEGIN {
	printf "memory files: a %d MiB guest with 64 MiB of data, its snapshot (%.1f MiB) and memory file (%.1f MiB on disk, made in %d ms)\n", '"$mem"', size / 1024, disk / 1024, extract
	printf "  restore to first exec: --eager %d ms, --lazy %d ms, --mem-file %d ms (%.2f of eager)\n", eager, lazy, mapped, eager ? mapped / eager : 0
	printf "  %d children from one memory file: PSS summed %.1f MiB (%.1f MiB of it written by the children), against %d copies %.1f MiB (%d x the RSS of an eager child, %.1f MiB)\n", n, pss / 1024, dirty / 1024, n, copies / 1024, n, rss / 1024
	r = copies ? pss / copies : 0
	printf "  ratio %.2f (goal <= 0.25 of %d copies): %s\n", r, n, met(r <= 0.25)
	printf "  (restore: --restore start to the first agent exec that answers, 10 ms resolution, one run each)\n"
}'
