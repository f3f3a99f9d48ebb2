# Helpers for integration tests; sourced by tests/integration/run.sh.
# Tests run where /dev/kvm works (see tools/husk-kvm-run) with busybox or
# coreutils, so they stick to POSIX sh.

top=$(cd "$(dirname "$0")/../.." && pwd)
VMM=${HUSK_VMM:-$top/build/bin/husk-vmm-san}
KERNEL=${HUSK_KERNEL:-$top/build/images/bzImage}
INITRD=${HUSK_INITRD:-$top/build/images/initramfs.cpio}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0

pass() {
	echo "PASS $1"
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

# vmm ARGS...: runs husk-vmm with a time limit; console in $T/console
# (carriage returns removed), stderr in $T/stderr, exit status in $status.
vmm() {
	rm -f "$T/console" "$T/stderr"
	timeout -s KILL 180 "$VMM" --console "$T/console.raw" "$@" 2>"$T/stderr"
	status=$?
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
