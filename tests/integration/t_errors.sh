# Bad input gives one clear line and exit status 2, never a crash.

expect_error() { # NAME EXPECTED-TEXT VMM-ARGS...
	name=$1
	text=$2
	shift 2
	vmm "$@"
	if [ "$status" != 2 ]; then
		fail "$name" "husk-vmm exited with $status, expected 2"
	elif ! stderr_has "$text"; then
		fail "$name" "stderr lacks '$text'"
	else
		pass "$name"
	fi
}

t_kernel_not_a_bzimage() {
	expect_error kernel_not_a_bzimage "is not a bootable x86-64 Linux bzImage" \
		--kernel "$INITRD" --initrd "$INITRD"
}

t_kernel_truncated() {
	head -c 1000000 "$KERNEL" >"$T/truncated"
	expect_error kernel_truncated "truncated" --kernel "$T/truncated"
}

t_bzimage_truncated() {
	head -c 1000000 "$BZIMAGE" >"$T/truncated"
	expect_error bzimage_truncated "truncated" --kernel "$T/truncated"
}

# An x86-64 executable that is not Linux (the agent: static, loaded at a
# physical-looking 4 MiB like a kernel): its ELF notes give it away.
t_kernel_elf_not_linux() {
	expect_error kernel_elf_not_linux "an ELF file, but not a Linux kernel" \
		--kernel "$top/build/bin/husk-agent"
}

t_kernel_elf_not_executable() {
	expect_error kernel_elf_not_executable "not an executable ELF" --kernel "$VMM"
}

t_kernel_missing() {
	expect_error kernel_missing "cannot open kernel '/nonexistent/bzImage'" \
		--kernel /nonexistent/bzImage
}

t_initrd_missing() {
	expect_error initrd_missing "cannot open initrd" --kernel "$KERNEL" --initrd /nonexistent
}

t_kernel_is_directory() {
	expect_error kernel_is_directory "is not a regular file" --kernel /
}

t_usage_errors() {
	expect_error usage_no_kernel "--kernel (or --restore) is required"
	expect_error usage_bad_vcpus "--vcpus '0' must be" --kernel "$KERNEL" --vcpus 0
	expect_error usage_bad_mem "--mem '12X'" --kernel "$KERNEL" --mem 12X
	expect_error usage_odd_mem "multiple of 2M" --kernel "$KERNEL" --mem 33M
	expect_error usage_unknown_flag "unknown option '--bogus'" --kernel "$KERNEL" --bogus
	expect_error usage_missing_value "needs a value" --kernel
}

t_help() {
	"$VMM" --help >"$T/help" 2>&1
	if [ $? = 0 ] && grep -q "^usage: husk-vmm (--kernel KERNEL" "$T/help" && grep -q -- "--restore FILE" "$T/help"; then
		pass help
	else
		fail help "--help did not print usage with status 0"
	fi
}

t_no_kvm_device() {
	HUSK_KVM_DEVICE=/nonexistent/kvm vmm --kernel "$KERNEL" --initrd "$INITRD"
	if [ "$status" = 2 ] && stderr_has "this host has no KVM"; then
		pass no_kvm_device
	else
		fail no_kvm_device "status $status; expected 2 and a line saying there is no KVM"
	fi
}
