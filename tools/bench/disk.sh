#!/bin/sh
# Disk benchmark: sequential and 4 KiB random I/O inside a guest, on a new
# layer in our copy-on-write format against a raw file, both through
# husk-vmm's virtio-blk (goal: ours >= 0.8 of raw); and on a new layer
# encrypted as huskd seals a sandbox's disk (qcow2+LUKS, aes-xts-plain64,
# its key in husk-vmm's key pipe) against the clear one (goal: sealed >=
# 0.8 of clear). Run through tools/husk-kvm-run (make bench does).
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

# A passphrase as huskd makes one (64 hex digits), and the key pipe's line for the disk.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/pass"
echo "disk $(cat "$T/pass") $T/disk" >"$T/keys"

run() { # FORMAT (raw, qcow2 or sealed): one guest run on a new disk, its figures on stdout
	rm -f "$T/disk"
	keyfd=
	case $1 in
	raw) truncate -s 1G "$T/disk" ;;
	qcow2) "$bin/husk-img" create "$T/disk" 1G >/dev/null ;;
	sealed)
		"$bin/husk-img" create -K "$T/pass" "$T/disk" 1G >/dev/null
		keyfd="--key-fd 3"
		;;
	esac
	fmt=$1
	[ "$fmt" = sealed ] && fmt=qcow2
	# shellcheck disable=SC2086 # keyfd is two words or none
	"$bin/husk-vmm" --kernel "$top/build/images/vmlinux" --initrd "$T/initrd" --mem 256M \
		--vcpus 1 --disk "$T/disk,format=$fmt" --console "$T/console" $keyfd \
		--cmdline "quiet husk.cmd=\"diskbench /dev/vda $mib $ops\"" 3<"$T/keys"
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
		run sealed >>"$T/sealed"
	else
		run sealed >>"$T/sealed"
		run qcow2 >>"$T/qcow2"
		run raw >>"$T/raw"
	fi
	echo "  round $i: raw $(tail -n 1 "$T/raw")" >&2
	echo "  round $i: ours $(tail -n 1 "$T/qcow2")" >&2
	echo "  round $i: sealed $(tail -n 1 "$T/sealed")" >&2
done

# median FILE KEY
median() {
	awk -v k="$2" '{ for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) print substr($i, length(k) + 2) }' "$1" |
		sort -n | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# table A B TITLE_A TITLE_B: medians of A against B, and each ratio against its goal (0.80).
table() {
	printf "\n%-22s %12s %12s %8s\n" "" "$3" "$4" "ratio"
	: >"$T/ratios"
	for k in seq_write_mbs seq_read_mbs rand_write_iops rand_read_iops; do
		q=$(median "$T/$1" $k)
		r=$(median "$T/$2" $k)
		case $k in
		seq_write_mbs) label="seq write MB/s" ;;
		seq_read_mbs) label="seq read MB/s" ;;
		rand_write_iops) label="4K random write IOPS" ;;
		rand_read_iops) label="4K random read IOPS" ;;
		esac
		awk -v l="$label" -v q="$q" -v r="$r" 'BEGIN { printf "%-22s %12.1f %12.1f %8.2f %s\n", l, q, r, q / r, (q / r >= 0.8 ? "met" : "NOT met") }'
		awk -v q="$q" -v r="$r" 'BEGIN { print q / r }' >>"$T/ratios"
	done
	sort -n "$T/ratios" | awk -v a="$3" -v b="$4" 'NR == 1 { printf "goal: %s >= 0.80 of %s in every row (lowest %.2f): %s\n", a, b, $1, ($1 >= 0.8 ? "met" : "NOT met") }'
}
table qcow2 raw "ours (qcow2)" raw
echo "(medians; ratio: ours / raw, goal >= 0.80; a new layer allocates as the sequential write fills it)"
table sealed qcow2 "sealed" "clear (qcow2)"
echo "(medians; ratio: sealed / clear layer, goal >= 0.80: what encrypting a sandbox's disk costs)"
