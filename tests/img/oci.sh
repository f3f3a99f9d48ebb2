#!/bin/sh
# husk-import (images/runtimes/import.sh) and husk-oci on the host: an OCI
# image this test makes itself with umoci (a layer with files, a second that
# deletes one of them, so a whiteout; Env, WorkingDir, User, Entrypoint) is
# imported from its OCI layout, from an OCI archive and from a docker save
# archive (skopeo writes both); the file system it becomes holds what the
# image says. Then images made to attack their unpacker - an entry with ../
# in its path, a symbolic link out of the root, a hard link out of it, a size
# claim past the limit - and a truncated archive are refused with a message
# that names the problem. Prints PASS/FAIL oci/NAME lines; exit 1 if any failed.
# Needs root (umoci writes file owners) and busybox (the image's programs).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
IMPORT=$top/build/bin/husk-import
OCI=$top/build/bin/husk-oci
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failed=0
ok() { echo "PASS oci/$1"; }
bad() {
	echo "FAIL oci/$1: $2"
	failed=1
	return 0
}
. "$top/tests/img/oci_lib.sh"

# import NAME SOURCE [ARGS]: husk-import into a fresh work folder $T/w; rc, out in $T/out.
import() {
	rm -rf "$T/w"
	mkdir "$T/w"
	n=$1
	s=$2
	shift 2
	"$IMPORT" --work "$T/w" --name "$n" "$@" "$s" >"$T/out" 2>&1
	rc=$?
}
# has FS PATH: debugfs finds PATH in the ext4 image FS; cat FS PATH prints it.
fscat() { debugfs -R "cat $2" "$1" 2>/dev/null; }
fshas() { debugfs -R "stat $2" "$1" 2>&1 | grep -q '^Inode:'; }

if ! mkimage "$T/lay"; then
	bad make_image "umoci could not make the test image: $(tail -n 3 "$T/log")"
	exit 1
fi
q skopeo --tmpdir "$T" --insecure-policy copy oci:"$T/lay:v1" docker-archive:"$T/docker.tar":husk/test:v1
q skopeo --tmpdir "$T" --insecure-policy copy oci:"$T/lay:v1" oci-archive:"$T/oci.tar":v1

# What an import of each kind of source gives.
for kind in layout oci-archive docker-archive; do
	case $kind in
	layout) s=$T/lay:v1 ;;
	oci-archive) s=$T/oci.tar ;;
	docker-archive) s=$T/docker.tar ;;
	esac
	import "test:$kind" "$s"
	if [ $rc != 0 ] || [ "$(tail -n 1 "$T/out")" != done ]; then
		bad "import_$kind" "exit $rc: $(tail -n 3 "$T/out" | tr '\n' ' ')"
		continue
	fi
	steps=$(grep -c '^step [1-6]/6 ' "$T/out")
	q "$top/build/bin/husk-img" convert -f qcow2 -O raw "$T/w/image.qcow2" "$T/raw"
	e=$T/w/entry.json
	why=""
	[ "$steps" = 6 ] || why="$steps step lines, not 6"
	[ -n "$why" ] || [ "$(fscat "$T/raw" /hello)" = "hello from layer 2" ] || why="/hello is not the second layer's"
	[ -n "$why" ] || [ "$(fscat "$T/raw" /etc/kept)" = kept ] || why="/etc/kept is missing"
	[ -n "$why" ] || ! fshas "$T/raw" /etc/gone || why="/etc/gone, deleted by layer 2 (a whiteout), is there"
	[ -n "$why" ] || fshas "$T/raw" /proc || why="no /proc mount point"
	[ -n "$why" ] || [ "$(fscat "$T/raw" /etc/hostname)" = sandbox ] || why="no /etc/hostname"
	[ -n "$why" ] || [ "$(jq -r .defaults.env.GREETING "$e")" = hi ] || why="Env not kept: $(jq -c .defaults "$e")"
	[ -n "$why" ] || [ "$(jq -r .defaults.workingDir "$e")" = /work ] || why="WorkingDir not kept"
	[ -n "$why" ] || [ "$(jq -r .defaults.user "$e")" = builder ] || why="User not kept"
	[ -n "$why" ] || [ "$(jq -c .defaults.entrypoint "$e")" = '["/bin/sh"]' ] || why="Entrypoint not kept"
	[ -n "$why" ] || [ "$(jq -r .name "$e")" = "test:$kind" ] || why="entry names $(jq -r .name "$e")"
	rm -f "$T/raw"
	if [ -z "$why" ]; then ok "import_$kind"; else bad "import_$kind" "$why"; fi
done

# refused NAME EXPECT SOURCE [ARGS]: the import fails and its error says EXPECT.
refused() {
	t=$1
	want=$2
	shift 2
	import "bad:$t" "$@"
	last=$(tail -n 1 "$T/out")
	case "$rc:$last" in
	1:"error "*"$want"*) ok "refuses_$t: ${last#error }" ;;
	*) bad "refuses_$t" "exit $rc, last line '$last' (wanted an error with '$want')" ;;
	esac
}

# evil NAME TARARGS...: the test image plus one layer that tar makes from $T/e.
evil() {
	rm -rf "$T/lay-$1"
	cp -a "$T/lay" "$T/lay-$1"
	e=$1
	shift
	(cd "$T/e" && tar "$@") >"$T/layer.tar" 2>>"$T/log" &&
		q umoci raw add-layer --image "$T/lay-$e:v1" "$T/layer.tar"
}
mkdir -p "$T/e"
echo x >"$T/e/x"
evil dotdot --transform='s|^x$|../../x|' -cf - x
refused dotdot "climbs out of the image's root" "$T/lay-dotdot:v1"
rm -f "$T/e/x"
ln -s ../../../../etc "$T/e/esc"
evil symlink -cf - esc
refused symlink "points outside the image's root" "$T/lay-symlink:v1"
rm -f "$T/e/esc"
echo y >"$T/e/y"
ln "$T/e/y" "$T/e/z"
# z goes in as a hard link to y, whose name only the link target gets as ../y (-P keeps it).
evil hardlink -P --transform='flags=h;s|^y$|../y|' -cf - y z
refused hardlink "hard link to a path outside the image's root" "$T/lay-hardlink:v1"
rm -f "$T/e/y" "$T/e/z"
truncate -s 1G "$T/e/big"
evil big --sparse -cf - big
refused size_claim "claims 1073741824 bytes" "$T/lay-big:v1" --max-bytes $((64 << 20))
rm -f "$T/e/big"
head -c $(($(stat -c %s "$T/docker.tar") / 2)) "$T/docker.tar" >"$T/short.tar"
refused truncated "truncated" "$T/short.tar"
echo "not an image" >"$T/junk"
refused not_an_image "is not a tar archive" "$T/junk"
# A layer altered after the manifest named it: its digest no longer matches.
cp -a "$T/lay" "$T/lay-tamper"
blob=$(ls -S "$T/lay-tamper/blobs/sha256" | head -n 1)
chmod u+w "$T/lay-tamper/blobs/sha256/$blob"
printf 'X' | dd of="$T/lay-tamper/blobs/sha256/$blob" bs=1 seek=100 conv=notrunc status=none
refused tampered "Digest did not match" "$T/lay-tamper:v1"

# husk-oci alone: usage errors, an arm64 image.
"$OCI" check >/dev/null 2>&1
[ $? = 2 ] && ok oci_usage || bad oci_usage "husk-oci check without a folder did not exit 2"

exit $failed
