#!/bin/sh
# Integration tests: real guests on real KVM. Run through tools/husk-kvm-run.
# usage: run.sh [NAME-FILTER]   (env HUSK_SKIP="t_a t_b": tests not to run;
#                               HUSK_ONLY="t_a t_b": only these)
set -u
. "$(dirname "$0")/lib.sh"
filter=${1:-}
took=

for f in "$(dirname "$0")"/t_*.sh; do
	. "$f"
done
# HUSK_SKIP: tests already run in a nested host that wedged (tests/run.sh
# runs the rest in a fresh one). "-- NAME" marks where each test starts.
for t in $(grep -h -o '^t_[a-z0-9_]*()' "$(dirname "$0")"/t_*.sh | tr -d '()'); do
	case "$t" in *"$filter"*) ;; *) continue ;; esac
	case " ${HUSK_SKIP:-} " in *" $t "*) continue ;; esac
	# HUSK_ONLY: the tests that failed, run again in a fresh nested host (tests/run.sh).
	[ -z "${HUSK_ONLY:-}" ] || case " $HUSK_ONLY " in *" $t "*) ;; *) continue ;; esac
	echo "-- $t"
	# (names of their own: the tests share this shell's variables, and some set t and t0)
	run_name=$t
	run_t0=$(date +%s)
	"$t"
	took="$took$(($(date +%s) - run_t0)) $run_name
"
done
# Where the suite's time goes (make test's own is kept under 45 min).
echo "integration: slowest (s): $(printf '%s' "$took" | sort -rn | head -n 10 | awk '{ printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1 }')"
echo "integration: $passed passed, $failed failed"
[ "$failed" = 0 ]
