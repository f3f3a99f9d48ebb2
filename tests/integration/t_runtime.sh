# Runtimes: the guest switches its root onto a copy-on-write layer over a
# runtime base and runs the runtime's language there.

RUNTIMES=${HUSK_RUNTIMES:-$top/build/images/runtimes}

# rt_base NAME: the base image of runtime NAME (python:3.13 -> python-3.13.qcow2).
rt_base() {
	echo "$RUNTIMES/$(echo "$1" | tr ':/' '--').qcow2"
}

# rt_layer NAME LAYER [SIZE]: a new layer over runtime NAME's base.
rt_layer() {
	rm -f "$2"
	"$IMG" create -b "$(rt_base "$1")" -F qcow2 "$2" ${3:-} >/dev/null
}

# rt_boot LAYER COMMAND: boots the layer as the root and runs COMMAND there.
rt_boot() {
	# The agent runtimes' CLIs (a big node bundle each) once took over 180 s to print
	# their version under the emulated nested host (CI42's rt_amp); the limit only ends
	# hangs, and stays under the suite's 600 s idle watchdog (nothing prints meanwhile).
	VMM_LIMIT=450
	vmm --kernel "$KERNEL" --initrd "$INITRD" --vcpus 2 --mem 512M -v --disk "$1" \
		--cmdline "quiet husk.root=/dev/vda husk.cmd=\"$2\""
	VMM_LIMIT=
}

# rt_expect NAME RUNTIME COMMAND WANT: the command prints the line WANT.
rt_expect() {
	if [ ! -f "$(rt_base "$2")" ]; then
		fail "$1" "runtime $2 is not built ($(rt_base "$2") missing; make images builds it)"
		return
	fi
	rt_layer "$2" "$T/layer.qcow2"
	rt_boot "$T/layer.qcow2" "$3"
	if [ "$status" != 0 ]; then
		fail "$1" "husk-vmm exited with $status"
	elif ! grep -qx -- "$4" "$T/console"; then
		fail "$1" "the guest did not print '$4'"
	else
		qcheck "$1" "$T/layer.qcow2" && pass "$1"
	fi
	rm -f "$T/layer.qcow2"
}

t_rt_python() {
	rt_expect rt_python python:3.13 "python3 -c 'print(sum([1,2,3]))'" 6
}

t_rt_node() {
	rt_expect rt_node node:lts "echo 'console.log(String(6 * 7))' > /tmp/a.js && node /tmp/a.js" 42
}

t_rt_bun() {
	rt_expect rt_bun bun:1 "echo 'console.log(String(6 * 7))' > /tmp/a.ts && bun run /tmp/a.ts" 42
}

t_rt_python314() {
	rt_expect rt_python314 python:3.14 "python3 -c 'import sys; print(sys.version_info[:2] == (3, 14))'" True
}

t_rt_node_latest() {
	rt_expect rt_node_latest node:latest "node -p 6*7 && npx --version >/dev/null && echo npx-ok" npx-ok
}

# Agent runtimes: the CLI runs (its version), and the tools an agent reaches for are there.
agent_tools='git --version && rg --version && curl --version && cc --version && node --version && python3 --version'

t_rt_claude_code() {
	rt_expect rt_claude_code claude-code:latest \
		"$agent_tools >/dev/null && claude --version | grep -q 'Claude Code' && echo agent-ok" agent-ok
}

t_rt_amp() {
	rt_expect rt_amp amp:latest \
		"$agent_tools >/dev/null && amp --version | grep -qE '^[0-9]+[.][0-9]+' && echo agent-ok" agent-ok
}

t_rt_opencode() {
	rt_expect rt_opencode opencode:latest \
		"$agent_tools >/dev/null && opencode --version | grep -qE '^[0-9]+[.][0-9]+' && echo agent-ok" agent-ok
}

t_rt_base_shell() {
	rt_expect rt_base_shell base:latest "bash -c 'echo bash \${BASH_VERSINFO[0]}'" "bash 5"
}

