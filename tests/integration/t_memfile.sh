# Memory files (issue J): a snapshot's RAM extracted once (--extract-memory)
# and mapped MAP_PRIVATE by two VMMs restored from it at once (--mem-file).
# Each goes on counting from where the snapshot was taken, and the pages
# both only read are one copy in the page cache (Shared_Clean and
# Shared_Dirty in their smaps_rollup). A memory file of another snapshot,
# or a file that is none, is refused with a message.

# ticks_after FILE N: waits (bounded) until FILE shows N ticks.
ticks_after() {
	i=0
	while [ "$(snap_ticks "$1" | wc -l)" -lt "$2" ] && [ $i -lt 1200 ]; do
		sleep 0.1
		i=$((i + 1))
	done
}

t_memfile_children() {
	rm -f "$T/stderr" "$T/a.con" "$T/c1.con" "$T/c2.con" "$T/snap" "$T/snap2" "$T/mem"
	snap_boot_counting "$T/ctl" "$T/a.con"
	snap_pause_save "$T/a.con" "$T/snap"
	last=$(snap_ticks "$T/a.con" | tail -n 1)
	# A second snapshot of the same guest, a few ticks on: not the memory file's.
	[ -n "$why" ] || [ "$(ctl resume)" = running ] || why="resume failed"
	[ -n "$why" ] || ticks_after "$T/a.con" $((last + 4))
	[ -n "$why" ] || [ "$(ctl pause)" = paused ] || why="second pause failed"
	[ -n "$why" ] || reply2=$(ctl "snapshot $T/snap2") || why="second snapshot failed: $reply2"
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	if [ -z "$why" ] && ! "$VMM" --restore "$T/snap" --extract-memory "$T/mem" 2>>"$T/stderr"; then
		why="--extract-memory failed"
	fi
	if [ -z "$why" ]; then
		for c in 1 2; do
			timeout -s KILL 300 "$VMM" --restore "$T/snap" --mem-file "$T/mem" --mem 256M --vcpus 2 \
				--control "$T/ctl$c" --console "$T/c$c.con" 2>>"$T/stderr" &
			eval "pid$c=\$!"
		done
		ticks_after "$T/c1.con" 4
		ticks_after "$T/c2.con" 4
		# Both alive and counting: what of their memory is one copy.
		# (Shared_Dirty too: on tmpfs, as here, page cache pages always count as dirty)
		s1=$(awk '/^Shared_(Clean|Dirty):/ { s += $2 } END { print s }' /proc/$pid1/smaps_rollup 2>/dev/null)
		s2=$(awk '/^Shared_(Clean|Dirty):/ { s += $2 } END { print s }' /proc/$pid2/smaps_rollup 2>/dev/null)
		roll=$(grep -E '^(Rss|Pss|Shared_Clean|Shared_Dirty|Private_Clean|Private_Dirty|Anonymous):' \
			/proc/$pid1/smaps_rollup 2>/dev/null | tr -s ' \n' ' ')
		wait $pid1
		st1=$?
		wait $pid2
		st2=$?
		for c in 1 2; do
			first=$(snap_ticks "$T/c$c.con" | head -n 1)
			if ! snap_ticks "$T/c$c.con" | grep -qx 59; then
				why="$why; child $c did not count to the end"
			elif [ -z "$first" ] || [ "$first" -le "$last" ] || [ "$first" -gt $((last + 2)) ]; then
				why="$why; child $c started at tick '$first', the snapshot was taken at $last"
			fi
		done
		[ "$st1:$st2" = 0:0 ] || why="$why; the children exited with $st1 and $st2"
		# Guest kernel text and data both run and neither writes: megabytes, not a few pages.
		[ "${s1:-0}" -ge 1024 ] && [ "${s2:-0}" -ge 1024 ] ||
			why="$why; little shared: ${s1:-?} and ${s2:-?} KiB (child 1: $roll)"
		why=${why#; }
	fi
	cp "$T/c1.con" "$T/console" 2>/dev/null
	if [ -n "$why" ]; then
		fail memfile_children "$why"
		return
	fi
	pass memfile_children "(snapshot at tick $last; shared: $s1 and $s2 KiB; child 1: $roll)"

	timeout -s KILL 60 "$VMM" --restore "$T/snap2" --mem-file "$T/mem" --mem 256M --vcpus 2 \
		--control "$T/ctl3" --console "$T/c3.con" 2>"$T/stderr.m"
	status=$?
	printf 'not a memory file' >"$T/junk"
	timeout -s KILL 60 "$VMM" --restore "$T/snap" --mem-file "$T/junk" --mem 256M --vcpus 2 \
		--control "$T/ctl3" --console "$T/c3.con" 2>"$T/stderr.j"
	status2=$?
	if [ "$status" = 2 ] && grep -q "made from another snapshot" "$T/stderr.m" &&
		[ "$status2" = 2 ] && grep -q "is not a memory file" "$T/stderr.j"; then
		pass memfile_refused
	else
		fail memfile_refused "another snapshot's: exit $status ($(tail -n 1 "$T/stderr.m")); junk: exit $status2 ($(tail -n 1 "$T/stderr.j"))"
	fi
}
