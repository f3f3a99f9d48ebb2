#!/bin/sh
# Builds the guest initramfs: busybox-static with its applet links, and
# husk-agent as /init.
# usage: build.sh HUSK_AGENT OUT.cpio
set -eu
agent=${1:?usage: build.sh HUSK_AGENT OUT}
out=${2:?usage: build.sh HUSK_AGENT OUT}
busybox=/bin/busybox
if ! "$busybox" --list >/dev/null 2>&1; then
	echo "initramfs: $busybox is missing; run 'make deps' (installs busybox-static)" >&2
	exit 1
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/sbin" "$stage/usr/bin" "$stage/usr/sbin" "$stage/proc" \
	"$stage/sys" "$stage/dev" "$stage/tmp" "$stage/root" "$stage/etc"
cp "$busybox" "$stage/bin/busybox"
for applet in $("$busybox" --list-full); do
	[ -e "$stage/$applet" ] || ln -s /bin/busybox "$stage/$applet"
done
cp "$agent" "$stage/sbin/husk-agent"
ln -s /sbin/husk-agent "$stage/init"
echo "root:x:0:0:root:/root:/bin/sh" >"$stage/etc/passwd"
echo "root:x:0:" >"$stage/etc/group"
mkdir -p "$(dirname "$out")"
(cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) >"$out.tmp"
mv "$out.tmp" "$out"
