# Dialling home (guest-agent/PROTOCOL.md): a guest booted with husk.dial=53
# connects to the host's listener on VSOCK_53 and says HELLO, and the host
# runs requests over that connection. After a snapshot and a restore into a
# new VMM the guest dials the new VMM's host side again: same boot, dial 2.

dial_ctl() {
	timeout 120 "$top/build/bin/husk-agentctl" --control "$T/ctl" "$1"
}

# dial_wait PATTERN [PID]: waits for a line of dialhost's output, up to 10
# minutes (everything runs emulated); gives up at once if dialhost reported
# an error or exited, or if process PID (the VMM) is gone.
dial_wait() {
	end=$(($(date +%s) + 600))
	until grep -q -- "$1" "$T/dial.out" 2>/dev/null; do
		grep -q '^error' "$T/dial.out" 2>/dev/null && return 1
		kill -0 "$dial_host" 2>/dev/null || return 1
		[ -z "${2:-}" ] || kill -0 "$2" 2>/dev/null || return 1
		[ "$(date +%s)" -lt $end ] || return 1
		sleep 0.1
	done
}

# dial_served N DIAL BOOT_ID: dial N said HELLO with this dial count (and
# boot id, if given) and ran `echo hi`; otherwise sets why.
dial_served() {
	hello=$(grep "^hello $1 " "$T/dial.out")
	case "$hello" in
	"hello $1 dial=$2 protocol=1 boot_id=${3:-}"*" agent=husk-agent "*) ;;
	*)
		why="dial $1 said '$hello', want dial=$2 protocol=1 boot_id=${3:-<any>}"
		return
		;;
	esac
	grep -qx "exec $1 exit=0 stdout=hi" "$T/dial.out" ||
		why="the exec over dial $1 gave '$(grep "^exec $1 " "$T/dial.out")'"
}

dial_end() {
	kill -9 $vmm_pid 2>/dev/null
	kill $dial_host 2>/dev/null
	wait $vmm_pid $dial_host 2>/dev/null
	[ -e "$T/console.raw" ] && tr -d '\r' <"$T/console.raw" >"$T/console"
	[ -e "$T/b.con" ] && tr -d '\r' <"$T/b.con" >>"$T/console"
	if [ -n "$why" ]; then
		fail "$1" "$why"
		echo "--- dialhost"
		cat "$T/dial.out"
		return 1
	fi
}

t_dial_home() {
	sock=$T/vsock.sock
	rm -f "$sock" "${sock}_53" "$T/dial.out" "$T/snap" "$T/stderr" "$T/console" \
		"$T/console.raw" "$T/b.con" "$T/ctl"
	why=""
	vmm_pid=""
	"$top/build/tests/dialhost" "${sock}_53" --conns 2 --then wait --timeout 600 \
		>"$T/dial.out" 2>&1 &
	dial_host=$!
	dial_wait '^listening ' || why="dialhost did not listen"
	if [ -z "$why" ]; then
		timeout -s KILL 900 "$VMM" --kernel "$KERNEL" --initrd "$INITRD" --vcpus 2 \
			--mem 256M --vsock "$sock" --control "$T/ctl" --console "$T/console.raw" \
			--cmdline "quiet husk.dial=53" 2>"$T/stderr" &
		vmm_pid=$!
		dial_wait '^exec 1 ' $vmm_pid || why="no dial was served after the boot"
	fi
	[ -n "$why" ] || dial_served 1 1
	boot_id=$(sed -n 's/^hello 1 dial=1 protocol=1 boot_id=\([^ ]*\) .*/\1/p' "$T/dial.out")
	if [ -z "$why" ] && { [ -z "$boot_id" ] || [ "$boot_id" = null ]; }; then
		why="no boot_id in the HELLO"
	fi
	if [ -n "$why" ]; then
		dial_end dial_home_boot
		return
	fi
	pass dial_home_boot "(boot_id $boot_id)"

	# A snapshot, the VMM gone, a new one restored from the file: the
	# transport reset drops the guest's connections and the agent dials again.
	[ "$(dial_ctl pause)" = paused ] || why="pause failed"
	[ -n "$why" ] || reply=$(dial_ctl "snapshot $T/snap") || why="snapshot failed: $reply"
	[ -n "$why" ] || dial_ctl quit >/dev/null || why="quit failed"
	if [ -n "$why" ]; then
		dial_end dial_home_restore
		return
	fi
	wait $vmm_pid
	status=$?
	[ "$status" = 0 ] || why="the saved VMM exited with $status after quit"
	[ -n "$why" ] || dial_wait '^ended 1 ' ||
		why="the first dial's host side did not end with its VMM"
	if [ -z "$why" ]; then
		timeout -s KILL 900 "$VMM" --restore "$T/snap" --mem 256M --vcpus 2 \
			--vsock "$sock" --control "$T/ctl" --console "$T/b.con" 2>>"$T/stderr" &
		vmm_pid=$!
		dial_wait '^exec 2 ' $vmm_pid || why="no dial was served after the restore"
	fi
	[ -n "$why" ] || dial_served 2 2 "$boot_id"
	if [ -z "$why" ]; then
		dial_ctl quit >/dev/null
		wait $vmm_pid
		status=$?
		[ "$status" = 0 ] || why="the restored VMM exited with $status after quit"
		# The restored VMM's end ends the second dial: dialhost is done.
		wait $dial_host
		status=$?
		[ -n "$why" ] || [ "$status" = 0 ] || why="dialhost exited with $status"
	fi
	dial_end dial_home_restore && pass dial_home_restore "(dial 2, same boot; $reply)"
}
