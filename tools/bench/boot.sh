#!/bin/sh
# Boot benchmark: husk-vmm against QEMU's microvm, the same kernel build and
# initramfs, in the same KVM host, runs interleaved. husk-vmm boots the
# uncompressed vmlinux (its default, what huskd boots); QEMU gets both of its
# ways to boot that kernel - the bzImage and the same vmlinux through its PVH
# entry - and the goal compares against the faster of the two. husk-vmm
# booting the bzImage is printed too, to show what the uncompressed kernel
# is worth. Run it through tools/husk-kvm-run (make bench does).
# HUSK_BENCH_BOOTS sets the number of boots (default 10).
#
# Each boot starts on host memory that no earlier guest ran on. Under the
# nested host's emulator (QEMU TCG) the first writes to memory an earlier
# guest ran code from are slow (most likely the emulator dropping what it
# translated from it): a guest booted right after another wrote its first
# pages at a crawl and took 3.2-4.2 s to be ready, 1.5-2.2 s after 300-1200
# MiB had been written through the page cache in between (one nested host,
# husk-vmm alone; hardware KVM has no such cost). So between
# boots HUSK_BENCH_SCRUB_MIB (default 384, 0: none) of zeros are written to
# a file and removed, which pays for it outside the timed boot; husk-vmm
# and QEMU alike.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$top/build/bin
bzimage=$top/build/images/bzImage
vmlinux=$top/build/images/vmlinux
initrd=$top/build/images/initramfs.cpio
n=${HUSK_BENCH_BOOTS:-10}
scrub_mib=${HUSK_BENCH_SCRUB_MIB:-384}
mem=256
ready="husk-agent: version"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

command -v qemu-system-x86_64 >/dev/null || { echo "bench: qemu-system-x86_64 not found" >&2; exit 1; }

husk() { # KERNEL
	"$bin/bootbench" --ready "$ready" --mem-mib $mem -- \
		"$bin/husk-vmm" --kernel "$1" --initrd "$initrd" --mem ${mem}M --vcpus 1 \
		--cmdline "quiet husk.cmd=true"
}

# microvm without ACPI cannot power off: the agent reboots, reboot=t
# triple-faults, and -no-reboot turns that into QEMU's exit.
qemu() { # KERNEL
	"$bin/bootbench" --ready "$ready" --mem-mib $mem -- \
		qemu-system-x86_64 -M microvm,acpi=off -accel kvm -cpu host -smp 1 -m $mem \
		-nodefaults -no-user-config -nographic -no-reboot -serial stdio \
		-kernel "$1" -initrd "$initrd" \
		-append "console=ttyS0 quiet panic=-1 pci=off mitigations=off reboot=t husk.halt=reboot husk.cmd=true"
}

# What the last guest's memory held, overwritten before the next boot (see above).
scrub() { HUSK_BENCH_SCRUB_MIB=$scrub_mib "$top/tools/bench/scrub.sh"; }

echo "boot benchmark: $n boots each, 1 vCPU, $mem MiB, bzImage $(du -k "$bzimage" | cut -f1) KiB," \
	"vmlinux $(du -k "$vmlinux" | cut -f1) KiB, initramfs $(du -k "$initrd" | cut -f1) KiB," \
	"$scrub_mib MiB written between boots"
i=0
while [ "$i" -lt "$n" ]; do
	i=$((i + 1))
	scrub
	husk "$vmlinux" >>"$out/husk"
	scrub
	qemu "$bzimage" >>"$out/qemu"
	scrub
	qemu "$vmlinux" >>"$out/qemupvh"
	scrub
	husk "$bzimage" >>"$out/huskbz"
	echo "  boot $i: husk $(sed -n "${i}p" "$out/husk" | cut -d' ' -f1)" \
		"qemu $(sed -n "${i}p" "$out/qemu" | cut -d' ' -f1)" \
		"qemu-pvh $(sed -n "${i}p" "$out/qemupvh" | cut -d' ' -f1)" \
		"husk-bzimage $(sed -n "${i}p" "$out/huskbz" | cut -d' ' -f1)"
done

# field FILE KEY: the values of KEY, one per line
field() { awk -v k="$2" '{ for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) print substr($i, length(k) + 2) }' "$1"; }
median() { sort -n | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
max() { sort -n | tail -n 1; }

for vmm in husk qemu qemupvh huskbz; do
	f=$out/$vmm
	echo "$vmm $(field "$f" ready_ms | median) $(field "$f" ready_ms | max) \
$(field "$f" peak_rss_kib | median) $(field "$f" overhead_kib | median) $(field "$f" exits | median) \
$(field "$f" status | sort -u | tr '\n' ',') $(field "$f" guest_ms | median) $(field "$f" before_ms | median)"
done >"$out/summary"

awk '
function ratio(a, b) { return (b > 0 && a >= 0) ? sprintf("%.2f", a / b) : "n/a" }
{ name[NR] = $1; med[NR] = $2; mx[NR] = $3; peak[NR] = $4 / 1024; over[NR] = $5 / 1024; ex[NR] = $6; st[NR] = $7; gu[NR] = $8; pre[NR] = $9 }
END {
	printf "\n%-24s %12s %12s %14s %22s %12s %10s\n", "", "median ms", "max ms", "peak RSS MiB", "RSS beyond guest MiB", "KVM exits", "exit"
	label["husk"] = "husk-vmm (vmlinux)"; label["qemu"] = "qemu microvm (bzImage)"
	label["qemupvh"] = "qemu microvm (PVH)"; label["huskbz"] = "husk-vmm (bzImage)"
	for (i = 1; i <= 4; i++)
		printf "%-24s %12.1f %12.1f %14.1f %22.2f %12s %10s\n", label[name[i]], med[i], mx[i], peak[i], over[i], ex[i], st[i]
	# QEMU at its best: whichever of its two boots had the lower median.
	q = (med[3] > 0 && med[3] < med[2]) ? 3 : 2
	printf "%-24s %12s %12s %14s %22s %12s\n", "ratio husk/best qemu", ratio(med[1], med[q]), ratio(mx[1], mx[q]), ratio(peak[1], peak[q]), ratio(over[1], over[q]), ratio(ex[1], ex[q])
	printf "%-24s %12s   (the same bzImage in both)\n", "ratio husk/qemu bzImage", ratio(med[4], med[2])
	# The agent says its guest uptime when ready. Before that clock started: the VMM
	# starting and loading the guest, then the guest kernel up to its timekeeping
	# (and, for a bzImage, its decompression). Noise in one row shows in which part.
	printf "\n%-24s %12s %20s\n", "medians", "guest ms", "before guest clock"
	for (i = 1; i <= 4; i++)
		printf "%-24s %12s %20s\n", label[name[i]], gu[i], pre[i]
	printf "%-24s %12s %20s\n", "ratio husk/best qemu", ratio(gu[1], gu[q]), ratio(pre[1], pre[q])
	printf "\ngoal: boot time ratio <= 0.5 (median, against %s): %s\n", label[name[q]], (med[q] > 0 && med[1] / med[q] <= 0.5) ? "met" : "NOT met"
	printf "goal: husk-vmm RSS beyond touched guest memory <= 3 MiB: %s\n", (over[1] >= 0 && over[1] <= 3) ? "met" : "NOT met"
}' "$out/summary"
