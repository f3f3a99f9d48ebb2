# A big snapshot: a 1 GiB guest fills 320 MiB of its RAM (tmpfs) with random
# data and checksums it; the VM is paused, saved, the VMM quits; a new VMM
# restored from the file (lazily: memory comes in on demand and in the
# background) lets the guest checksum the data again. The sums must match:
# any page lost or corrupted on the way changes the second one.

big_ms() { # milliseconds since the host booted
	awk '{ printf "%d", $1 * 1000 }' /proc/uptime
}

big_ctl() {
	timeout 120 "$top/build/bin/husk-agentctl" --control "$T/big.ctl" "$1"
}

# big_sum FILE NAME: the checksum the guest printed as "NAME <md5>".
big_sum() {
	{ tr -d '\r' <"$1"; } 2>/dev/null | sed -n "s/^$2 \([0-9a-f]\{32\}\)\$/\1/p" | head -n 1
}

t_snapshot_big() {
	rm -f "$T/stderr" "$T/a.con" "$T/b.con" "$T/big.snap"
	# The guest: /dev/shm (half of RAM by default) grown to hold 320 MiB;
	# 10 x 32 MiB of /dev/urandom, half on each vCPU (dd in 1 MiB reads:
	# head -c's small reads are 4x slower nested); sum1, the md5 of the
	# files' md5s (both vCPUs again); an agent on vsock (husk.cmd keeps
	# PID 1 from serving) through which the host later creates /tmp/go;
	# then sum2 of the same files, and the command's end powers off.
	gcmd='mount -o remount,size=480M /dev/shm || exit 1; fill() { for i in $*; do dd if=/dev/urandom of=/dev/shm/d$i bs=1048576 count=32 iflag=fullblock 2>/dev/null || return 1; done; }; sums() { md5sum /dev/shm/d[0-4] >/tmp/s.a & md5sum /dev/shm/d[5-9] >/tmp/s.b; wait $!; cat /tmp/s.a /tmp/s.b | md5sum | cut -c1-32; }; fill 0 1 2 3 4 & fill 5 6 7 8 9 || exit 1; wait $! || exit 1; echo filled $(du -sm /dev/shm | cut -f1) MiB at $(cut -d. -f1 /proc/uptime) s; echo sum1 $(sums); /sbin/husk-agent --listen vsock:52 >/dev/null 2>&1 & echo big-ready at $(cut -d. -f1 /proc/uptime) s; while [ ! -e /tmp/go ]; do sleep 0.5; done; echo sum2 $(sums)'
	timeout -s KILL 600 "$VMM" -v --kernel "$KERNEL" --initrd "$INITRD" --mem 1G --vcpus 2 \
		--control "$T/big.ctl" --console "$T/a.con" --vsock "$T/big.vsock" \
		--cmdline "quiet husk.cmd=\"$gcmd\"" 2>>"$T/stderr" &
	pid=$!
	t0=$(big_ms)
	i=0
	while ! grep -q '^big-ready' "$T/a.con" 2>/dev/null && [ $i -lt 400 ] && kill -0 $pid 2>/dev/null; do
		sleep 1
		i=$((i + 1))
	done
	fill_s=$((($(big_ms) - t0) / 1000))
	sum1=$(big_sum "$T/a.con" sum1)
	why=""
	if ! grep -q '^big-ready' "$T/a.con" 2>/dev/null; then
		why="the guest did not fill its memory (no marker after ${fill_s} s)"
	elif [ -z "$sum1" ]; then
		why="the guest printed no first checksum"
	fi
	if [ -z "$why" ]; then
		t=$(big_ms)
		[ "$(big_ctl pause)" = paused ] || why="pause failed"
		pause_ms=$(($(big_ms) - t))
	fi
	if [ -z "$why" ]; then
		# husk-agentctl waits 10 s for a reply, less than this save may take
		# under emulation; the VMM answers nothing else until it is done, so
		# the next status that answers marks the end; -v logs the time.
		t=$(big_ms)
		big_ctl "snapshot $T/big.snap" >/dev/null
		i=0
		until [ "$(big_ctl status)" = paused ] || [ $i -ge 30 ]; do i=$((i + 1)); done
		save_wall_ms=$(($(big_ms) - t))
		save_ms=$(sed -n 's/^husk-vmm: info: snapshot .* written in \([0-9]*\) ms$/\1/p' "$T/stderr" | tail -n 1)
		[ -n "$save_ms" ] || why="the snapshot was not written ($(grep 'snapshot' "$T/stderr" | tail -n 1))"
	fi
	[ -n "$why" ] || big_ctl quit >/dev/null || why="quit failed"
	[ -n "$why" ] || { wait $pid; status=$?; }
	[ -n "$why" ] || [ "$status" = 0 ] || why="the saved VMM exited with $status after quit"
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	if [ -z "$why" ]; then
		size_mib=$(($(stat -c %s "$T/big.snap") / 1048576))
		t=$(big_ms)
		timeout -s KILL 300 "$VMM" -v --restore "$T/big.snap" --mem 1G --vcpus 2 \
			--control "$T/big.ctl" --console "$T/b.con" --vsock "$T/big.vsock" 2>>"$T/stderr" &
		pid=$!
		# The first exec that answers is the restored guest running again.
		until timeout 30 "$top/build/bin/husk-agentctl" --vsock "$T/big.vsock" exec -- touch /tmp/go \
			>/dev/null 2>&1 || [ $(($(big_ms) - t)) -gt 240000 ] || ! kill -0 $pid 2>/dev/null; do
			sleep 0.2
		done
		restore_ms=$(($(big_ms) - t))
		wait $pid
		status=$?
		sum2=$(big_sum "$T/b.con" sum2)
		if [ "$status" != 0 ]; then
			why="the restored VMM exited with $status"
		elif [ -z "$sum2" ]; then
			why="the restored guest printed no second checksum"
		elif [ "$sum2" != "$sum1" ]; then
			why="the data changed across the snapshot: md5 $sum1 before, $sum2 after"
		# Lazy: all memory in, or the guest (its checksum read all of the 320 MiB on
		# demand) powered off before the background fill (at low priority) was over.
		elif ! lazy=$(grep -m 1 'info: lazy restore: \(all guest memory in\|stopped after\)' "$T/stderr"); then
			why="the restore was not lazy ($(grep -m 1 'lazy' "$T/stderr"))"
		fi
	fi
	kill -9 $pid 2>/dev/null
	{ tr -d '\r' <"$T/a.con"; echo "--- restored"; tr -d '\r' <"$T/b.con"; } >"$T/console" 2>/dev/null
	rm -f "$T/big.snap"
	if [ -n "$why" ]; then
		fail snapshot_big "$why"
	else
		pass snapshot_big "(320 MiB md5 $sum1 kept; filled in ${fill_s} s; pause ${pause_ms} ms; saved in ${save_ms} ms (${save_wall_ms} ms at the socket), file $size_mib MiB; restored and running in ${restore_ms} ms; ${lazy#*info: })"
	fi
}
