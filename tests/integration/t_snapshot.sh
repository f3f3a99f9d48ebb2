# Snapshots: a paused guest saved to a file and the VMM killed; a new VMM
# restored from the file carries on where the first one stopped.

# The ticks on console $1 whose lines are whole: a pause can stop the guest
# mid-line ("tick 1" of "tick 12"), and that line is not a tick.
snap_ticks() {
	{ tr -d '\r' <"$1"; echo '<end>'; } 2>/dev/null | grep '^tick [0-9][0-9]*$' | sed 's/^tick //'
}

# The guest's uptime lines ("up SECONDS") on console $1 whose lines are whole.
snap_ups() {
	{ tr -d '\r' <"$1"; echo '<end>'; } 2>/dev/null | grep '^up [0-9][0-9.]*$' | sed 's/^up //'
}

# snap_boot_counting CTL CONSOLE [VSOCK]: a guest that counts to 59 on its
# console, each tick followed by its uptime.
snap_boot_counting() {
	timeout -s KILL 300 "$VMM" --kernel "$KERNEL" --initrd "$INITRD" --mem 256M --vcpus 2 \
		--control "$1" --console "$2" ${3:+--vsock "$3"} \
		--cmdline 'quiet husk.cmd="i=0; while [ $i -lt 60 ]; do echo tick $i; read u r </proc/uptime; echo up $u; i=$((i+1)); sleep 0.2; done"' \
		2>>"$T/stderr" &
	pid=$!
	i=0
	while [ "$(snap_ticks "$2" | wc -l)" -lt 5 ] && [ $i -lt 1200 ] && kill -0 $pid 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
}

# snap_pause_save CONSOLE SNAP: the counting guest paused and saved to SNAP
# ($T/ctl); why says what failed, reply the snapshot's answer.
snap_pause_save() {
	why=""
	if [ "$(snap_ticks "$1" | wc -l)" -lt 5 ]; then
		why="the guest never started counting"
	elif [ "$(ctl pause)" != paused ]; then
		why="pause failed"
	elif ! reply=$(ctl "snapshot $2"); then
		why="snapshot failed: $reply"
	fi
}

# snap_saved_killed: a counting guest saved to $T/snap while paused, its VMM
# killed; last is its last tick.
snap_saved_killed() {
	rm -f "$T/stderr" "$T/a.con" "$T/b.con" "$T/snap"
	snap_boot_counting "$T/ctl" "$T/a.con" "$T/vsock"
	snap_pause_save "$T/a.con" "$T/snap"
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	last=$(snap_ticks "$T/a.con" | tail -n 1)
}

# snap_restore_counting NAME --lazy|--eager: a counting guest saved while
# paused, its VMM killed, a new VMM restored from the file in that mode
# goes on from the next tick to the end. A lazy restore must really be
# lazy (not the eager fallback) and have loaded all memory by the end.
snap_restore_counting() {
	snap_saved_killed
	if [ -z "$why" ]; then
		timeout -s KILL 300 "$VMM" -v --restore "$T/snap" "$2" --mem 256M --vcpus 2 \
			--control "$T/ctl2" --console "$T/b.con" --vsock "$T/vsock" 2>"$T/stderr.b"
		status=$?
		cat "$T/stderr.b" >>"$T/stderr"
		first=$(snap_ticks "$T/b.con" | head -n 1)
		if [ "$status" != 0 ]; then
			why="the restored VMM exited with $status"
		elif [ "$2" = --lazy ] && ! grep -q 'lazy restore: all guest memory in' "$T/stderr.b"; then
			why="the lazy restore did not finish loading memory ($(grep -m 1 'lazy' "$T/stderr.b"))"
		elif [ "$2" = --eager ] && grep -q 'lazy restore' "$T/stderr.b"; then
			why="--eager restored lazily"
		elif ! snap_ticks "$T/b.con" | grep -qx 59; then
			why="the restored guest did not count to the end"
		elif [ -z "$first" ] || [ "$first" -le "$last" ] || [ "$first" -gt $((last + 2)) ]; then
			why="the restored guest started at tick '$first', the saved one stopped at $last"
		fi
	fi
	cp "$T/b.con" "$T/console" 2>/dev/null
	if [ -n "$why" ]; then
		fail "$1" "$why"
	else
		lazy=$(sed -n 's/.*info: \(lazy restore: .*\)/; \1/p' "$T/stderr.b")
		pass "$1" "(saved at tick $last: $reply; went on from $first$lazy)"
	fi
}

