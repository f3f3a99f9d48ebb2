#!/bin/sh
# Disk benchmark: sequential and 4 KiB random I/O inside a guest, on a new
# layer in our copy-on-write format against a raw file, both through
# husk-vmm's virtio-blk (goal: ours >= 0.8 of raw). Run through
# tools/husk-kvm-run (make bench does).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$top/build/bin
mib=${HUSK_BENCH_DISK_MIB:-256}
ops=${HUSK_BENCH_DISK_OPS:-4000}
rounds=${HUSK_BENCH_DISK_ROUNDS:-4}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# The bench program rides in an initramfs appended to the test one.
cat "$top/build/images/initramfs.cpio" "$top/build/images/bench.cpio" >"$T/initrd"

run() { # FORMAT: one guest run on a new disk, its figures on stdout
	rm -f "$T/disk"
	if [ "$1" = raw ]; then
		truncate -s 1G "$T/disk"
	else
		"$bin/husk-img" create "$T/disk" 1G >/dev/null
	fi
	"$bin/husk-vmm" --kernel "$top/build/images/bzImage" --initrd "$T/initrd" --mem 256M \
		--vcpus 1 --disk "$T/disk,format=$1" --console "$T/console" \
		--cmdline "quiet husk.cmd=\"diskbench /dev/vda $mib $ops\""
	grep '^seq_write_mbs=' "$T/console" | tr -d '\r' || {
		echo "disk bench: the guest run on $1 failed:" >&2
		tail -n 20 "$T/console" >&2
		exit 1
	}
}

echo "disk benchmark: $mib MiB sequential (1 MiB requests), $ops random 4 KiB, O_DIRECT, $rounds rounds each, alternating"
i=0
while [ "$i" -lt "$rounds" ]; do
	i=$((i + 1))
	# Alternate which goes first, so an order effect cancels out.
	if [ $((i % 2)) = 1 ]; then
		run raw >>"$T/raw"
		run qcow2 >>"$T/qcow2"
	else
		run qcow2 >>"$T/qcow2"
		run raw >>"$T/raw"
	fi
	echo "  round $i: raw $(tail -n 1 "$T/raw")" >&2
	echo "  round $i: ours $(tail -n 1 "$T/qcow2")" >&2
done

# median FILE KEY
median() {
	awk -v k="$2" '{ for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) print substr($i, length(k) + 2) }' "$1" |
		sort -n | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

printf "\n%-22s %12s %12s %8s\n" "" "ours (qcow2)" "raw" "ratio"
for k in seq_write_mbs seq_read_mbs rand_write_iops rand_read_iops; do
	q=$(median "$T/qcow2" $k)
	r=$(median "$T/raw" $k)
	case $k in
	seq_write_mbs) label="seq write MB/s" ;;
	seq_read_mbs) label="seq read MB/s" ;;
	rand_write_iops) label="4K random write IOPS" ;;
	rand_read_iops) label="4K random read IOPS" ;;
	esac
	awk -v l="$label" -v q="$q" -v r="$r" 'BEGIN { printf "%-22s %12.1f %12.1f %8.2f\n", l, q, r, q / r }'
done
echo "(medians; ratio: ours / raw, goal >= 0.80; a new layer allocates as the sequential write fills it)"
