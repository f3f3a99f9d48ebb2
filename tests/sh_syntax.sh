#!/bin/sh
# Every shell script of the tree parses (sh -n, dash): scripts that make
# test never runs, such as the benchmarks, broke unseen (a stray apostrophe
# inside a single-quoted awk program ended make bench-api after its run).
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
n=0
bad=0
for f in $(find . \( -path ./build -o -name node_modules -o -name .git \) -prune -o -type f -print | sort); do
	case "$f" in
	*.sh) ;;
	*) head -n 1 "$f" 2>/dev/null | grep -q '^#! */bin/sh' || continue ;;
	esac
	n=$((n + 1))
	if ! err=$(sh -n "$f" 2>&1); then
		echo "FAIL sh_syntax/$f: $err"
		bad=1
	fi
done
[ "$bad" = 1 ] || echo "PASS sh_syntax/all: $n shell scripts parse"
exit $bad
