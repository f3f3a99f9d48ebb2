# The agent in a real guest over virtio-vsock: the same protocol tests as on
# the host, through husk-vmm's vsock socket.

t_agent_in_guest() {
	sock=$T/vsock.sock
	rm -f "$sock" "$T/console.raw"
	timeout -s KILL 900 "$VMM" --kernel "$KERNEL" --initrd "$INITRD" --vcpus 2 --mem 512M \
		--cmdline quiet --vsock "$sock" --control "$T/ctl" --console "$T/console.raw" 2>"$T/stderr" &
	vmm_pid=$!
	i=0
	while [ $i -lt 600 ] && ! grep -q "ready, guest uptime" "$T/console.raw" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	if ! grep -q "ready, guest uptime" "$T/console.raw" 2>/dev/null; then
		tr -d '\r' <"$T/console.raw" >"$T/console" 2>/dev/null
		fail agent_guest_boot "the agent never said it was ready"
		kill -9 $vmm_pid 2>/dev/null
		return
	fi
	pass agent_guest_boot
	# Shown as they come (a wedge is then visible in the CI log), counted after.
	{
		"$top/tests/agent/run.sh" --vsock "$sock" guest
		"$top/build/tests/rawframes" --vsock "$sock" | sed 's| agent/| guest/|'
	} 2>&1 | tee "$T/agent.out"
	passed=$((passed + $(grep -c '^PASS ' "$T/agent.out")))
	failed=$((failed + $(grep -c '^FAIL ' "$T/agent.out")))
	# What the VMM and the guest's kernel said: a corrupt stream has so far
	# come with the guest's death (CI69, stop 34's CI), cause not yet seen.
	if grep -q '^FAIL ' "$T/agent.out"; then
		kill -0 $vmm_pid 2>/dev/null || echo "--- husk-vmm is gone"
		echo "--- husk-vmm stderr"
		tail -n 40 "$T/stderr"
		echo "--- guest console"
		tr -d '\r' <"$T/console.raw" | tail -n 60
	fi
	agent_no_nested_virt
	agent_vmm_dump
	# Power off through the agent: the VMM must then exit 0 on its own.
	timeout 60 "$top/build/bin/husk-agentctl" --vsock "$sock" exec -- poweroff -f >/dev/null 2>&1
	wait $vmm_pid
	status=$?
	tr -d '\r' <"$T/console.raw" >"$T/console" 2>/dev/null
	if [ "$status" = 0 ]; then
		pass agent_guest_poweroff
	else
		fail agent_guest_poweroff "husk-vmm exited with $status"
	fi
}

# The guest's CPU offers no virtualization of its own (VMX, SVM): nested
# virtualization is host KVM code a sandbox has no use for.
agent_no_nested_virt() {
	flags=$(timeout 60 "$top/build/bin/husk-agentctl" --vsock "$sock" exec -- cat /proc/cpuinfo 2>/dev/null | grep '^flags' | head -n 1)
	case " ${flags#*:} " in
	"  ") fail agent_no_nested_virt "no flags line in the guest's /proc/cpuinfo" ;;
	*" svm "* | *" vmx "*) fail agent_no_nested_virt "the guest sees virtualization: $flags" ;;
	*) pass agent_no_nested_virt ;;
	esac
}

# The control socket's dump (what huskd asks for when an agent request goes
# silent): the queues, an open vsock connection, the IOAPIC's pins and each
# vCPU's registers and LAPIC, in the VMM's log.
agent_vmm_dump() {
	timeout 120 "$top/build/bin/husk-agentctl" --vsock "$sock" exec -- sleep 60 >/dev/null 2>&1 &
	held=$!
	why="no established connection showed in the dump"
	i=0
	while [ $i -lt 300 ]; do
		if [ "$(timeout 30 "$top/build/bin/husk-agentctl" --control "$T/ctl" dump)" != dumped ]; then
			why="dump did not answer 'dumped'"
			break
		fi
		if grep -q 'vsock host port .* established' "$T/stderr"; then
			why=""
			break
		fi
		sleep 0.2
		i=$((i + 1))
	done
	kill $held 2>/dev/null
	wait $held 2>/dev/null
	[ -n "$why" ] || grep -q 'virtio-vsock queue 1: size' "$T/stderr" || why="the dump showed no vsock queue"
	# The interrupt controller's pins: a booted guest has unmasked some (its serial, its disks).
	[ -n "$why" ] || grep -q 'ioapic pin [0-9]*: vector 0x[0-9a-f]*, ' "$T/stderr" || why="the dump showed no IOAPIC pin"
	# Each vCPU, parked for it: a running guest's RIP and its enabled LAPIC.
	[ -n "$why" ] || grep -q 'vCPU 0: rip 0x[0-9a-f]*, rsp 0x[0-9a-f]*, rflags' "$T/stderr" || why="the dump showed no vCPU registers"
	[ -n "$why" ] || grep -q 'vCPU 0: code at rip (gpa 0x[0-9a-f]*) [0-9a-f][0-9a-f] ' "$T/stderr" || why="the dump showed no code at the vCPU's RIP"
	[ -n "$why" ] || grep -q 'vCPU 0 kvm: exits [0-9]' "$T/stderr" || why="the dump showed no KVM counters"
	[ -n "$why" ] || grep -q 'vCPU 0 lapic: svr 0x1[0-9a-f][0-9a-f], ' "$T/stderr" || why="the dump showed no enabled LAPIC"
	# The dump resumed what it parked.
	[ -n "$why" ] || [ "$(timeout 60 "$top/build/bin/husk-agentctl" --vsock "$sock" exec -- echo after-dump 2>/dev/null)" = after-dump ] ||
		why="the guest did not run a command after the dump"
	if [ -n "$why" ]; then
		fail vmm_dump "$why"
	else
		pass vmm_dump
	fi
}
