#!/bin/sh
# fake-vmm (tests/fakes/README.md) checked on its own, so that a failure of
# huskd's tests that use it is huskd's: fake-check drives it as huskd does,
# then no fake it ran may have left a sanitizer report in its log.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failed=0
"$top/build/tests/fake-check" "$top/build/tests/fake-vmm" "$T" >"$T/out" 2>&1
rc=$?
cat "$T/out"
if [ "$rc" != 0 ] && ! grep -q '^FAIL ' "$T/out"; then
	echo "FAIL fakes/fake_check: exited with status $rc"
fi
[ "$rc" = 0 ] || failed=1
if grep -q -e "runtime error" -e "Sanitizer" "$T"/*.log; then
	echo "FAIL fakes/no_sanitizer_report:"
	grep -h -B2 -A30 -e "runtime error" -e "Sanitizer" "$T"/*.log
	failed=1
else
	echo "PASS fakes/no_sanitizer_report"
fi
exit $failed
