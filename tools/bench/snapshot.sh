#!/bin/sh
# Snapshot benchmark: guests of 256 MiB and 1 GiB, only booted or with half
# of their RAM dirtied with random data (tmpfs), paused through the control
# socket, saved, the VMM quit, and restored in a new VMM until the agent
# answers again, once with --eager and once with --lazy; and the same guest
# saved again sealed (issue I: AES-256-GCM per frame, the control socket's
# key) and restored eagerly with its key, against the clear save and restore
# (goal: sealing adds at most a quarter). Baseline: writing
# the guest's RAM size raw to a file (dd, uncompressed, fsync), what a plain
# memory dump costs at least. Run through
# tools/husk-kvm-run (make bench does). HUSK_BENCH_SNAP_PAUSES sets the number
# of status and pause round trips timed per guest (default 10).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$top/build/bin
pauses=${HUSK_BENCH_SNAP_PAUSES:-10}
T=$(mktemp -d)
trap 'kill $vmm 2>/dev/null || true; rm -rf "$T"' EXIT
vmm=

ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; } # 10 ms resolution
ctl() { "$bin/husk-agentctl" --control "$T/ctl" "$1"; }
agent() { "$bin/husk-agentctl" --vsock "$T/vsock" "$@"; }

# until_agent LIMIT_MS: retries a trivial exec until the agent answers.
until_agent() {
	ua_t=$(ms)
	until agent exec -- true >/dev/null 2>&1; do
		[ $(($(ms) - ua_t)) -lt "$1" ] || return 1
		kill -0 $vmm 2>/dev/null || return 1
		sleep 0.05
	done
}

fail() {
	echo "snapshot bench: $1" >&2
	tail -n 20 "$T/stderr" "$T/console" >&2 2>/dev/null || true
	exit 1
}

# restore_one --eager|--lazy: a VMM restored from $T/snap until the agent
# answers, then powered off; prints load=MS restore=MS [fill=MS] and sets
# restore_end (the shell's clock when the agent answered).
restore_one() {
	t=$(ms)
	# -vv: every log line carries the ms since the VMM started.
	if [ "${2:-}" = sealed ]; then
		"$bin/husk-vmm" -vv --restore "$T/snap_sealed" "$1" --mem ${mem}M --vcpus 2 \
			--vsock "$T/vsock" --control "$T/ctl" --console "$T/console" --key-fd 3 \
			3<"$T/key" 2>"$T/stderr2" &
	else
		"$bin/husk-vmm" -vv --restore "$T/snap" "$1" --mem ${mem}M --vcpus 2 --vsock "$T/vsock" \
			--control "$T/ctl" --console "$T/console" 2>"$T/stderr2" &
	fi
	vmm=$!
	until_agent 300000 || return 1
	restore_end=$(ms)
	load=$(sed -n 's/^husk-vmm: \[ *\([0-9]*\)\.[0-9]* ms\] info: restored .*/\1/p' "$T/stderr2")
	agent exec -- poweroff -f >/dev/null 2>&1 || true
	wait $vmm || return 1
	vmm=
	# The background fill's end, on the same clock as load.
	fill=$(sed -n 's/^husk-vmm: \[ *\([0-9]*\)\.[0-9]* ms\] info: lazy restore: all guest memory in .*/\1/p' "$T/stderr2")
	echo "load=$load restore=$((restore_end - t))${fill:+ fill=$fill}"
}

