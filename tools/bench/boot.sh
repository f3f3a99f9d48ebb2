#!/bin/sh
# Boot benchmark: husk-vmm against QEMU's microvm, same kernel and initramfs,
# in the same KVM host, runs interleaved. Run it through tools/husk-kvm-run
# (make bench does). HUSK_BENCH_BOOTS sets the number of boots (default 10).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$top/build/bin
kernel=$top/build/images/bzImage
initrd=$top/build/images/initramfs.cpio
n=${HUSK_BENCH_BOOTS:-10}
mem=256
ready="husk-agent: version"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

command -v qemu-system-x86_64 >/dev/null || { echo "bench: qemu-system-x86_64 not found" >&2; exit 1; }

echo "boot benchmark: $n boots each, 1 vCPU, $mem MiB, kernel $(du -k "$kernel" | cut -f1) KiB, initramfs $(du -k "$initrd" | cut -f1) KiB"
i=0
while [ "$i" -lt "$n" ]; do
	i=$((i + 1))
	"$bin/bootbench" --ready "$ready" --mem-mib $mem -- \
		"$bin/husk-vmm" --kernel "$kernel" --initrd "$initrd" --mem ${mem}M --vcpus 1 \
		--cmdline "quiet husk.cmd=true" >>"$out/husk"
	# microvm without ACPI cannot power off: the agent reboots, reboot=t
	# triple-faults, and -no-reboot turns that into QEMU's exit.
	"$bin/bootbench" --ready "$ready" --mem-mib $mem -- \
		qemu-system-x86_64 -M microvm,acpi=off -accel kvm -cpu host -smp 1 -m $mem \
		-nodefaults -no-user-config -nographic -no-reboot -serial stdio \
		-kernel "$kernel" -initrd "$initrd" \
		-append "console=ttyS0 quiet panic=-1 pci=off mitigations=off reboot=t husk.halt=reboot husk.cmd=true" >>"$out/qemu"
	echo "  boot $i: husk $(sed -n "${i}p" "$out/husk" | cut -d' ' -f1) qemu $(sed -n "${i}p" "$out/qemu" | cut -d' ' -f1)"
done

# field FILE KEY: the values of KEY, one per line
field() { awk -v k="$2" '{ for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) print substr($i, length(k) + 2) }' "$1"; }
median() { sort -n | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
max() { sort -n | tail -n 1; }

for vmm in husk qemu; do
	f=$out/$vmm
	echo "$vmm $(field "$f" ready_ms | median) $(field "$f" ready_ms | max) \
$(field "$f" peak_rss_kib | median) $(field "$f" overhead_kib | median) $(field "$f" exits | median) \
$(field "$f" status | sort -u | tr '\n' ',')"
done >"$out/summary"

awk '
function ratio(a, b) { return (b > 0 && a >= 0) ? sprintf("%.2f", a / b) : "n/a" }
{ name[NR] = $1; med[NR] = $2; mx[NR] = $3; peak[NR] = $4 / 1024; over[NR] = $5 / 1024; ex[NR] = $6; st[NR] = $7 }
END {
	printf "\n%-16s %12s %12s %14s %22s %12s %10s\n", "", "median ms", "max ms", "peak RSS MiB", "RSS beyond guest MiB", "KVM exits", "exit"
	label["husk"] = "husk-vmm"; label["qemu"] = "qemu microvm"
	for (i = 1; i <= 2; i++)
		printf "%-16s %12.1f %12.1f %14.1f %22.2f %12s %10s\n", label[name[i]], med[i], mx[i], peak[i], over[i], ex[i], st[i]
	printf "%-16s %12s %12s %14s %22s %12s\n", "ratio husk/qemu", ratio(med[1], med[2]), ratio(mx[1], mx[2]), ratio(peak[1], peak[2]), ratio(over[1], over[2]), ratio(ex[1], ex[2])
	printf "\ngoal: boot time ratio <= 0.5 (median): %s\n", (med[2] > 0 && med[1] / med[2] <= 0.5) ? "met" : "NOT met"
	printf "goal: husk-vmm RSS beyond touched guest memory <= 3 MiB: %s\n", (over[1] >= 0 && over[1] <= 3) ? "met" : "NOT met"
}' "$out/summary"
