#!/bin/sh
# Runs every test: host unit tests (ASan+UBSan), then the integration tests on
# real KVM through tools/husk-kvm-run, then the harness's own checks. Prints
# one PASS/FAIL line per test and ends with "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/all"

# suite [--resume] NAME COMMAND...: runs a suite; one that dies without reporting a
# failure (a sanitizer abort, a crashed VM) counts as a failure of its own.
# A suite whose nested host wedged (tools/husk-kvm-run exit 123, the
# emulated host's kernel locked up) runs once more in a fresh one. With
# --resume it goes on with only the tests it had not finished (their
# results so far kept, the one in flight run again): a third wedge in a row
# in the same test, or a fifth in all, fails (CI62: two in a row in one
# section, the second before any guest ran, both CPUs of the nested host
# stuck in its kernel). Without --resume: all of it, once.
suite() {
	resume=0
	[ "$1" != --resume ] || { resume=1; shift; }
	name=$1
	shift
	echo "== $name: $*"
	t_suite=$(date +%s)
	: >"$tmp/held"
	run_suite "$@"
	again=0
	same=0
	skip=
	last=
	while [ "$rc" = 123 ]; do
		again=$((again + 1))
		mv "$tmp/out" "$tmp/out.wedged"
		if [ "$resume" = 1 ]; then
			# Tests started before the last one are done; keep their results (and
			# their "-- t_" lines: a failure among them is run again below).
			done_now=$(awk '/^-- t_/ { if (cur != "") done = done " " cur; cur = $2 } END { print done }' "$tmp/out.wedged")
			awk '/^-- t_/ { for (i = 0; i < n; i++) print held[i]; n = 0; held[n++] = $0 } /^(PASS|FAIL) / { held[n++] = $0 }' \
				"$tmp/out.wedged" >>"$tmp/held"
			in_flight=$(awk '/^-- t_/ { cur = $2 } END { print cur }' "$tmp/out.wedged")
			skip="$skip$done_now"
			why=
			# The same test, with nothing finished in between: how many times.
			if [ -n "$in_flight" ] && [ -z "$done_now" ] && [ "$in_flight" = "$last" ]; then
				same=$((same + 1))
			else
				same=1
			fi
			[ "$again" -lt 5 ] || why="$again times"
			[ "$same" -lt 3 ] || why="$same times in a row in $in_flight"
			if [ -n "$why" ]; then
				echo "FAIL $name: the nested host wedged $why" | tee -a "$tmp/all"
				: >"$tmp/out" # what it finished is in $tmp/held
				break
			fi
			last=$in_flight
		elif [ "$again" -ge 2 ]; then
			echo "FAIL $name: the nested host wedged twice" | tee -a "$tmp/all"
			mv "$tmp/out.wedged" "$tmp/out"
			break
		fi
		echo "note: $name: the nested host wedged; running ${skip:+the rest of }the suite again in a fresh one"
		export HUSK_SKIP="$skip"
		run_suite "$@"
		unset HUSK_SKIP
	done
	# What the wedged hosts finished counts with the last run's, failures too.
	if [ -s "$tmp/held" ]; then
		cat "$tmp/held" "$tmp/out" >"$tmp/out.all"
		mv "$tmp/out.all" "$tmp/out"
	fi
	# One run more at most: not after a wedge's, unless that run only went on
	# from where the wedge stopped (--resume); then the failed tests once more.
	if { [ "$again" = 0 ] || [ "$resume" = 1 ]; } && { [ "$rc" != 0 ] || grep -q '^FAIL ' "$tmp/out"; } &&
		[ "$rc" != 123 ] && emulated_kvm && [ "$*" != "${*#tools/husk-kvm-run }" ]; then
		rerun "$@"
	fi
	grep -E '^(PASS|FAIL) ' "$tmp/out" >>"$tmp/all"
	if [ "$rc" != 0 ] && [ "$rc" != 123 ] && ! grep -q '^FAIL ' "$tmp/out"; then
		echo "FAIL $name: exited with status $rc without reporting a failed test" | tee -a "$tmp/all"
	fi
	# Where make test's time goes (reruns included), for the summary.
	echo "$name $(($(date +%s) - t_suite))" >>"$tmp/times"
}

