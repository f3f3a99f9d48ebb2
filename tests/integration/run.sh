#!/bin/sh
# Integration tests: real guests on real KVM. Run through tools/husk-kvm-run.
# usage: run.sh [NAME-FILTER]
set -u
. "$(dirname "$0")/lib.sh"
filter=${1:-}

for f in "$(dirname "$0")"/t_*.sh; do
	. "$f"
done
for t in $(grep -h -o '^t_[a-z0-9_]*()' "$(dirname "$0")"/t_*.sh | tr -d '()'); do
	case "$t" in *"$filter"*) ;; *) continue ;; esac
	"$t"
done
echo "integration: $passed passed, $failed failed"
[ "$failed" = 0 ]