# run MEM_MIB DIRTY_MIB: one guest through boot, fill, pauses, snapshot and
# restore; prints its figures as key=value.
run() {
	mem=$1 dirty=$2
	rm -f "$T/snap" "$T/console" "$T/stderr" "$T/stderr2"
	"$bin/husk-vmm" -v --kernel "$top/build/images/vmlinux" --initrd "$top/build/images/initramfs.cpio" \
		--mem ${mem}M --vcpus 2 --cmdline quiet --vsock "$T/vsock" --control "$T/ctl" \
		--console "$T/console" 2>"$T/stderr" &
	vmm=$!
	until_agent 300000 || fail "the $mem MiB guest did not boot"
	if [ "$dirty" -gt 0 ]; then
		# 32 MiB pieces of /dev/urandom in 1 MiB reads, one writer per vCPU.
		agent exec -- sh -c "mount -o remount,size=$((mem * 9 / 10))M /dev/shm || exit 1
			fill() { i=\$1; while [ \$i -lt $((dirty / 32)) ]; do
				dd if=/dev/urandom of=/dev/shm/f\$i bs=1048576 count=32 iflag=fullblock 2>/dev/null || exit 1
				i=\$((i + 2)); done; }
			fill 0 & fill 1 || exit 1; wait \$! || exit 1
			[ \$(du -sm /dev/shm | cut -f1) -ge $dirty ]" >/dev/null || fail "the guest could not dirty $dirty MiB"
	fi
	# The client's own cost: status round trips; then pause round trips
	# (each timed alone, a resume between).
	t=$(ms)
	i=0
	while [ $i -lt "$pauses" ]; do
		[ "$(ctl status)" = running ] || fail "status failed"
		i=$((i + 1))
	done
	status=$(($(ms) - t))
	pause=0
	i=0
	while [ $i -lt "$pauses" ]; do
		t=$(ms)
		[ "$(ctl pause)" = paused ] || fail "pause failed"
		pause=$((pause + $(ms) - t))
		[ "$(ctl resume)" = running ] || fail "resume failed"
		i=$((i + 1))
	done

	t0=$(ms)
	[ "$(ctl pause)" = paused ] || fail "pause failed"
	t=$(ms)
	# husk-agentctl gives up on a reply after 10 s; the VMM answers nothing
	# else until the snapshot is written, so the next status marks its end.
	ctl "snapshot $T/snap" >/dev/null || true
	i=0
	until [ "$(ctl status)" = paused ] || [ $i -ge 60 ]; do i=$((i + 1)); done
	save_wall=$(($(ms) - t))
	save=$(sed -n 's/^husk-vmm: info: snapshot .* written in \([0-9]*\) ms$/\1/p' "$T/stderr" | tail -n 1)
	[ -n "$save" ] || fail "no snapshot written"
	# The same guest, still paused, saved once more sealed with a key of its own.
	[ "$(ctl "key $(cat "$T/key")")" = "snapshots are sealed" ] || fail "the key was refused"
	ctl "snapshot $T/snap_sealed" >/dev/null || true
	i=0
	until [ "$(ctl status)" = paused ] || [ $i -ge 60 ]; do i=$((i + 1)); done
	seal=$(sed -n 's/^husk-vmm: info: snapshot .*snap_sealed written in \([0-9]*\) ms$/\1/p' "$T/stderr" | tail -n 1)
	[ -n "$seal" ] || fail "no sealed snapshot written"
	ctl quit >/dev/null || fail "quit failed"
	wait $vmm || fail "the saved VMM exited with $?"

	# The same file restored eagerly (all RAM decompressed before the vCPUs
	# run) and lazily (userfaultfd: on demand and in the background).
	restore_one --eager >"$T/eager" || fail "the eagerly restored $mem MiB guest did not answer"
	t1=$restore_end
	restore_one --lazy >"$T/lazy" || fail "the lazily restored $mem MiB guest did not answer"
	restore_one --eager sealed >"$T/sealed" || fail "the sealed $mem MiB guest did not answer"
	grep -q 'lazy restore is not possible' "$T/stderr2" && fail "no lazy restore here: $(grep 'lazy restore' "$T/stderr2")"

	# The baseline, median of three (its time swings with the host's load).
	for i in 1 2 3; do
		t2=$(ms)
		dd if=/dev/zero of="$T/raw" bs=1048576 count="$mem" conv=fsync 2>/dev/null
		echo $(($(ms) - t2))
		rm -f "$T/raw"
	done | sort -n >"$T/rawms"
	raw=$(sed -n 2p "$T/rawms")
	echo "mem=$mem dirty=$dirty status=$status pause=$pause save=$save save_wall=$save_wall" \
		"size_kib=$(($(stat -c %s "$T/snap") / 1024)) $(cat "$T/eager") total=$((t1 - t0)) raw=$raw" \
		"raw_all=$(tr '\n' , <"$T/rawms") $(sed 's/\([a-z]*\)=/lazy_\1=/g' "$T/lazy")" \
		"seal=$seal $(sed 's/\([a-z]*\)=/sealed_\1=/g' "$T/sealed")"
}

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/key"
echo "snapshot benchmark: 2 vCPUs; only booted, and half of RAM dirtied with random data; $pauses status and pause round trips each"
for mem in 256 1024; do
	for dirty in 0 $((mem / 2)); do
		echo "  guest $mem MiB, $dirty MiB dirtied..." >&2
		run "$mem" "$dirty" >>"$T/figures"
		echo "  $(tail -n 1 "$T/figures")" >&2
	done
done

