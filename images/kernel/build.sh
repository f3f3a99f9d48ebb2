#!/bin/sh
# Builds the husk guest kernel from Debian's linux-source-6.1 with our config
# fragment, or reuses a cached build.  The cache lives outside the clone
# ($HUSK_CACHE, default ~/.cache/husk) and is keyed by a hash of the fragment,
# the source package version and the compiler, so a second `make` (or a fresh
# clone on the same machine) skips the ~10 minute build.
#
# usage: build.sh OUT_BZIMAGE
# Writes OUT_BZIMAGE and, beside it, vmlinux: the same kernel uncompressed and
# stripped, which husk-vmm loads without running the bzImage decompressor.
set -eu

out=${1:?usage: build.sh OUT_BZIMAGE}
here=$(cd "$(dirname "$0")" && pwd)
frag=$here/husk.config
cache=${HUSK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/husk}/kernel
tarball=/usr/src/linux-source-6.1.tar.xz

# Bump when the way the kernel is built changes (not the config: that is hashed).
recipe=2

if [ ! -f "$tarball" ]; then
	echo "kernel: $tarball is missing; run 'make deps' (installs linux-source-6.1)" >&2
	exit 1
fi
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1)
ccver=$(${CC:-gcc} -dumpfullversion)
key=$( { cat "$frag"; echo "src=$srcver cc=$ccver recipe=$recipe"; } | sha256sum | cut -c1-16)
dest=$cache/$key

# Copies the cached kernel out; vmlinux first, so a bzImage newer than the
# config means both are there (make's grouped target checks only one date).
install_kernel() {
	mkdir -p "$(dirname "$out")"
	vml=$(dirname "$out")/vmlinux
	cp "$dest/vmlinux" "$vml.tmp" && mv "$vml.tmp" "$vml"
	cp "$dest/bzImage" "$out.tmp" && mv "$out.tmp" "$out"
}

if [ -f "$dest/bzImage" ] && [ -f "$dest/vmlinux" ]; then
	echo "kernel: using cached build $key ($dest)"
	install_kernel
	exit 0
fi

echo "kernel: building $key from linux-source-6.1 $srcver (about 10 minutes on 2 cores)"
src=$cache/src-$srcver
if [ ! -f "$src/.extracted" ]; then
	echo "kernel: unpacking $tarball"
	rm -rf "$src" && mkdir -p "$src"
	tar -xJf "$tarball" -C "$src" --strip-components=1
	touch "$src/.extracted"
fi

# One object directory for every configuration: kbuild then recompiles only
# what a config change touches. A lock keeps two builds from sharing it.
obj=$cache/obj
mkdir -p "$obj"
exec 9>"$cache/obj.lock"
flock 9
if [ -f "$dest/bzImage" ] && [ -f "$dest/vmlinux" ]; then
	echo "kernel: built meanwhile by another process"
	install_kernel
	exit 0
fi
log=$obj/build.log
kmake() { make -C "$src" O="$obj" ARCH=x86_64 "$@"; }

rm -f "$obj/.config"
kmake tinyconfig >"$log" 2>&1
"$src/scripts/kconfig/merge_config.sh" -m -O "$obj" "$obj/.config" "$frag" >>"$log" 2>&1
kmake olddefconfig >>"$log" 2>&1

# A symbol whose dependencies are unmet is silently dropped by olddefconfig;
# refuse to build a kernel that lacks something the fragment asks for.
missing=0
grep -E '^(CONFIG_|# CONFIG_)' "$frag" | while IFS= read -r line; do
	sym=$(echo "$line" | sed -E 's/^# (CONFIG_[A-Za-z0-9_]+).*/\1/; s/=.*//')
	# "is not set" also holds when the symbol vanished with its dependencies.
	case "$line" in
	"# "*) grep -qE "^$sym=" "$obj/.config" || continue ;;
	esac
	if ! grep -qxF "$line" "$obj/.config"; then
		echo "kernel: config wants '$line' but got '$(grep -E "(^|# )$sym[= ]" "$obj/.config" || echo unset)'" >&2
		echo x
	fi
done >"$obj/missing"
if [ -s "$obj/missing" ]; then
	echo "kernel: the config fragment did not apply; fix images/kernel/husk.config" >&2
	exit 1
fi

# Print a progress line every 200 compiled objects instead of the full log.
start=$(date +%s)
set +e
kmake -j"$(nproc)" bzImage 2>&1 | tee -a "$log" | awk -v start="$start" '
	/^  CC / { n++; if (n % 200 == 0) { printf "kernel: %d objects compiled (%ds)\n", n, systime() - start; fflush() } }'
rc=$?
set -e
if [ ! -f "$obj/arch/x86/boot/bzImage" ] || ! grep -q 'is ready' "$log"; then
	echo "kernel: build failed; last lines of $log:" >&2
	tail -n 30 "$log" >&2
	exit 1
fi
mkdir -p "$dest"
cp "$obj/.config" "$dest/config"
# Symbols and debug sections are of no use to the loader: strip them, keeping
# the notes (the "Linux" note husk-vmm checks, Xen's PVH entry for QEMU).
objcopy --strip-all "$obj/vmlinux" "$dest/vmlinux.tmp"
mv "$dest/vmlinux.tmp" "$dest/vmlinux"
cp "$obj/arch/x86/boot/bzImage" "$dest/bzImage.tmp"
mv "$dest/bzImage.tmp" "$dest/bzImage"
echo "kernel: built $key in $(( $(date +%s) - start ))s ($(stat -c %s "$dest/bzImage") bytes)"
install_kernel
exit $rc
