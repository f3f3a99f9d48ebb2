# Pausing through the VMM's control socket: every vCPU stops, the guest's
# work stops with it, and after resume it carries on where it was.

ticks() {
	{ tr -d '\r' <"$T/console.raw"; } 2>/dev/null | grep -c '^tick '
}

ctl() {
	"$top/build/bin/husk-agentctl" --control "$T/ctl" "$1"
}

t_pause_resume() {
	rm -f "$T/console.raw" "$T/stderr"
	timeout -s KILL 240 "$VMM" --kernel "$KERNEL" --initrd "$INITRD" --mem 256M --vcpus 2 \
		--control "$T/ctl" --console "$T/console.raw" \
		--cmdline 'quiet husk.cmd="i=0; while [ $i -lt 30 ]; do echo tick $i; i=$((i+1)); sleep 0.2; done"' \
		2>"$T/stderr" &
	pid=$!
	i=0
	while [ "$(ticks)" -lt 3 ] && [ $i -lt 1200 ] && kill -0 $pid 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	why=""
	if [ "$(ticks)" -lt 3 ]; then
		why="the guest never started counting"
	elif [ "$(ctl pause)" != paused ]; then
		why="pause did not answer 'paused'"
	else
		before=$(ticks)
		sleep 3
		after=$(ticks)
		state=$(ctl status)
		[ "$before" = "$after" ] || why="the guest kept counting while paused ($before, then $after)"
		[ -n "$why" ] || [ "$state" = paused ] || why="status said '$state' while paused"
		[ -n "$why" ] || [ "$(ctl resume)" = running ] || why="resume did not answer 'running'"
		[ -n "$why" ] || [ "$(ctl bogus)" != "" ] || why="an unknown command got no answer"
	fi
	[ -n "$why" ] && kill $pid 2>/dev/null
	wait $pid
	status=$?
	tr -d '\r' <"$T/console.raw" >"$T/console" 2>/dev/null
	if [ -n "$why" ]; then
		fail pause_resume "$why"
	elif [ "$status" != 0 ]; then
		fail pause_resume "husk-vmm exited with $status after the resume"
	elif ! grep -qx 'tick 29' "$T/console"; then
		fail pause_resume "the guest did not count to the end after the resume"
	elif [ -e "$T/ctl" ]; then
		fail pause_resume "the control socket file is left behind"
	else
		pass pause_resume
	fi
}
