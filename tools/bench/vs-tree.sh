#!/bin/sh
# create -> first exec against another tree of husk (issue F: "no slower than
# today"): make bench-vs-tree OLD=/path/to/a/built/clone. The old tree's huskd,
# husk-vmm, kernel, initramfs and base:latest run beside this tree's in one
# nested host, and creates alternate between them (base:latest 256Mi, exec
# true, destroy; tools/bench/vs-tree.mjs), so both see the same host speed -
# a nested host's speed moves by 2x within an hour. This tree runs three ways:
# as it starts by default (templates on: the shape's template is made first),
# booting every time (--templates off), and booting with clear disks
# (--templates off --seal off: what the old tree did).
# Outside the nested host (OLD set): copies what runs into build/tests/vs-tree,
# which the nested host sees, and starts it there.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
stage=$top/build/tests/vs-tree
if [ "${1:-}" != --inside ]; then
	old=${OLD:?"set OLD to a built clone of the tree to compare with (make all run in it)"}
	for f in build/bin/huskd build/bin/husk-vmm build/images/bzImage build/images/initramfs.cpio \
		build/images/runtimes/base-latest.qcow2 build/images/runtimes/base-latest.json; do
		[ -f "$old/$f" ] || { echo "vs-tree: $old/$f is missing: run make all in $old" >&2; exit 2; }
	done
	rm -rf "$stage"
	mkdir -p "$stage/bin" "$stage/images/runtimes"
	cp "$old/build/bin/huskd" "$old/build/bin/husk-vmm" "$stage/bin/"
	cp "$old/build/images/bzImage" "$old/build/images/initramfs.cpio" "$stage/images/"
	# A tree that builds the uncompressed kernel boots it (huskd prefers it).
	[ ! -f "$old/build/images/vmlinux" ] || cp "$old/build/images/vmlinux" "$stage/images/"
	cp "$old/build/images/runtimes/base-latest.qcow2" "$old/build/images/runtimes/base-latest.json" \
		"$stage/images/runtimes/"
	# Its catalog with base:latest alone: the other runtimes are not brought.
	node -e 'const fs = require("fs"), c = JSON.parse(fs.readFileSync(process.argv[1]));
		c.runtimes = c.runtimes.filter((r) => r.name === "base:latest");
		fs.writeFileSync(process.argv[2], JSON.stringify(c));' \
		"$old/build/images/runtimes/catalog.json" "$stage/images/runtimes/catalog.json"
	git -C "$old" log -1 --format=%h >"$stage/commit" 2>/dev/null || echo "?" >"$stage/commit"
	# The nested host has no git: this tree's commit goes with the old one's.
	git -C "$top" log -1 --format=%h >"$stage/this" 2>/dev/null || echo "?" >"$stage/this"
	exec "$top/tools/husk-kvm-run" --timeout 3600 --idle 600 --mem 6144 --bring "$(command -v node)" \
		-- "$top/tools/bench/vs-tree.sh" --inside
fi
# shellcheck source=tools/bench/lib.sh
. "$top/tools/bench/lib.sh"
# start NAME PORT HUSKD IMAGES [ARG...]: a huskd, up once it says it listens.
start() {
	n=$1 p=$2 b=$3 i=$4
	shift 4
	HUSK_API_KEY=$key "$b" --port "$p" --state "$T/$n" --images "$i" "$@" >"$T/$n.log" 2>&1 &
	pid="$pid $!"
	huskd_up "$T/$n.log" || exit 1
}
start old 18381 "$stage/bin/huskd" "$stage/images" --vmm "$stage/bin/husk-vmm"
start default 18382 "$top/build/bin/huskd" "$top/build/images"
start cold 18383 "$top/build/bin/huskd" "$top/build/images" --templates off
start cold_clear 18384 "$top/build/bin/huskd" "$top/build/images" --templates off --seal off
echo "vs-tree: creates alternating between $(cat "$stage/commit") and this tree ($(cat "$stage/this"))..." >&2
HUSK_API_KEY=$key HUSK_VS_LOG=$T/default.log HUSK_VS_ROUNDS=${HUSK_VS_ROUNDS:-10} node "$top/tools/bench/vs-tree.mjs" \
	old=http://127.0.0.1:18381 default=http://127.0.0.1:18382 cold=http://127.0.0.1:18383 \
	cold_clear=http://127.0.0.1:18384 >"$T/out" ||
	{ for n in old default cold cold_clear; do echo "--- $n" >&2; tail -n 20 "$T/$n.log" >&2; done; exit 1; }
awk -v old="$(cat "$stage/commit")" '{ med[$1] = $2; lo[$1] = $3; hi[$1] = $4; n = $5 } END {
	printf "\ncreate -> first exec against %s (base:latest 256Mi, %d rounds, interleaved; ms)\n", old, n
	printf "%-34s %10s %10s %10s %8s\n", "", "median", "min", "max", "vs old"
	split("old default cold cold_clear", k, " ")
	label["old"] = old; label["default"] = "this tree (defaults)"
	label["cold"] = "this tree, --templates off"; label["cold_clear"] = "  and --seal off"
	for (i = 1; i <= 4; i++)
		printf "%-34s %10.0f %10.0f %10.0f %8.2f\n", label[k[i]], med[k[i]], lo[k[i]], hi[k[i]], med[k[i]] / med["old"]
	printf "goal: create -> first exec no slower than %s, as huskd starts (%.2f): %s\n", old,
		med["default"] / med["old"], med["default"] <= med["old"] ? "met" : "NOT met"
	printf "goal: the same booting with clear disks, as %s did (%.2f): %s\n", old,
		med["cold_clear"] / med["old"], med["cold_clear"] <= med["old"] ? "met" : "NOT met"
}' "$T/out"
