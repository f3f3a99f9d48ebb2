#!/bin/sh
# Runs every test: host unit tests (ASan+UBSan), then the integration tests on
# real KVM through tools/husk-kvm-run, then the harness's own checks. Prints
# one PASS/FAIL line per test and ends with "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/all"

# suite NAME COMMAND...: runs a suite; one that dies without reporting a
# failure (a sanitizer abort, a crashed VM) counts as a failure of its own.
suite() {
	name=$1
	shift
	echo "== $name: $*"
	# Not a pipe into tee: a process the suite leaves behind would hold the
	# pipe open and hang the run. tail follows the file until the suite ends.
	"$@" >"$tmp/out" 2>&1 </dev/null &
	pid=$!
	tail -n +1 -f --pid=$pid "$tmp/out"
	wait $pid
	rc=$?
	grep -E '^(PASS|FAIL) ' "$tmp/out" >>"$tmp/all"
	if [ "$rc" != 0 ] && ! grep -q '^FAIL ' "$tmp/out"; then
		echo "FAIL $name: exited with status $rc without reporting a failed test" | tee -a "$tmp/all"
	fi
}

hardware_kvm() {
	[ -c /dev/kvm ] && [ -w /dev/kvm ] && { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }
}

suite unit build/tests/unit-tests
suite agent tests/agent/host.sh
suite img tests/img/run.sh
suite http tests/api/run.sh
suite badinput tests/api/badinput.sh
# A short run of each fuzz target on every CI run; make fuzz runs longer.
suite fuzz tests/fuzz/run.sh 15 build/fuzz/fuzz_virtq build/fuzz/fuzz_vsock build/fuzz/fuzz_frame build/fuzz/fuzz_img build/fuzz/fuzz_http build/fuzz/fuzz_snapfile
suite integration tools/husk-kvm-run --timeout 2400 --bring "$(command -v qemu-img)" -- tests/integration/run.sh
# huskd on real KVM, driven by the published client (@agentuity/core).
suite api tools/husk-kvm-run --timeout 1500 --bring "$(command -v node)" -- tests/api/e2e.sh
suite harness tests/harness.sh
# On a KVM host the integration suite ran directly; boot once through the
# nested path too, so the harness CI depends on elsewhere keeps working.
if hardware_kvm; then
	HUSK_NESTED=1 suite nested tools/husk-kvm-run --timeout 900 -- tests/integration/run.sh boot_2cpu
fi

passed=$(grep -c '^PASS ' "$tmp/all")
failed=$(grep -c '^FAIL ' "$tmp/all")
if [ "$failed" != 0 ]; then
	echo "Failed:"
	grep '^FAIL ' "$tmp/all"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