# rerun COMMAND...: a suite on the emulated nested host failed. That host
# (QEMU's TCG emulating AMD SVM, kvm-amd inside) now and then loses a guest
# that did nothing wrong: a triple fault as a vCPU is kicked out of KVM_RUN,
# a guest that never prints a line, a soft lockup (README.md, "Two commands";
# never reproduced by the same test alone in a loop). So the suite runs once more in
# a fresh nested host: a suite in sections (integration, api, net_serve) only the
# sections that failed (from the "-- t_NAME" line before each FAIL), the
# others whole. The rerun's results count; a failure the rerun passes is
# listed as FLAKY in the summary, never dropped silently; one the rerun never
# got to pass (its host wedged or panicked first) stays a failure.
rerun() {
	mv "$tmp/out" "$tmp/out.first"
	only=
	# A failure before the first section is no section's: then all of it runs again.
	if grep -q '^-- t_' "$tmp/out.first" &&
		[ -z "$(awk '/^-- t_/ { exit } /^FAIL / { print; exit }' "$tmp/out.first")" ]; then
		only=$(awk '/^-- t_/ { cur = $2 } /^FAIL / && cur != "" && !seen[cur]++ { printf "%s ", cur }' "$tmp/out.first")
		only=${only% }
		# Tests that passed the first time keep their result.
		[ -z "$only" ] || awk '/^-- t_/ { cur = $2 } /^PASS / && index(" '"$only"' ", " " cur " ") == 0' "$tmp/out.first" >>"$tmp/all"
	fi
	what="the suite"
	[ -z "$only" ] || what=$only
	echo "note: $name: failed on the emulated nested host; running $what once more in a fresh one"
	HUSK_ONLY=$only run_suite "$@"
	# A host that wedged or panicked gave the tests no verdict: one more, once.
	if [ "$rc" = 123 ]; then
		echo "note: $name: the rerun's nested host wedged too; $what once more in another"
		HUSK_ONLY=$only run_suite "$@"
	fi
	# A rerun that ended well with no failure passed what it ran, also a
	# failure whose name has no PASS twin (a check that failed before its own).
	clean=0
	[ "$rc" != 0 ] || grep -q '^FAIL ' "$tmp/out" || clean=1
	grep '^FAIL ' "$tmp/out.first" | while IFS= read -r line; do
		t=${line#FAIL }
		t=${t%%:*}
		if grep -q "^FAIL $t[: ]" "$tmp/out" || grep -q "^FAIL $t\$" "$tmp/out"; then
			: # failed again: counted from the rerun's lines
		elif [ "$clean" = 1 ] || grep -q "^PASS $t\$" "$tmp/out" || grep -q "^PASS $t[ :]" "$tmp/out"; then
			echo "FLAKY $t: failed, then passed on the rerun (${line#FAIL $t: })" >>"$tmp/flaky"
		else
			# The rerun's host wedged or panicked before the test passed: it never did.
			echo "FAIL $t: failed, and the rerun ended before it passed (${line#FAIL $t: })" >>"$tmp/out"
		fi
	done
}

# run_suite COMMAND...: output to the terminal and $tmp/out, status in $rc.
run_suite() {
	# Not a pipe into tee: a process the suite leaves behind would hold the
	# pipe open and hang the run. tail follows the file until the suite ends;
	# the file exists before either starts (else tail, first, finds none and
	# the suite's lines are not shown, as after a wedge in CI30).
	: >"$tmp/out"
	"$@" >>"$tmp/out" 2>&1 </dev/null &
	pid=$!
	tail -n +1 -f --pid=$pid "$tmp/out"
	wait $pid
	rc=$?
}

emulated_kvm() { ! hardware_kvm; }

hardware_kvm() {
	[ -c /dev/kvm ] && [ -w /dev/kvm ] && { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }
}

# Every C file as make format writes it (Debian bookworm's clang-format 14).
suite format sh -c 'if out=$(make --no-print-directory check-format 2>&1); then echo "PASS format/check_format: $out"; else echo "FAIL format/check_format: $out"; fi'
# Every shell script parses, also those make test never runs (the benchmarks).
suite sh_syntax tests/sh_syntax.sh
suite unit build/tests/unit-tests
# The daemon's layers as its objects link: no circle of calls over a pair, the manager below HTTP.
suite layers node tests/layers/check.mjs
suite agent tests/agent/host.sh
# The stand-in husk-vmm that huskd's host-only tests run (tests/fakes/README.md).
suite fakes tests/fakes/check.sh
suite img tests/img/run.sh
# husk runtime import: husk-import and husk-oci (images refused for ../ paths, links out, sizes),
# then through huskd and the CLI; the host alone (skopeo, umoci, mkfs.ext4).
suite oci tests/img/oci.sh
suite import tests/api/import.sh
suite http tests/api/run.sh
# huskd's sandbox manager, host only: its state machine driven with a fake VMM and agent.
suite manager build/tests/sbx-test build/tests/fake-vmm
suite badinput tests/api/badinput.sh
# huskd under load, host only (fake VMM): the published client, vanishing clients, cancels, destroys.
suite load tests/api/load.sh
# Orgs and API keys, host only (fake VMM): scoping, roles, hashed keys, public snapshots, restarts.
suite tenants tests/api/tenants.sh
# huskd over HTTPS, host only (fake VMM): the published client with a member key, refusals at start.
suite tls tests/api/tls.sh
# User streams, host only (fake VMM): run() with stdin, stdin written live, output into a stream.
suite streams tests/api/streams.sh
# Every route, query parameter and answer shape of the published client's API list, served.
suite conformance tests/api/conformance.sh
# E2B's API, host only (fake VMM): the published e2b SDK, unmodified.
suite e2b tests/api/e2b.sh
# A short run of every fuzz target make fuzz-build made (build/fuzz/fuzz_*) on
# every CI run; make fuzz runs longer.
suite fuzz tests/fuzz/run.sh 10 build/fuzz/fuzz_*
suite --resume integration tools/husk-kvm-run --timeout 2400 --idle 600 --bring "$(command -v qemu-img)" -- tests/integration/run.sh
# huskd on real KVM, driven by the published client (@agentuity/core).
# GNU tar: husk snapshot build packs with --null -T (busybox tar has neither).
# 6 GiB: the nested host's disk is its memory, and memory files (of templates and snapshots)
# hold guest RAM uncompressed beside huskd's 1 GiB reserve.
suite --resume api tools/husk-kvm-run --timeout 1500 --idle 600 --mem 6144 --bring "$(command -v node)" --bring "$(command -v tar)" -- tests/api/e2e.sh
# Sandbox networking on real KVM against a stand-in internet the suite builds
# (iproute2's ip: busybox's has no netns or veth; dnsmasq as its DNS server).
suite net tools/husk-kvm-run --timeout 900 --idle 600 --bring "$(command -v node)" --bring /usr/sbin/ip \
	--bring /usr/sbin/dnsmasq -- tests/api/net.sh
# Exposed ports (HTTP, WebSocket), egress counts and rates, lists changed at run time.
# (dpkg-deb, and GNU tar for it, make the test's apt package.)
suite --resume net_serve tools/husk-kvm-run --timeout 900 --idle 600 --bring "$(command -v node)" --bring /usr/sbin/ip \
	--bring /usr/sbin/dnsmasq --bring "$(command -v dpkg-deb)" --bring "$(command -v tar)" -- tests/api/net_serve.sh
# An imported OCI image boots and runs as its config says (skopeo and umoci make it,
# and convert it in huskd's husk-import, with mkfs.ext4, e2fsck and jq).
suite import_guest tools/husk-kvm-run --timeout 900 --idle 600 --bring "$(command -v skopeo)" \
	--bring "$(command -v umoci)" --bring "$(command -v mkfs.ext4)" --bring "$(command -v e2fsck)" \
	--bring "$(command -v jq)" -- tests/api/import_guest.sh
# Templates: creates restore a guest booted once per runtime and shape (issue J).
suite templates tools/husk-kvm-run --timeout 900 --idle 600 -- tests/api/templates.sh
# Every VMM confined: uid, capabilities, namespaces, root, environment (issue H).
suite jail tools/husk-kvm-run --timeout 900 --idle 600 -- tests/api/jail.sh
suite harness tests/harness.sh
# On a KVM host the integration suite ran directly; boot once through the
# nested path too, so the harness CI depends on elsewhere keeps working.
if hardware_kvm; then
	HUSK_NESTED=1 suite nested tools/husk-kvm-run --timeout 900 -- tests/integration/run.sh boot_2cpu
fi

echo "Time per suite (s): $(awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2; t += $2 } END { printf "; all suites %d", t }' "$tmp/times")"
passed=$(grep -c '^PASS ' "$tmp/all")
failed=$(grep -c '^FAIL ' "$tmp/all")
flaky=0
if [ -s "$tmp/flaky" ]; then
	flaky=$(wc -l <"$tmp/flaky")
	echo "Flaky (failed on the emulated nested host, passed when run again):"
	cat "$tmp/flaky"
fi
if [ "$failed" != 0 ]; then
	echo "Failed:"
	grep '^FAIL ' "$tmp/all"
fi
if [ "$flaky" != 0 ]; then
	echo "$passed passed, $failed failed ($flaky flaky)"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