# A file written, the VM stopped, a new VM on the same layer: the file is there.
t_rt_persist() {
	rt_layer base:latest "$T/p.qcow2"
	rt_boot "$T/p.qcow2" "echo kept-across-boots > /root/keep"
	rt_boot "$T/p.qcow2" "cat /root/keep"
	if grep -qx kept-across-boots "$T/console"; then
		qcheck rt_persist "$T/p.qcow2" && pass rt_persist
	else
		fail rt_persist "the file written in the first boot is not there in the second"
	fi
	rm -f "$T/p.qcow2"
}

# Two sandboxes on one base at the same time never see each other's writes.
t_rt_isolated() {
	rt_layer base:latest "$T/a.qcow2"
	rt_layer base:latest "$T/b.qcow2"
	script='echo mine > /root/$(cat /sys/block/vda/serial); sleep 3; sync; ls /root'
	timeout -s KILL 180 "$VMM" --kernel "$KERNEL" --initrd "$INITRD" --mem 256M \
		--disk "$T/a.qcow2,serial=from-a" --console "$T/a.console" \
		--cmdline "quiet husk.root=/dev/vda husk.cmd=\"$script\"" 2>"$T/a.stderr" &
	pid=$!
	timeout -s KILL 180 "$VMM" --kernel "$KERNEL" --initrd "$INITRD" --mem 256M \
		--disk "$T/b.qcow2,serial=from-b" --console "$T/b.console" \
		--cmdline "quiet husk.root=/dev/vda husk.cmd=\"$script\"" 2>"$T/b.stderr"
	wait $pid
	if ! grep -q "^from-a" "$T/a.console" || ! grep -q "^from-b" "$T/b.console"; then
		fail rt_isolated "a sandbox did not see its own file ($(tail -n 3 "$T/a.console" "$T/b.console" | tr '\r\n' '  '))"
	elif grep -q "^from-b" "$T/a.console" || grep -q "^from-a" "$T/b.console"; then
		fail rt_isolated "a sandbox saw the other's file"
	else
		pass rt_isolated
	fi
	rm -f "$T/a.qcow2" "$T/b.qcow2" "$T"/a.* "$T"/b.*
}

# The layer's virtual size is the sandbox's disk limit: the file system is
# grown to it, a full disk is ENOSPC in the guest, and the host file stays
# within the limit and consistent.
t_rt_disk_full() {
	base=$(rt_base base:latest)
	vsize=$("$IMG" info --json "$base" | sed -n 's/^ *"virtual-size": *\([0-9]*\).*/\1/p' | head -n 1)
	vsize=$((${vsize:-0} + (96 << 20)))
	rt_layer base:latest "$T/full.qcow2" "$vsize"
	rt_boot "$T/full.qcow2" "df -k / | tail -n 1; dd if=/dev/zero of=/root/fill bs=1M 2>&1 | grep -i 'no space'; sync; rm /root/fill; echo cleaned"
	total_kb=$(awk '$NF == "/" {print $2}' "$T/console")
	file_kb=$(du -k "$T/full.qcow2" | cut -f1)
	if [ "$status" != 0 ] || ! console_has "No space left on device" || ! console_has cleaned; then
		fail rt_disk_full "no clean ENOSPC in the guest (status $status)"
	elif [ -z "$total_kb" ] || [ "$total_kb" -lt $((vsize / 1024 * 85 / 100)) ]; then
		fail rt_disk_full "the file system has ${total_kb:-?} KiB, not grown to the $((vsize >> 20)) MiB disk"
	elif [ "$file_kb" -gt $((vsize / 1024 * 105 / 100)) ]; then
		fail rt_disk_full "the layer takes $file_kb KiB on the host, past its $((vsize >> 20)) MiB limit"
	else
		qcheck rt_disk_full "$T/full.qcow2" && pass rt_disk_full
	fi
	rm -f "$T/full.qcow2"
}

t_rt_missing_root() {
	vmm --kernel "$KERNEL" --initrd "$INITRD" --mem 128M --cmdline "quiet husk.root=/dev/vda husk.cmd=true"
	if [ "$status" = 0 ] && console_has "cannot start the sandbox: root disk /dev/vda"; then
		pass rt_missing_root
	else
		fail rt_missing_root "no clear message for a missing root disk (status $status)"
	fi
}
