#!/bin/sh
# husk-import: an OCI or Docker image made into a husk runtime (`husk runtime
# import`; huskd runs it, installed beside huskd as husk-import).
#
#   husk-import --work DIR --name NAME [--max-bytes N] [--max-entries N] SOURCE
#
# SOURCE: an OCI image layout folder (DIR or DIR:TAG), a tar of one (OCI
# archive), the output of `docker save`, or docker://REFERENCE (a registry,
# where one is reachable). Everything happens in the work folder, which must
# be empty and is the caller's to remove; on success it holds image.qcow2 and
# entry.json (the runtime's catalog entry, without id). Prints one line per
# step, "step N/6 TEXT", and at the end "done" or "error TEXT" (exit 1; 2 for
# bad usage). Tools: skopeo (any source to an OCI layout), husk-oci (checks
# every layer entry first: ../ paths, links out of the root, sizes), umoci
# (applies the layers, whiteouts included), mkfs.ext4 -d and husk-img; the
# rest is what busybox also has (huskd may run in a nested host made of it).
set -u
bindir=$(cd "$(dirname "$0")" && pwd)
work="" name="" max_bytes=$((16 << 30)) max_entries=2000000 src=""
while [ $# -gt 0 ]; do
	case "$1" in
	--work) work=$2; shift 2 ;;
	--name) name=$2; shift 2 ;;
	--max-bytes) max_bytes=$2; shift 2 ;;
	--max-entries) max_entries=$2; shift 2 ;;
	-*) echo "error unknown option $1"; exit 2 ;;
	*) src=$1; shift ;;
	esac
done
if [ -z "$work" ] || [ -z "$name" ] || [ -z "$src" ] || [ ! -d "$work" ]; then
	echo "error usage: husk-import --work DIR --name NAME [--max-bytes N] SOURCE"
	exit 2
fi
log=$work/log
: >"$log"
n=0
step() {
	n=$((n + 1))
	echo "step $n/6 $*"
}
# die TEXT: the reason, with the tool's last words when it has some.
said=""
die() {
	said=1
	echo "error $*"
	exit 1
}
# Whatever else ends the script early still gets an error line.
trap 'rc=$?; [ $rc = 0 ] || [ -n "$said" ] || echo "error husk-import stopped at step $n (exit $rc): $(tool_said)"' EXIT
# (skopeo's and umoci's log lines: their message alone)
tool_said() {
	grep -v '^\s*$' "$log" | tail -n 3 | sed -E 's/^time="[^"]*" level=[a-z]+ msg="(.*)"$/\1/' |
		tr '\n' ' ' | sed 's/ *$//' | cut -c1-600
}
for t in skopeo umoci mkfs.ext4 e2fsck jq; do
	command -v $t >/dev/null || die "huskd's host lacks $t (make deps installs it)"
done

# 1. Any source to an OCI layout of our own: skopeo checks each blob's digest as it copies.
step "reading the image"
tls=""
case "$src" in
docker://localhost[:/]* | docker://127.0.0.1[:/]* | docker://\[::1\][:/]*)
	# A registry on this machine speaks plain HTTP, as Docker allows for one.
	from=$src tls=--src-tls-verify=false
	;;
