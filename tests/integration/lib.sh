# Helpers for integration tests; sourced by tests/integration/run.sh.
# Tests run where /dev/kvm works (see tools/husk-kvm-run) with busybox or
# coreutils, so they stick to POSIX sh.

top=$(cd "$(dirname "$0")/../.." && pwd)
VMM=${HUSK_VMM:-$top/build/bin/husk-vmm-san}
KERNEL=${HUSK_KERNEL:-$top/build/images/vmlinux}
# The same kernel compressed, for the tests of that boot path.
BZIMAGE=${HUSK_BZIMAGE:-$top/build/images/bzImage}
INITRD=${HUSK_INITRD:-$top/build/images/initramfs.cpio}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0

pass() {
	echo "PASS $1${2:+ $2}"
	passed=$((passed + 1))
}

fail() {
	echo "FAIL $1: $2"
	failed=$((failed + 1))
	# Show what the guest and the VMM said, to debug from the CI log alone.
	for f in "$T/console" "$T/stderr"; do
		[ -s "$f" ] && { echo "--- $f"; tail -n 40 "$f"; }
	done
	return 0
}

# The number of soft lockups the kernel we run on has reported so far.
l1_lockups() {
	dmesg 2>/dev/null | grep -c 'soft lockup'
}

# vmm ARGS...: runs husk-vmm with a time limit; console in $T/console
# (carriage returns removed), stderr in $T/stderr, exit status in $status.
vmm() {
	rm -f "$T/console" "$T/stderr"
	lockups=$(l1_lockups)
	timeout -s KILL "${VMM_LIMIT:-180}" "$VMM" --console "$T/console.raw" "$@" 2>"$T/stderr"
	status=$?
	# A VMM killed by the time limit, either while the nested host's own
	# kernel reported a soft lockup (it hung in the emulated host, not in
	# husk), or before its guest's init ever ran (an early-boot hang seen
	# under the nested emulation, last console line "PCI: Fatal: No config
	# space access function found", with huskd and without): said, and run
	# once more; a second hang fails.
	why=
	if [ "$status" = 137 ] && [ "$(l1_lockups)" != "$lockups" ]; then
		why="the nested host's kernel reported a soft lockup during this run"
		dmesg 2>/dev/null | grep 'soft lockup' | tail -n 3
	elif [ "$status" = 137 ] && [ -e "$T/console.raw" ] && ! grep -q 'husk-agent' "$T/console.raw"; then
		why="the guest hung before its init ran (console: $(tail -n 1 "$T/console.raw" | tr -d '\r'))"
	fi
	if [ -n "$why" ]; then
		echo "note: $why; retrying once"
		rm -f "$T/console.raw"
		timeout -s KILL "${VMM_LIMIT:-180}" "$VMM" --console "$T/console.raw" "$@" 2>"$T/stderr"
		status=$?
	fi
	# A VMM that stops before opening its console leaves none.
	[ -e "$T/console.raw" ] && tr -d '\r' <"$T/console.raw" >"$T/console"
	rm -f "$T/console.raw"
}

# boot VCPUS MEM COMMAND: boots the test initramfs and runs COMMAND in the guest.
boot() {
	vmm --kernel "$KERNEL" --initrd "$INITRD" --vcpus "$1" --mem "$2" -v \
		--cmdline "quiet husk.cmd=\"$3\""
}

console_has() {
	grep -q -- "$1" "$T/console"
}

stderr_has() {
	grep -q -- "$1" "$T/stderr"
}

READY='^husk-agent: version .* ready, guest uptime [0-9.]* s$'
