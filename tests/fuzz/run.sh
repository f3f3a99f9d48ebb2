#!/bin/sh
# Runs each fuzz target for SECONDS, with a corpus kept in build/fuzz.
# usage: run.sh SECONDS TARGET...; prints PASS/FAIL per target.
set -u
secs=$1
shift
failed=0
for t in "$@"; do
	name=$(basename "$t")
	corpus=$(dirname "$t")/corpus-$name
	mkdir -p "$corpus"
	# Checked-in seeds (tests/fuzz/seeds/NAME, read only): new finds go to the corpus.
	seeds=$(dirname "$0")/seeds/$name
	[ -d "$seeds" ] || seeds=
	# shellcheck disable=SC2086
	if "$t" -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$(dirname "$t")/crash-$name-" "$corpus" $seeds >"$corpus.log" 2>&1; then
		runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$corpus.log")
		echo "PASS fuzz/$name: ${runs:-?} inputs in ${secs}s, no crash"
	else
		echo "FAIL fuzz/$name: see below"
		tail -n 40 "$corpus.log"
		failed=1
	fi
done
exit $failed
