# Boot, SMP, memory, and every way a guest can end.

boot_and_count() { # NAME VCPUS MEM
	boot "$2" "$3" "nproc; grep MemTotal /proc/meminfo"
	if [ "$status" != 0 ]; then
		fail "$1" "husk-vmm exited with $status, expected 0"
	elif ! grep -q "$READY" "$T/console"; then
		fail "$1" "no readiness line on the console"
	elif ! grep -qx "$2" "$T/console"; then
		fail "$1" "nproc in the guest did not print $2"
	elif ! console_has "command exited with status 0"; then
		fail "$1" "the guest command did not finish"
	else
		kb=$(awk '/^MemTotal:/ {print $2}' "$T/console")
		want=$(( $(echo "$3" | tr -d M) * 1024 ))
		# The kernel keeps some RAM for itself; it never reports more than it got.
		if [ -z "$kb" ] || [ "$kb" -gt "$want" ] || [ "$kb" -lt $((want * 3 / 4)) ]; then
			fail "$1" "MemTotal '$kb' kB does not fit a $3 guest"
		else
			pass "$1"
		fi
	fi
}

t_boot_1cpu_128m() { boot_and_count boot_1cpu_128m 1 128M; }
t_boot_2cpu_512m() { boot_and_count boot_2cpu_512m 2 512M; }
t_boot_4cpu_256m() { boot_and_count boot_4cpu_256m 4 256M; }

# The others boot the uncompressed vmlinux; the compressed form still boots.
t_boot_bzimage() {
	vmlinux=$KERNEL
	KERNEL=$BZIMAGE
	boot_and_count boot_bzimage 2 256M
	KERNEL=$vmlinux
}

t_guest_poweroff() {
	boot 1 128M "poweroff -f"
	if [ "$status" != 0 ]; then
		fail guest_poweroff "husk-vmm exited with $status, expected 0"
	elif ! stderr_has "guest powered off"; then
		fail guest_poweroff "husk-vmm did not say the guest powered off"
	else
		pass guest_poweroff
	fi
}

t_guest_reboot() {
	boot 1 128M "reboot -f"
	if [ "$status" != 0 ]; then
		fail guest_reboot "husk-vmm exited with $status, expected 0"
	elif ! stderr_has "guest rebooted"; then
		fail guest_reboot "husk-vmm did not say the guest rebooted"
	else
		pass guest_reboot
	fi
}

t_guest_panic() {
	boot 1 128M "echo c > /proc/sysrq-trigger"
	if [ "$status" != 3 ]; then
		fail guest_panic "husk-vmm exited with $status, expected 3 (guest crashed)"
	elif ! console_has "Kernel panic - not syncing: sysrq triggered crash"; then
		fail guest_panic "the panic text is not on the console"
	elif ! stderr_has "guest kernel panicked"; then
		fail guest_panic "husk-vmm did not name the panic"
	else
		pass guest_panic
	fi
}

t_guest_command_status() {
	boot 1 128M "echo from-the-guest; exit 7"
	if [ "$status" != 0 ] || ! grep -qx "from-the-guest" "$T/console" ||
		! console_has "command exited with status 7"; then
		fail guest_command_status "status $status; command output or its exit status missing"
	else
		pass guest_command_status
	fi
}