awk -v n="$pauses" '
function v(k,   i, kv) { for (i = 1; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) return kv[2] } return "" }
function ratio(a, b) { return b > 0 ? sprintf("%.2f", a / b) : "n/a" }
BEGIN {
	printf "\n%-22s %9s %9s %9s %9s %9s %11s %9s %9s %10s %9s\n", "guest", "status ms", "pause ms",
		"ratio", "write ms", "file MiB", "raw RAM ms", "write/raw", "load ms", "to exec ms", "total ms"
}
{
	label = sprintf("%d MiB, %s", v("mem"), v("dirty") + 0 > 0 ? v("dirty") " MiB dirty" : "booted")
	st = v("status") / n; pa = v("pause") / n
	printf "%-22s %9.1f %9.1f %9s %9d %9.1f %11d %9.2f %9d %10d %9d\n", label, st, pa,
		ratio(pa, st), v("save"), v("size_kib") / 1024, v("raw"),
		(v("raw") > 0 ? v("save") / v("raw") : 0), v("load"), v("restore"), v("total")
	if (v("dirty") + 0 > 0)
		per_gib[NR] = sprintf("%-22s %9d ms per GiB dirtied (pause %.0f ms + write %d ms for %d MiB)",
			label, (pa + v("save")) * 1024 / v("dirty"), pa, v("save"), v("dirty"))
	if (v("dirty") + 0 > 0 && (pa + v("save")) * 1024 / v("dirty") > 500) gib_miss++
	sealed[NR] = sprintf("%-22s %9d %9d %9s %9d %9d %9s", label, v("save"), v("seal"),
		ratio(v("seal"), v("save")), v("load"), v("sealed_load"), ratio(v("sealed_load"), v("load")))
	if (v("save") + 0 >= 100 && v("seal") > 1.25 * v("save")) seal_miss++
	if (v("load") + 0 >= 100 && v("sealed_load") > 1.25 * v("load")) seal_miss++
	lazy[NR] = sprintf("%-22s %9d %9d %9s %10d %10d %9s %9s", label, v("load"), v("lazy_load"),
		ratio(v("lazy_load"), v("load")), v("restore"), v("lazy_restore"),
		ratio(v("lazy_restore"), v("restore")), v("lazy_fill") == "" ? "-" : v("lazy_fill"))
}
END {
	print "(status, pause: mean control socket round trip through husk-agentctl, ratio pause / status;"
	print " write: the VMM\047s own snapshot time (memory lz4, fsync); raw RAM: dd of the guest\047s RAM size"
	print " from /dev/zero to a file with fsync, same file system, median of 3; write/raw: their ratio;"
	print " load: husk-vmm --restore --eager start to vCPUs about to run; to exec: --restore start to the"
	print " first agent exec that answers; total: pause sent to that exec, the VMM quit between;"
	print " times from /proc/uptime, 10 ms resolution)"
	printf "\npause to disk per GiB of dirtied guest memory (goal <= 500 ms/GiB):\n"
	for (i = 1; i <= NR; i++)
		if (i in per_gib)
			print per_gib[i]
	printf "goal: pause to disk <= 500 ms per GiB dirtied, every guest above: %s\n", gib_miss ? "NOT met" : "met"
	printf "\nrestore of the same file, eager against lazy:\n"
	printf "%-22s %9s %9s %9s %10s %10s %9s %9s\n", "guest", "eager ms", "lazy ms", "lazy/eag",
		"eager exec", "lazy exec", "lazy/eag", "fill ms"
	for (i = 1; i <= NR; i++)
		print lazy[i]
	print "(eager, lazy ms: --restore start to vCPUs about to run (the VMM\047s -vv clock);"
	print " exec: --restore start to the first agent exec that answers (10 ms resolution);"
	print " lazy/eag: lazy over eager; fill: --restore --lazy start to the end of the background"
	print " fill, when the snapshot file is closed (-: not over when the guest was powered off,"
	print " right after that exec); eager first, then lazy, one run each)"
	printf "\nsealed (AES-256-GCM per frame) against clear, the same guest saved twice, restored eagerly:\n"
	printf "%-22s %9s %9s %9s %9s %9s %9s\n", "guest", "write ms", "sealed ms", "ratio", "load ms",
		"sealed ms", "ratio"
	for (i = 1; i <= NR; i++)
		print sealed[i]
	printf "goal: sealing adds at most 25%% to the write and to the load (times of 100 ms and more): %s\n",
		seal_miss ? "NOT met" : "met"
}' "$T/figures"