t_snapshot_restore() {
	snap_restore_counting snapshot_restore --lazy
}

t_snapshot_restore_eager() {
	snap_restore_counting snapshot_restore_eager --eager
}

ctl2() {
	"$top/build/bin/husk-agentctl" --control "$T/ctl2" "$1"
}

# The host's time in seconds (its uptime: 10 ms steps, no process started).
host_now() {
	read -r n _ </proc/uptime
	echo "$n"
}

# Each line of standard input with the host's time before it.
stamp_lines() {
	while IFS= read -r l; do printf '%s %s\n' "$(host_now)" "$l"; done
}

# A held restore (--held, a resume made ahead): the restored guest runs no
# instruction (KVM counted no exit on either vCPU) and writes nothing to its
# console until the control socket's resume; then it counts on from where it
# was saved, to the end, and the rest of its memory is loaded in the background.
# Its clock stood still while it was held: from its last uptime line before the
# save to its first after the resume, its uptime moves by at most a step of its
# loop before the save and the host's time from the resume to that line (its
# console comes through a fifo, each line stamped), not by the hold.
t_snapshot_held() {
	rm -f "$T/stderr.b" "$T/b.stamped"
	snap_saved_killed
	if [ -z "$why" ]; then
		# Its log through a fifo, read line by line up to the one that says it holds
		# the guest (or to its end), then copied on by cat: the wait is for that line.
		rm -f "$T/held.fifo" "$T/con.fifo" && mkfifo "$T/held.fifo" "$T/con.fifo"
		stamp_lines <"$T/con.fifo" >"$T/b.stamped" &
		stamper=$!
		timeout -s KILL 300 "$VMM" -vv --restore "$T/snap" --held --mem 256M --vcpus 2 \
			--control "$T/ctl2" --console "$T/con.fifo" --vsock "$T/vsock" 2>"$T/held.fifo" &
		pid=$!
		exec 3<"$T/held.fifo"
		while IFS= read -r line <&3; do
			printf '%s\n' "$line" >>"$T/stderr.b"
			case $line in *'restored and held'*) break ;; esac
		done
		cat <&3 >>"$T/stderr.b" &
		copier=$!
		exec 3<&-
		held_at=$(host_now)
		if ! grep -q 'restored and held' "$T/stderr.b"; then
			why="the VMM ended without saying it held the guest"
		elif [ "$(ctl2 status)" != paused ]; then
			why="the control socket's status of a held guest is not 'paused'"
		elif [ "$(ctl2 dump)" != dumped ]; then
			why="the dump failed"
		elif ! grep -q 'vCPU 1 kvm: exits 0,' "$T/stderr.b" ||
			! grep -q 'vCPU 0 kvm: exits 0,' "$T/stderr.b"; then
			why="a held vCPU ran: $(grep -m 2 'kvm: exits' "$T/stderr.b" | tr '\n' ' ')"
		elif [ -s "$T/b.stamped" ]; then
			why="the held guest wrote to its console"
		else
			# Held 4 of the guest's longest steps between two uptime lines, 2 s at
			# least: longer than the step and a half a clock standing still allows.
			step=$(snap_ups "$T/a.con" | awk 'NR > 1 && $1 - p > m { m = $1 - p } { p = $1 } END { print m + 0 }')
			sleep "$(awk -v s="$step" 'BEGIN { w = 4 * s; print w < 2 ? 2 : w }')"
			resumed_at=$(host_now)
			held=$(awk -v a="$held_at" -v b="$resumed_at" 'BEGIN { printf "%.2f", b - a }')
			[ "$(ctl2 resume)" = running ] || why="resume failed"
		fi
		# (the VMM too, not only its timeout: the copiers end with the VMM's output)
		[ -z "$why" ] || { pkill -KILL -P $pid; kill -9 $pid; } 2>/dev/null
		wait $pid
		status=$?
		# (a writer for a moment, should the VMM have ended before it opened its console)
		exec 4<>"$T/con.fifo"
		exec 4>&-
		wait $copier $stamper
		tr -d '\r' <"$T/b.stamped" >"$T/b.st"
		cut -d ' ' -f 2- "$T/b.st" >"$T/b.con"
		first=$(snap_ticks "$T/b.con" | head -n 1)
		if [ -n "$why" ]; then
			:
		elif [ "$status" != 0 ]; then
			why="the held VMM exited with $status after its resume"
		elif ! snap_ticks "$T/b.con" | grep -qx 59; then
			why="the guest did not count to the end after its resume"
		elif [ -z "$first" ] || [ "$first" -le "$last" ] || [ "$first" -gt $((last + 2)) ]; then
			why="the resumed guest started at tick '$first', the saved one stopped at $last"
		elif ! sed -n '/info: resumed$/,$p' "$T/stderr.b" | grep -q 'all guest memory in'; then
			why="its memory was not all loaded after the resume (the held fill never began)"
		else
			up_a=$(snap_ups "$T/a.con" | tail -n 1)
			# The first whole uptime line after the resume: host time, guest uptime.
			set -- $(grep -m 1 '^[0-9.]* up [0-9][0-9.]*$' "$T/b.st") "" "" ""
			after=$(awk -v a="$resumed_at" -v b="$1" 'BEGIN { printf "%.2f", b - a }')
			jump=$(awk -v a="$up_a" -v b="$3" 'BEGIN { printf "%.2f", b - a }')
			if [ -z "$up_a" ] || [ -z "$3" ]; then
				why="no uptime line before the save ('$up_a') or after the resume ('$3'; console: $(head -c 300 "$T/b.st" | tr '\n' '|'))"
			elif awk -v j="$jump" -v t="$after" -v s="$step" 'BEGIN { exit !(j < 0 || j >= t + 1.5 * s) }'; then
				why="its uptime went from $up_a to $3 across a hold of $held s, its first line $after s after the resume (its step up to $step s): its clock ran on while it was held"
			fi
		fi
	fi
	cat "$T/stderr.b" >>"$T/stderr" 2>/dev/null
	cp "$T/b.con" "$T/console" 2>/dev/null
	if [ -n "$why" ]; then
		fail snapshot_held "$why"
	else
		pass snapshot_held "(saved at tick $last, went on from $first after the resume; uptime +$jump s across a hold of $held s, its first line $after s after the resume, its step up to $step s)"
	fi
}

