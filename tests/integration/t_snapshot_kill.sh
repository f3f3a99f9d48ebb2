# A VMM killed (SIGKILL) while it writes a snapshot over an older one: the
# older file must be left whole, and a new VMM restored from it must carry on
# from the older snapshot's state. The guest dirties enough RAM with random
# data (which lz4 cannot shrink) that the write takes long enough to be
# caught in the middle: the kill waits until FILE.tmp holds several MiB.

# Whole lines only: a line the pause or kill cut ("tick 1" of "tick 12") is not a tick.
kill_ticks() {
	{ tr -d '\r' <"$1"; echo '<end>'; } 2>/dev/null | grep '^tick [0-9][0-9]*$' | sed 's/^tick //'
}

kill_ctl() {
	timeout 120 "$top/build/bin/husk-agentctl" --control "$T/kill.ctl" "$1"
}

# kill_wait_tick CONSOLE N SECS: waits until CONSOLE shows tick N or later.
kill_wait_tick() {
	kw=0
	while [ "$(kill_ticks "$1" | tail -n 1)" -lt "$2" ] 2>/dev/null || [ -z "$(kill_ticks "$1")" ]; do
		[ $kw -lt $(($3 * 10)) ] && kill -0 $pid 2>/dev/null || return 1
		sleep 0.1
		kw=$((kw + 1))
	done
}

t_snapshot_kill() {
	rm -f "$T/stderr" "$T/a.con" "$T/b.con" "$T/kill.snap" "$T/kill.snap.tmp"
	# 160 MiB of random data in tmpfs, then a tick every 0.2 s.
	gcmd='mount -o remount,size=300M /dev/shm || exit 1; dd if=/dev/urandom of=/dev/shm/r bs=1048576 count=160 iflag=fullblock 2>/dev/null || exit 1; echo filled; i=0; while [ $i -lt 100000 ]; do echo tick $i; i=$((i+1)); sleep 0.2; done'
	timeout -s KILL 900 "$VMM" --kernel "$KERNEL" --initrd "$INITRD" --mem 512M --vcpus 2 \
		--control "$T/kill.ctl" --console "$T/a.con" \
		--cmdline "quiet husk.cmd=\"$gcmd\"" 2>>"$T/stderr" &
	pid=$!
	why=""
	tmp_kib=0
	kill_wait_tick "$T/a.con" 3 400 || why="the guest did not fill its memory and count"
	# Snapshot A, then the guest runs on for ten more ticks.
	[ -n "$why" ] || [ "$(kill_ctl pause)" = paused ] || why="pause failed"
	[ -n "$why" ] || reply=$(kill_ctl "snapshot $T/kill.snap") || why="snapshot A failed: $reply"
	last_a=$(kill_ticks "$T/a.con" | tail -n 1)
	[ -n "$why" ] || sum_a=$(md5sum <"$T/kill.snap")
	[ -n "$why" ] || [ "$(kill_ctl resume)" = running ] || why="resume failed"
	[ -n "$why" ] || kill_wait_tick "$T/a.con" $((last_a + 10)) 120 || why="the guest did not count on after snapshot A"
	# Snapshot B to the same file, the VMM killed once its FILE.tmp has grown.
	[ -n "$why" ] || [ "$(kill_ctl pause)" = paused ] || why="the second pause failed"
	last_b=$(kill_ticks "$T/a.con" | tail -n 1)
	if [ -z "$why" ]; then
		kill_ctl "snapshot $T/kill.snap" >"$T/kill.reply" 2>&1 &
		ctlpid=$!
		i=0
		while [ $i -lt 600 ] && kill -0 $ctlpid 2>/dev/null; do
			tmp_kib=$(($(stat -c %s "$T/kill.snap.tmp" 2>/dev/null || echo 0) / 1024))
			[ "$tmp_kib" -lt 4096 ] || break
			sleep 0.05
			i=$((i + 1))
		done
		kill -9 $pid
		wait $pid 2>/dev/null
		wait $ctlpid 2>/dev/null
		if [ "$tmp_kib" -lt 4096 ]; then
			why="snapshot B was not caught while it was written (its .tmp had $tmp_kib KiB; reply '$(cat "$T/kill.reply")')"
		elif [ ! -e "$T/kill.snap.tmp" ]; then
			why="snapshot B's .tmp is gone after the kill: the write had ended"
		elif [ "$(md5sum <"$T/kill.snap")" != "$sum_a" ]; then
			why="the killed write changed snapshot A's file"
		fi
	fi
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	if [ -z "$why" ]; then
		timeout -s KILL 300 "$VMM" --restore "$T/kill.snap" --mem 512M --vcpus 2 \
			--control "$T/kill.ctl" --console "$T/b.con" 2>>"$T/stderr" &
		pid=$!
		kill_wait_tick "$T/b.con" 0 120
		first=$(kill_ticks "$T/b.con" | head -n 1)
		if [ -z "$first" ]; then
			why="the guest restored from snapshot A did not count"
		elif [ "$first" -le "$last_a" ] || [ "$first" -gt $((last_a + 2)) ]; then
			why="the restored guest started at tick $first: snapshot A stopped at $last_a, B at $last_b"
		elif ! kill_wait_tick "$T/b.con" $((first + 5)) 60; then
			why="the restored guest stopped counting after tick $(kill_ticks "$T/b.con" | tail -n 1)"
		else
			[ "$(kill_ctl quit)" = quitting ] || why="quit of the restored VMM failed"
			wait $pid
			status=$?
			[ -n "$why" ] || [ "$status" = 0 ] || why="the restored VMM exited with $status after quit"
		fi
	fi
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	{ tr -d '\r' <"$T/a.con"; echo "--- restored"; tr -d '\r' <"$T/b.con"; } 2>/dev/null | tail -n 20 >"$T/console"
	rm -f "$T/kill.snap" "$T/kill.snap.tmp"
	if [ -n "$why" ]; then
		fail snapshot_kill "$why"
	else
		pass snapshot_kill "(A at tick $last_a, B killed at tick $last_b with $tmp_kib KiB written; restored from A at $first)"
	fi
}
