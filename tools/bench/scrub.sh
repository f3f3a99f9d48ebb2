#!/bin/sh
# Writes HUSK_BENCH_SCRUB_MIB (default 384; 0: nothing) of zeros to a file in
# TMPDIR and removes it, so that the next guest started does not run on memory
# the last one freed: under the nested host's emulator the first writes to
# memory an earlier guest ran code from are slow (tools/bench/boot.sh says
# what was measured). The boot and template benchmarks call it before each
# timed start, for every side of a comparison alike.
set -eu
mib=${HUSK_BENCH_SCRUB_MIB:-384}
[ "$mib" -gt 0 ] || exit 0
f=$(mktemp "${TMPDIR:-/tmp}/bench-scrub.XXXXXX")
trap 'rm -f "$f"' EXIT
dd if=/dev/zero of="$f" bs=1048576 count="$mib" 2>/dev/null
