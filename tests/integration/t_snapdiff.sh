# Diff snapshots (issue J) on real KVM: a guest fills 80 MiB of RAM (tmpfs)
# with random data and is saved whole (the base); its memory file is made;
# a VMM restored over that file rewrites 20 MiB and deletes 20 MiB, and is
# saved as a diff (snapshot-diff); one restored over the file from that diff
# changes 20 MiB more and is saved as a diff again. Each restore checksums
# the data as it was at its save: a page lost or misplaced on the way
# changes the sum. Both diffs name the base (no chain grows), are smaller
# than it by about what did not change, and a diff without the file, or a
# memory file made of a diff, is refused.

sd_ms() { awk '{ printf "%d", $1 * 1000 }' /proc/uptime; }
sd_ctl() { timeout 600 "$top/build/bin/husk-agentctl" --control "$T/sd.ctl" "$1"; }
# sd_exec CMD: runs CMD in the guest; its output in $T/sd.out.
sd_exec() {
	timeout 300 "$top/build/bin/husk-agentctl" --vsock "$T/sd.vsock" exec -- sh -c "$1" >"$T/sd.out" 2>>"$T/stderr"
}
# sd_up: until the guest's agent answers (bounded); 1 if it never did.
sd_up() {
	i=0
	until sd_exec true; do
		i=$((i + 1))
		[ $i -lt 600 ] && kill -0 $pid 2>/dev/null || return 1
		sleep 0.2
	done
}
# sd_save NAME KIND: paused, saved as $T/NAME.snap ("snapshot" or "snapshot-diff"), quit.
sd_save() {
	[ "$(sd_ctl pause)" = paused ] || { why="pause before $1 failed"; return; }
	sd_ctl "$2 $T/$1.snap" >/dev/null
	# The VMM answers nothing else until the save is done: the next status marks its end.
	i=0
	until [ "$(sd_ctl status)" = paused ] || [ $i -ge 30 ]; do i=$((i + 1)); done
	[ -s "$T/$1.snap" ] || why="$2 $1 was not written ($(tail -n 1 "$T/stderr"))"
	sd_ctl quit >/dev/null
	wait $pid
}
# sd_restore NAME [OPTION]: a VMM restored from $T/NAME.snap over the base's memory file.
sd_restore() {
	timeout -s KILL 600 "$VMM" -v --restore "$T/$1.snap" --mem-file "$T/base.mem" --mem 256M ${2:-} \
		--vcpus 2 --control "$T/sd.ctl" --console "$T/$1.con" --vsock "$T/sd.vsock" 2>>"$T/stderr" &
	pid=$!
	sd_up || why="the guest restored from $1 did not answer"
}
SD_SUM='md5sum /dev/shm/d* | md5sum | cut -c1-32'
# sd_end: the guest powered off (unless a check failed), its VMM gone either way.
sd_end() {
	[ -n "$why" ] || sd_exec "poweroff -f"
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
}
# sd_base N MIB: a booted guest fills /dev/shm/d0.. with N files of MIB MiB of random
# bytes (their sum in $T/sd.out), is saved whole as base.snap, and base.mem made of it.
sd_base() {
	rm -f "$T"/*.snap "$T/base.mem" "$T/stderr"
	why=""
	timeout -s KILL 900 "$VMM" -v --kernel "$KERNEL" --initrd "$INITRD" --mem 256M --vcpus 2 \
		--control "$T/sd.ctl" --console "$T/sd.con" --vsock "$T/sd.vsock" --cmdline quiet \
		2>>"$T/stderr" &
	pid=$!
	sd_up || why="the guest's agent never answered"
	[ -n "$why" ] || sd_exec "mount -o remount,size=150M /dev/shm && for i in \$(seq 0 $(($1 - 1))); do dd if=/dev/urandom of=/dev/shm/d\$i bs=1048576 count=$2 iflag=fullblock 2>/dev/null || exit 1; done; $SD_SUM" ||
		why="the guest did not fill its memory"
	[ -n "$why" ] || sd_save base snapshot
	[ -n "$why" ] || "$VMM" --restore "$T/base.snap" --extract-memory "$T/base.mem" 2>>"$T/stderr" ||
		why="--extract-memory failed"
}

t_snapshot_diff_chain() {
	sd_base 4 20
	sum0=$(cat "$T/sd.out")
	# Over the file: 20 MiB rewritten, 20 MiB deleted, then a diff.
	# This VMM's diff also compares every page and fails on one that changed unrecorded.
	[ -n "$why" ] || sd_restore base --verify-dirty
	[ -n "$why" ] || { sd_exec "$SD_SUM" && [ "$(cat "$T/sd.out")" = "$sum0" ]; } ||
		why="${why:-the guest restored over the memory file has other data}"
	[ -n "$why" ] || sd_exec "dd if=/dev/urandom of=/dev/shm/d1 bs=1048576 count=20 iflag=fullblock conv=notrunc 2>/dev/null && rm /dev/shm/d2 && $SD_SUM" ||
		why="the guest did not change its memory"
	sum1=$(cat "$T/sd.out")
	[ -n "$why" ] || sd_save diff1 snapshot-diff
	# From the diff, over the same file: its data; 20 MiB more, a diff again. This VMM's diff
	# also checks every page's record (the diff's own pages, placed at restore, included).
	[ -n "$why" ] || sd_restore diff1 --verify-dirty
	[ -n "$why" ] || { sd_exec "$SD_SUM" && [ "$(cat "$T/sd.out")" = "$sum1" ]; } ||
		why="${why:-restored from the diff, the data changed: $sum1 at the save, $(cat "$T/sd.out") after}"
	[ -n "$why" ] || sd_exec "dd if=/dev/urandom of=/dev/shm/d3 bs=1048576 count=20 iflag=fullblock conv=notrunc 2>/dev/null && $SD_SUM" ||
		why="the guest did not change its memory again"
	sum2=$(cat "$T/sd.out")
	[ -n "$why" ] || sd_save diff2 snapshot-diff
	# That one read only the pages recorded as written: the first diff's, the guest's new ones.
	w=$(sed -n 's/.*MiB of guest memory, \([0-9]*\) MiB of it recorded as written.*/\1/p' "$T/stderr" | tr '\n' ' ')
	w1=${w%% *} w2=$(echo $w | awk '{print $2}')
	[ -n "$why" ] || [ "${w2:-999}" -le 128 ] || why="the second diff read ${w2:-all} MiB of 256 (no tracking?)"
	[ -n "$why" ] || sd_restore diff2
	[ -n "$why" ] || { sd_exec "$SD_SUM" && [ "$(cat "$T/sd.out")" = "$sum2" ]; } ||
		why="${why:-restored from the second diff, the data changed: $sum2 at the save, $(cat "$T/sd.out") after}"
	# A third diff from a VMM that tracks but does not verify: it stores what was written without
	# reading the base's pages, zeros written over data (most of d3 lies where d2 was in the base)
	# included.
	[ -n "$why" ] || sd_exec "dd if=/dev/zero of=/dev/shm/d3 bs=1048576 count=10 conv=notrunc 2>/dev/null && dd if=/dev/urandom of=/dev/shm/d0 bs=1048576 count=5 iflag=fullblock conv=notrunc 2>/dev/null && $SD_SUM" ||
		why="the guest did not change its memory a third time"
	sum3=$(cat "$T/sd.out")
	[ -n "$why" ] || sd_save diff3 snapshot-diff
	[ -n "$why" ] || sd_restore diff3
	[ -n "$why" ] || { sd_exec "$SD_SUM" && [ "$(cat "$T/sd.out")" = "$sum3" ]; } ||
		why="${why:-restored from the third diff, the data changed: $sum3 at the save, $(cat "$T/sd.out") after}"
	sd_end
	tr -d '\r' <"$T/sd.con" >"$T/console" 2>/dev/null
	b=$(stat -c %s "$T/base.snap" 2>/dev/null || echo 0)
	d1=$(stat -c %s "$T/diff1.snap" 2>/dev/null || echo 0)
	d2=$(stat -c %s "$T/diff2.snap" 2>/dev/null || echo 0)
	mib=1048576
	# Random data does not compress: the base holds 80 MiB of it, the first diff 20, the second 40
	# (each with up to 20 MiB of the guest's own changes: 1 MiB in CI69).
	if [ -z "$why" ] && { [ "$b" -lt $((80 * mib)) ] || [ "$d1" -lt $((20 * mib)) ] ||
		[ "$d1" -gt $((40 * mib)) ] || [ "$d2" -lt $((40 * mib)) ] || [ "$d2" -gt $((60 * mib)) ]; }; then
		why="sizes: base $b, first diff $d1, second diff $d2 bytes"
	fi
	[ "$sum0" != "$sum1" ] && [ "$sum1" != "$sum2" ] && [ "$sum2" != "$sum3" ] ||
		why="${why:-the guest's changes changed no sum}"
	if [ -n "$why" ]; then
		fail snapshot_diff_chain "$why"
	else
		pass snapshot_diff_chain "(base $((b / mib)) MiB, diffs $((d1 / mib)) and $((d2 / mib)) MiB, recorded as written $w1 and $w2 MiB; sums $sum0 $sum1 $sum2 $sum3)"
	fi

	# Alone, a diff is refused; so is a memory file of one.
	timeout -s KILL 60 "$VMM" --restore "$T/diff1.snap" --mem 256M --vcpus 2 \
		--control "$T/sd.ctl" --console "$T/x.con" 2>"$T/stderr.a"
	s1=$?
	timeout -s KILL 60 "$VMM" --restore "$T/diff1.snap" --extract-memory "$T/diff.mem" 2>"$T/stderr.x"
	s2=$?
	if [ "$s1" = 2 ] && grep -q "is a diff over another snapshot's memory: give that snapshot's memory file" "$T/stderr.a" &&
		[ "$s2" != 0 ] && grep -q "is a diff" "$T/stderr.x" && [ ! -e "$T/diff.mem" ]; then
		pass snapshot_diff_refused_alone
	else
		fail snapshot_diff_refused_alone "alone: exit $s1 ($(tail -n 1 "$T/stderr.a")); extract: exit $s2 ($(tail -n 1 "$T/stderr.x"))"
	fi
	rm -f "$T"/*.snap "$T/base.mem"
}

# A diff restored lazily and paused before its pages are all in: the pause
# places the rest itself, and every page the restore placed is in the new
# diff (--lazy-on-demand: nothing fills memory in the background, so the
# pause comes first every time; the pause reads only the pages marked as
# written, so one placed but not marked, or never placed, is left out).
# Restored again, the guest has the data it had.
t_snapshot_diff_pause_before_lazy_load_ends() {
	sd_base 2 16
	[ -n "$why" ] || sd_restore base
	[ -n "$why" ] || sd_exec "dd if=/dev/urandom of=/dev/shm/d1 bs=1048576 count=16 iflag=fullblock conv=notrunc 2>/dev/null && $SD_SUM" ||
		why="the guest did not change its memory"
	sum1=$(cat "$T/sd.out")
	[ -n "$why" ] || sd_save diff1 snapshot-diff
	: >"$T/stderr"
	[ -n "$why" ] || sd_restore diff1 --lazy-on-demand
	[ -n "$why" ] || sd_save diff2 snapshot-diff
	cp "$T/stderr" "$T/stderr.lazy"
	[ -n "$why" ] || sd_restore diff2
	[ -n "$why" ] || { sd_exec "$SD_SUM" && [ "$(cat "$T/sd.out")" = "$sum1" ]; } ||
		why="${why:-restored from the diff paused early, the data changed: $sum1 at the save, $(cat "$T/sd.out") after}"
	sd_end
	d2=$(stat -c %s "$T/diff2.snap" 2>/dev/null || echo 0)
	# The rewritten 16 MiB is random: a diff that lost the placed pages would be far smaller.
	[ -n "$why" ] || [ "$d2" -ge $((16 * 1048576)) ] || why="the second diff holds $d2 bytes"
	[ -n "$why" ] || grep -q "lazy restore: all guest memory in after" "$T/stderr.lazy" ||
		why="the diff was not restored lazily: $(grep -i "lazy\|restore" "$T/stderr.lazy" | tail -n 2)"
	if [ -n "$why" ]; then
		fail snapshot_diff_pause_before_lazy_load_ends "$why"
	else
		pass snapshot_diff_pause_before_lazy_load_ends "(second diff $((d2 / 1048576)) MiB, sum $sum1)"
	fi
	rm -f "$T"/*.snap "$T/base.mem"
}
