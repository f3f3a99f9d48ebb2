# A snapshot taken while a vCPU is in the VMM handling a port write: KVM
# completes an I/O exit (RIP past the OUT) only in the next KVM_RUN, so a
# vCPU parked without one is saved before that instruction and its restored
# copy writes the byte again. A guest that writes digits to its console
# without pause keeps its vCPU in such exits most of the time: each of
# several snapshots, restored, must go on with the digit after the last one
# the saved guest wrote, never the same one again.

# The console's digits ($1), without the line ends and anything else.
io_digits() {
	tr -cd '0-9' 2>/dev/null <"$1"
}

# io_wait_digits FILE N: until FILE holds N more digits than it did (the bound only ends a hang).
io_wait_digits() {
	io_n0=$(io_digits "$1" | wc -c)
	io_i=0
	while [ "$(io_digits "$1" | wc -c)" -lt $((io_n0 + $2)) ] && [ $io_i -lt 3000 ] &&
		kill -0 "$3" 2>/dev/null; do
		sleep 0.1
		io_i=$((io_i + 1))
	done
	[ "$(io_digits "$1" | wc -c)" -ge $((io_n0 + $2)) ]
}

t_snapshot_mid_io() {
	rm -f "$T/stderr" "$T/a.con" "$T"/io.* "$T/ctl"
	timeout -s KILL 600 "$VMM" --kernel "$KERNEL" --initrd "$INITRD" --mem 256M --vcpus 1 \
		--control "$T/ctl" --console "$T/a.con" \
		--cmdline 'quiet husk.cmd="l=0123456789; l=$l$l$l$l$l$l$l$l$l$l; while :; do echo $l$l; done"' \
		2>>"$T/stderr" &
	src=$!
	why=""
	rounds=8
	io_wait_digits "$T/a.con" 1000 $src || why="the guest never wrote its digits"
	n=0
	while [ -z "$why" ] && [ $n -lt $rounds ]; do
		n=$((n + 1))
		if [ "$(ctl pause)" != paused ]; then
			why="pause $n failed"
		else
			# The byte of the last OUT the VMM handled (it writes each at once).
			io_digits "$T/a.con" | tail -c 1 >"$T/io.last$n"
			reply=$(ctl "snapshot $T/io.snap$n") || why="snapshot $n failed: $reply"
			[ -n "$why" ] || [ "$(ctl resume)" = running ] || why="resume $n failed"
			[ -n "$why" ] || io_wait_digits "$T/a.con" 500 $src || why="no digits after resume $n"
		fi
	done
	kill -9 $src 2>/dev/null
	wait $src 2>/dev/null
	seen=""
	n=0
	while [ -z "$why" ] && [ $n -lt $rounds ]; do
		n=$((n + 1))
		rm -f "$T/ctl2"
		timeout -s KILL 600 "$VMM" --restore "$T/io.snap$n" --eager --mem 256M --vcpus 1 \
			--control "$T/ctl2" --console "$T/io.con$n" 2>>"$T/stderr" &
		pid=$!
		io_wait_digits "$T/io.con$n" 20 $pid || why="restore $n wrote no digits"
		kill -9 $pid 2>/dev/null
		wait $pid 2>/dev/null
		[ -z "$why" ] || break
		last=$(cat "$T/io.last$n")
		first=$(io_digits "$T/io.con$n" | head -c 1)
		seen="$seen $last>$first"
		[ "$first" = $(((last + 1) % 10)) ] ||
			why="snapshot $n: the saved guest's last digit was $last, its restored copy began with $first (an I/O exit not completed before the snapshot)"
	done
	cp "$T/a.con" "$T/console" 2>/dev/null
	if [ -n "$why" ]; then
		fail snapshot_mid_io "$why"
	else
		pass snapshot_mid_io "(last digit saved > first restored:$seen)"
	fi
	rm -f "$T"/io.* "$T/a.con"
}
