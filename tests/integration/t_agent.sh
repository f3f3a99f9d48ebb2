# The agent in a real guest over virtio-vsock: the same protocol tests as on
# the host, through husk-vmm's vsock socket.

t_agent_in_guest() {
	sock=$T/vsock.sock
	rm -f "$sock" "$T/console.raw"
	timeout -s KILL 900 "$VMM" --kernel "$KERNEL" --initrd "$INITRD" --vcpus 2 --mem 512M \
		--cmdline quiet --vsock "$sock" --console "$T/console.raw" 2>"$T/stderr" &
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
	if grep -q '^FAIL ' "$T/agent.out" && [ -s "$T/stderr" ]; then
		echo "--- husk-vmm stderr"
		tail -n 40 "$T/stderr"
	fi
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