docker://*) from=$src ;;
*)
	path=$src tag=""
	if [ ! -e "$path" ] && [ -d "${src%:*}" ]; then
		path=${src%:*} tag=${src##*:}
	fi
	if [ -d "$path" ]; then
		[ -f "$path/index.json" ] || die "$path is a folder but no OCI image layout (it has no index.json)"
		from="oci:$path${tag:+:$tag}"
	elif [ -f "$path" ]; then
		kind=$("$bindir/husk-oci" kind "$path" 2>"$log") || die "$(tool_said | sed 's/^husk-oci: //')"
		from="$kind:$path"
	else
		die "$src: no such file or folder"
	fi
	;;
esac
mkdir -p "$work/tmp"
skopeo --tmpdir "$work/tmp" --insecure-policy copy --quiet $tls --override-arch amd64 --override-os linux \
	"$from" "oci:$work/oci:import" >>"$log" 2>&1 ||
	die "the image cannot be read (truncated or not an image?): $(tool_said)"
rm -rf "$work/tmp"
key=$(jq -r '.manifests[0].digest' "$work/oci/index.json" | sed 's/^sha256://' | cut -c1-16)
echo "read $(($(du -sk "$work/oci" | cut -f1) * 1024)) bytes"

# 2. Every layer entry looked at before anything is unpacked.
step "checking the layers"
"$bindir/husk-oci" check "$work/oci:import" --max-bytes "$max_bytes" --max-entries "$max_entries" \
	>"$work/check.json" 2>"$log" || die "$(tool_said | sed 's/^husk-oci: //')"
bytes=$(jq -r .bytes "$work/check.json")
echo "checked $(jq -r .layers "$work/check.json") layers, $(jq -r .entries "$work/check.json") entries, $bytes bytes"
# (stat -f: df cannot name the file system of an initramfs root)
avail=$(stat -f -c '%a %S' "$work" | awk '{ printf "%.0f", $1 * $2 }')
need=$((bytes * 3 + (256 << 20)))
[ -z "$avail" ] || [ "$avail" -ge "$need" ] ||
	die "the image needs about $((need >> 20)) MiB free beside huskd's state to convert; there are $((avail >> 20)) MiB"

# 3. The layers applied in order, whiteouts included.
step "unpacking"
umoci unpack --image "$work/oci:import" "$work/bundle" >>"$log" 2>&1 || die "umoci cannot unpack the image: $(tool_said)"
root=$work/bundle/rootfs
rm -rf "$work/oci"

# 4. What the agent needs of a root: the mount points, and host name and
# resolver files it can replace (not links into a /run that is empty).
step "adding husk's parts"
for d in proc sys dev tmp run root etc; do
	[ -d "$root/$d" ] && [ ! -L "$root/$d" ] && continue
	rm -f "$root/$d" && mkdir -p "$root/$d" || die "cannot make /$d in the image"
done
chmod 1777 "$root/tmp"
for f in hostname hosts resolv.conf; do
	if [ -L "$root/etc/$f" ] || [ ! -f "$root/etc/$f" ]; then
		rm -f "$root/etc/$f"
		case $f in
		hostname) echo sandbox ;;
		hosts) printf '127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n' ;;
		resolv.conf) echo "# husk writes the resolver here when the sandbox's network is on" ;;
		esac >"$root/etc/$f"
	fi
done

# 5. An ext4 file system, sized as images/runtimes/build.sh sizes its own.
step "making the file system"
used=$((($(du -skx "$root" | cut -f1) + 1023) / 1024))
size=$(((used * 13 / 10 + 128 + 63) / 64 * 64))
uuid=$(echo "$name $key" | sha256sum | sed -E 's/^(.{8})(.{4})(.{4})(.{4})(.{12}).*/\1-\2-\3-\4-\5/')
truncate -s "${size}M" "$work/image.raw"
mkfs.ext4 -F -b 4096 -I 256 -i 8192 -m 0 -L husk-import -U "$uuid" \
	-E hash_seed="$uuid",lazy_itable_init=0,lazy_journal_init=0 -d "$root" "$work/image.raw" >>"$log" 2>&1 ||
	die "mkfs.ext4 failed: $(tool_said)"
e2fsck -fn "$work/image.raw" >>"$log" 2>&1 || die "the new file system does not check clean: $(tool_said)"
rm -rf "$work/bundle"
echo "file system of $size MiB, $used MiB used"

# 6. husk's copy-on-write format.
step "converting to qcow2"
"$bindir/husk-img" convert -f raw -O qcow2 "$work/image.raw" "$work/image.qcow2" >>"$log" 2>&1 ||
	die "husk-img convert failed: $(tool_said)"
rm -f "$work/image.raw"
jq -n --arg name "$name" --arg src "$src" --arg key "$key" --argjson size "$(stat -c %s "$work/image.qcow2")" \
	--argjson vsize $((size << 20)) --argjson disk "$size" --slurpfile check "$work/check.json" \
	--arg built "$(date -u +%Y-%m-%dT%H:%M:%SZ)" '{
		name: $name,
		description: ("Imported from " + $src),
		tags: ["imported"],
		requirements: {memory: "512Mi", cpu: "1", disk: ((($disk + 1023) / 1024 | ceil | tostring) + "Gi")},
		defaults: $check[0].defaults,
		image: {format: "qcow2", size: $size, virtualSize: $vsize, filesystem: "ext4", key: $key,
			built: $built, source: $src, layers: $check[0].layers, bytes: $check[0].bytes}
	}' >"$work/entry.json" || die "cannot write the runtime's entry"
echo "done"
