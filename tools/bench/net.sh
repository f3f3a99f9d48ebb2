#!/bin/sh
# Network benchmark: a guest's TCP connect latency and throughput to a server
# in a network namespace of this host (198.51.100.2, the documentation
# range: nothing leaves the machine), through husk-vmm's virtio-net and
# libslirp against QEMU microvm's -netdev user (the same libslirp), same
# kernel and initramfs. Goals: throughput >= 1.0x QEMU's, connect latency
# <= 1.0x. Run through tools/husk-kvm-run (make bench does).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$top/build/bin
mib=${HUSK_BENCH_NET_MIB:-32}
connects=${HUSK_BENCH_NET_CONNECTS:-100}
rounds=${HUSK_BENCH_NET_ROUNDS:-3}
# A guest run that never ends (seen twice) is stopped and its console shown: a hang guard.
limit=${HUSK_BENCH_NET_RUN_S:-900}
ip=/usr/sbin/ip
[ -x /sbin/ip ] && /sbin/ip -V 2>/dev/null | grep -q iproute2 && ip=/sbin/ip
command -v qemu-system-x86_64 >/dev/null || { echo "bench: qemu-system-x86_64 not found" >&2; exit 1; }
T=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill $server; $ip link del nb0 2>/dev/null; $ip netns del netbench 2>/dev/null; rm -rf "$T"' EXIT

mkdir -p /run/netns
$ip netns add netbench
$ip link add nb0 type veth peer name nb1 netns netbench
$ip addr add 198.51.100.1/24 dev nb0
$ip link set nb0 up
$ip -n netbench link set lo up
$ip -n netbench link set nb1 up
$ip -n netbench addr add 198.51.100.2/24 dev nb1
$ip netns exec netbench node "$top/tools/bench/netserve.mjs" 198.51.100.2 9000 "$mib" &
server=$!
# The server is up once its port answers (bounded, for one that never starts).
i=0
until $ip netns exec netbench sh -c 'cat /proc/net/tcp' | grep -q ':2328 .* 0A '; do
	i=$((i + 1))
	[ $i -lt 300 ] || { echo "bench: the network benchmark's server did not start" >&2; exit 1; }
	sleep 0.1
done

cat "$top/build/images/initramfs.cpio" "$top/build/images/bench.cpio" >"$T/initrd"
cmd="netbench 198.51.100.2 9000 $connects $mib"

run() { # VMM: one guest run, its figures on stdout
	rm -f "$T/console"
	if [ "$1" = husk ]; then
		timeout -s KILL "$limit" "$bin/husk-vmm" --kernel "$top/build/images/vmlinux" --initrd "$T/initrd" --mem 256M \
			--vcpus 1 --net slirp --console "$T/console" --cmdline "quiet husk.cmd=\"$cmd\"" ||
			echo "net bench: husk-vmm exited with status $?" >&2
	else
		timeout -s KILL "$limit" qemu-system-x86_64 -M microvm,acpi=off -accel kvm -cpu host -smp 1 -m 256 \
			-nodefaults -no-user-config -nographic -no-reboot -serial "file:$T/console" \
			-netdev user,id=n0 -device virtio-net-device,netdev=n0 \
			-kernel "$top/build/images/bzImage" -initrd "$T/initrd" \
			-append "console=ttyS0 quiet panic=-1 pci=off reboot=t husk.halt=reboot ip=dhcp husk.cmd=\"$cmd\"" ||
			echo "net bench: qemu exited with status $?" >&2
	fi
	grep '^connect_p50_ms=' "$T/console" | tr -d '\r' || {
		echo "net bench: the guest run on $1 failed:" >&2
		tail -n 40 "$T/console" >&2
		exit 1
	}
}

echo "network benchmark: guest -> 198.51.100.2 (a namespace of this host), $connects connects, $mib MiB each way, $rounds rounds, alternating"
i=0
while [ "$i" -lt "$rounds" ]; do
	i=$((i + 1))
	if [ $((i % 2)) = 1 ]; then
		run husk >>"$T/husk"
		run qemu >>"$T/qemu"
	else
		run qemu >>"$T/qemu"
		run husk >>"$T/husk"
	fi
	echo "  round $i: husk $(tail -n 1 "$T/husk")" >&2
	echo "  round $i: qemu $(tail -n 1 "$T/qemu")" >&2
done

median() {
	awk -v k="$2" '{ for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) print substr($i, length(k) + 2) }' "$1" |
		sort -n | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

printf "\n%-22s %12s %12s %8s\n" "" "husk-vmm" "qemu user" "ratio"
for k in connect_p50_ms connect_p99_ms tx_mbs rx_mbs; do
	h=$(median "$T/husk" $k)
	q=$(median "$T/qemu" $k)
	case $k in
	connect_p50_ms) label="connect p50 ms" ;;
	connect_p99_ms) label="connect p99 ms" ;;
	tx_mbs) label="guest->out MB/s" ;;
	rx_mbs) label="out->guest MB/s" ;;
	esac
	awk -v l="$label" -v h="$h" -v q="$q" 'BEGIN { printf "%-22s %12.3f %12.3f %8.2f\n", l, h, q, (q > 0 ? h / q : 0) }'
	eval "$k=\$h q_$k=\$q"
done
# shellcheck disable=SC2154
awk -v htx="$tx_mbs" -v qtx="$q_tx_mbs" -v hrx="$rx_mbs" -v qrx="$q_rx_mbs" -v hc="$connect_p50_ms" -v qc="$q_connect_p50_ms" 'BEGIN {
	printf "\ngoal: throughput >= 1.0x QEMU user networking (both ways): %s\n", (htx >= qtx && hrx >= qrx) ? "met" : "NOT met"
	printf "goal: connect latency <= 1.0x QEMU user networking (median): %s\n", (hc <= qc) ? "met" : "NOT met"
}'