t_snapshot_bad_files() {
	why=""
	printf 'not a snapshot at all' >"$T/junk"
	for f in "$T/junk" "$T/missing"; do
		timeout -s KILL 60 "$VMM" --restore "$f" --mem 256M --console "$T/c.con" 2>"$T/stderr"
		status=$?
		[ "$status" = 2 ] || why="$why; $f: exit $status, want 2"
		grep -q "cannot restore" "$T/stderr" || why="$why; $f: no clear message"
	done
	if [ -n "$why" ]; then
		fail snapshot_bad_files "${why#; }"
	else
		pass snapshot_bad_files
	fi
}

# A key handed over the control socket to a VMM started without one (its
# OpenSSL cipher is set up then, after the VMM confined itself; which thread
# does it this test cannot tell): the snapshot is sealed (header flags bit 1,
# FORMAT.md), does not open without the key, and with it in --key-fd the
# guest counts on.
t_snapshot_sealed_late_key() {
	rm -f "$T/stderr" "$T/a.con" "$T/b.con" "$T/snap"
	key=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
	snap_boot_counting "$T/ctl" "$T/a.con"
	why=""
	r=$(ctl "key 12") && why="a short key was taken: $r"
	[ -n "$why" ] || [ "$(ctl "key $key")" = "snapshots are sealed" ] || why="the key was refused"
	[ -n "$why" ] || snap_pause_save "$T/a.con" "$T/snap"
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	last=$(snap_ticks "$T/a.con" | tail -n 1)
	flags=$(od -An -tu4 -j16 -N4 "$T/snap" 2>/dev/null | tr -d ' ')
	[ -n "$why" ] || [ "$flags" = 2 ] || why="header flags $flags, want 2 (sealed)"
	if [ -z "$why" ]; then
		timeout -s KILL 120 "$VMM" --restore "$T/snap" --mem 256M --vcpus 2 \
			--console "$T/c.con" 2>"$T/stderr.b"
		status=$?
		[ "$status" = 2 ] && grep -q "is sealed" "$T/stderr.b" ||
			why="without its key: exit $status, $(head -c 200 "$T/stderr.b")"
	fi
	if [ -z "$why" ]; then
		echo "$key" >"$T/keys"
		timeout -s KILL 300 "$VMM" --restore "$T/snap" --mem 256M --vcpus 2 \
			--console "$T/b.con" --key-fd 3 3<"$T/keys" 2>"$T/stderr.b"
		status=$?
		first=$(snap_ticks "$T/b.con" | head -n 1)
		if [ "$status" != 0 ]; then
			why="the restored VMM exited with $status: $(tail -n 3 "$T/stderr.b")"
		elif ! snap_ticks "$T/b.con" | grep -qx 59 || [ -z "$first" ] || [ "$first" -le "$last" ]; then
			why="the restored guest started at tick '$first' (saved at $last) or did not count to the end"
		fi
	fi
	cat "$T/stderr.b" >>"$T/stderr" 2>/dev/null
	if [ -n "$why" ]; then
		fail snapshot_sealed_late_key "$why"
	else
		pass snapshot_sealed_late_key "(saved at tick $last, went on from $first)"
	fi
}

