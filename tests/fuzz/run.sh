#!/bin/sh
# Runs each fuzz target for SECONDS, with a corpus kept in build/fuzz, two at
# a time (one per core of the 2-core test machines: half the wall time).
# usage: run.sh SECONDS TARGET...; prints PASS/FAIL per target.
set -u
secs=$1
shift
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# lane N TARGET...: runs its targets one after another; results in $out/N.
lane() {
	n=$1
	shift
	: >"$out/$n"
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
			echo "PASS fuzz/$name: ${runs:-?} inputs in ${secs}s, no crash" >>"$out/$n"
		else
			{
				echo "FAIL fuzz/$name: see below"
				tail -n 40 "$corpus.log"
			} >>"$out/$n"
		fi
	done
}

# Every other target to the second lane.
a=
b=
i=0
for t in "$@"; do
	if [ $((i % 2)) = 0 ]; then a="$a $t"; else b="$b $t"; fi
	i=$((i + 1))
done
# shellcheck disable=SC2086
lane 1 $a &
# shellcheck disable=SC2086
lane 2 $b
wait
cat "$out/1" "$out/2"
! grep -q '^FAIL ' "$out/1" "$out/2"
