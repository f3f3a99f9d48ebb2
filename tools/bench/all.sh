#!/bin/sh
# make bench: every benchmark, each in a nested host of its own (the baseline
# it is compared with runs in the same one), then every goal line again, in
# one list. A part whose nested host wedged (tools/husk-kvm-run exit 123: the
# emulated host's kernel locked up, seen in the boot benchmark) runs again in
# a fresh one, at most twice; the others go on either way.
# HUSK_BENCH_PARTS="boot agent ...": only these (default: all, in this order).
set -u
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
parts=${HUSK_BENCH_PARTS:-boot agent disk net api snapshot memfile templates runtimes}
failed=""

for part in $parts; do
	[ -x "tools/bench/$part.sh" ] || { echo "bench: no benchmark '$part' (tools/bench/*.sh)" >&2; exit 2; }
done
for part in $parts; do
	try=1
	while :; do
		echo "== $part (tools/bench/$part.sh)"
		{
			tools/husk-kvm-run --timeout 3000 --idle 600 --mem 6144 \
				--bring "$(command -v qemu-system-x86_64)" --bring /usr/share/qemu \
				--bring /usr/share/seabios --bring "$(command -v node)" \
				--bring /usr/sbin/ip -- "tools/bench/$part.sh" 2>&1
			echo $? >"$out/$part.rc"
		} | tee "$out/$part"
		rc=$(cat "$out/$part.rc")
		[ "$rc" = 123 ] && [ $try -lt 3 ] || break
		try=$((try + 1))
		echo "bench: $part: the nested host wedged; running it again in a fresh one"
	done
	[ "$rc" = 0 ] || failed="$failed $part (exit $rc)"
done

echo
echo "== goals (each part's own lines above say what was compared)"
for part in $parts; do
	grep -E 'goal.*(met|NOT met)$' "$out/$part" | sed "s/^ */$part: /"
done
if [ -n "$failed" ]; then
	echo "bench: failed:$failed (see their output above)"
	exit 1
fi