agentctl() {
	timeout 120 "$top/build/bin/husk-agentctl" --vsock "$T/vsock" "$@"
}

# A runtime guest on its disk with the agent: a background job and a file
# written before the snapshot; after the restore (same disk, a new VMM) the
# agent answers on a new connection, the file is there, the job counts on.
t_snapshot_agent_disk() {
	if [ ! -f "$(rt_base base:latest)" ]; then
		fail snapshot_agent_disk "runtime base:latest is not built (make images)"
		return
	fi
	rm -f "$T/stderr" "$T/snap" "$T/a.con" "$T/b.con"
	rt_layer base:latest "$T/layer.qcow2"
	timeout -s KILL 300 "$VMM" --kernel "$KERNEL" --initrd "$INITRD" --mem 512M --vcpus 2 \
		--disk "$T/layer.qcow2" --vsock "$T/vsock" --control "$T/ctl" --console "$T/a.con" \
		--cmdline "quiet husk.root=/dev/vda" 2>>"$T/stderr" &
	pid=$!
	why=""
	i=0
	until agentctl exec -- true >/dev/null 2>&1 || [ $i -ge 120 ]; do sleep 1; i=$((i + 1)); done
	agentctl exec -- sh -c 'echo written-before > /root/before' >/dev/null 2>&1 ||
		why="the agent did not answer before the snapshot"
	[ -n "$why" ] || agentctl job-start -- sh -c 'i=0; while true; do i=$((i+1)); echo $i >/tmp/c.new; mv /tmp/c.new /tmp/c; sleep 0.2; done' >/dev/null ||
		why="cannot start the counting job"
	# (the job has counted once: it runs when the snapshot is taken)
	i=0
	until c0=$(agentctl exec -- cat /tmp/c 2>/dev/null) && [ -n "$c0" ] || [ -n "$why" ] || [ $i -ge 600 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	[ -n "$why" ] || [ "$(ctl pause)" = paused ] || why="pause failed"
	[ -n "$why" ] || reply=$(ctl "snapshot $T/snap") || why="snapshot failed: $reply"
	[ -n "$why" ] || ctl quit >/dev/null || why="quit failed"
	wait $pid
	status=$?
	[ -n "$why" ] || [ "$status" = 0 ] || why="the saved VMM exited with $status after quit"
	if [ -z "$why" ]; then
		timeout -s KILL 300 "$VMM" --restore "$T/snap" --mem 512M --vcpus 2 \
			--disk "$T/layer.qcow2" --vsock "$T/vsock" --control "$T/ctl" --console "$T/b.con" \
			2>>"$T/stderr" &
		pid=$!
		# The guest drops the old VMM's connections when it runs again (the
		# transport reset): a connection made before that is reset too.
		i=0
		until a=$(agentctl exec -- cat /tmp/c 2>/dev/null) || [ $i -ge 60 ]; do
			sleep 1
			i=$((i + 1))
		done
		# Counting on: a later value, waited for (the bound only ends a hang).
		i=0
		until b=$(agentctl exec -- cat /tmp/c 2>/dev/null) && [ -n "$a" ] && [ "${b:-0}" -gt "$a" ] ||
			[ $i -ge 600 ]; do
			sleep 0.2
			i=$((i + 1))
		done
		f=$(agentctl exec -- cat /root/before 2>/dev/null)
		if [ "$f" != written-before ]; then
			why="after the restore the agent gave '$f' for the file written before"
		elif [ -z "$a" ] || [ -z "$b" ] || [ "$b" -le "$a" ]; then
			why="the job did not count on after the restore ('$c0' before the snapshot; '$a', then '$b')"
		fi
		ctl quit >/dev/null
		wait $pid
		status=$?
		[ -n "$why" ] || [ "$status" = 0 ] || why="the restored VMM exited with $status after quit"
	fi
	kill -9 $pid 2>/dev/null
	if [ -n "$why" ]; then
		fail snapshot_agent_disk "$why"
	else
		qcheck snapshot_agent_disk "$T/layer.qcow2" && pass snapshot_agent_disk "($reply; counter $c0 before, $a and $b after)"
	fi
	rm -f "$T/layer.qcow2"
}

# The VM generation id: the guest's vmgenid driver binds to the DSDT's
# device at boot; after a restore the VMM's new id and the event device's
# interrupt make the guest kernel reseed its RNG ("crng reseeded due to
# virtual machine fork" in its log), which a plain boot never says.
t_snapshot_vmgenid() {
	rm -f "$T/stderr" "$T/snap" "$T/a.con" "$T/b.con" "$T/vsock"
	timeout -s KILL 600 "$VMM" --kernel "$KERNEL" --initrd "$INITRD" --mem 256M --vcpus 2 \
		--vsock "$T/vsock" --control "$T/ctl" --console "$T/a.con" --cmdline quiet 2>>"$T/stderr" &
	pid=$!
	why=""
	i=0
	until agentctl exec -- true >/dev/null 2>&1 || [ $i -ge 300 ] || ! kill -0 $pid 2>/dev/null; do
		sleep 1
		i=$((i + 1))
	done
	bound=$(agentctl exec -- ls /sys/bus/acpi/drivers/vmgenid 2>/dev/null | grep -c '^HUSK0001:')
	forked=$(agentctl exec -- dmesg 2>/dev/null | grep -c 'virtual machine fork')
	if [ "$bound" != 1 ]; then
		why="the guest's vmgenid driver has no device: $(agentctl exec -- ls /sys/bus/acpi/drivers 2>&1 | tr '\n' ' ')"
	elif [ "$forked" != 0 ]; then
		why="a plain boot already says it was forked"
	fi
	[ -n "$why" ] || [ "$(ctl pause)" = paused ] || why="pause failed"
	[ -n "$why" ] || reply=$(ctl "snapshot $T/snap") || why="snapshot failed: $reply"
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	if [ -z "$why" ]; then
		timeout -s KILL 600 "$VMM" --restore "$T/snap" --mem 256M --vcpus 2 --vsock "$T/vsock" \
			--control "$T/ctl" --console "$T/b.con" 2>>"$T/stderr" &
		pid=$!
		# The reseed comes through a kernel thread: waited for, the bound is for a guest that never does.
		i=0
		until [ "$(agentctl exec -- dmesg 2>/dev/null | grep -c 'virtual machine fork')" = 1 ] ||
			[ $i -ge 300 ] || ! kill -0 $pid 2>/dev/null; do
			sleep 1
			i=$((i + 1))
		done
		agentctl exec -- dmesg 2>/dev/null | grep -q 'virtual machine fork' ||
			why="the restored guest did not reseed: $(agentctl exec -- dmesg 2>&1 | tail -n 3 | tr '\n' ' ')"
		ctl quit >/dev/null
		wait $pid
	fi
	kill -9 $pid 2>/dev/null
	cp "$T/b.con" "$T/console" 2>/dev/null
	if [ -n "$why" ]; then fail snapshot_vmgenid "$why"; else pass snapshot_vmgenid; fi
}
