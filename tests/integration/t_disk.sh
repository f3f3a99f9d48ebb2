# virtio-blk on raw files and on our copy-on-write images, in real guests.

IMG=$top/build/bin/husk-img

# disk_boot COMMAND DISK-ARG...: boots the test initramfs (busybox) with disks.
disk_boot() {
	cmd=$1
	shift
	vmm --kernel "$KERNEL" --initrd "$INITRD" --vcpus 2 --mem 256M -v "$@" \
		--cmdline "quiet husk.cmd=\"$cmd\""
}

# sha_of FILE [MIB]: sha256 of the first MIB MiB (all of it without MIB).
sha_of() {
	if [ -n "${2:-}" ]; then head -c $(($2 << 20)) "$1"; else cat "$1"; fi | sha256sum | cut -d' ' -f1
}

# qcheck NAME IMAGE: qemu-img check must find nothing (when qemu-img is here).
qcheck() {
	command -v qemu-img >/dev/null || return 0
	if ! qemu-img check -q "$2" >"$T/qcheck" 2>&1; then
		fail "$1" "qemu-img check $2: $(cat "$T/qcheck")"
		return 1
	fi
}

# Writes 16 MiB of random data through the guest and reads them back on the host.
write_and_compare() { # NAME IMAGE FORMAT
	disk_boot "head -c 16777216 /dev/urandom > /tmp/d && dd if=/tmp/d of=/dev/vda bs=1M conv=fsync 2>/dev/null && sha256sum /tmp/d" \
		--disk "$2,format=$3,serial=husk-test-disk"
	want=$(awk 'length($1) == 64 {print $1; exit}' "$T/console")
	if [ "$status" != 0 ] || [ -z "$want" ]; then
		fail "$1" "the guest did not write the disk (status $status)"
		return 1
	fi
	if [ "$3" = qcow2 ]; then
		"$IMG" convert -f qcow2 -O raw "$2" "$T/flat.raw" || { fail "$1" "husk-img convert failed"; return 1; }
		got=$(sha_of "$T/flat.raw" 16)
		rm -f "$T/flat.raw"
	else
		got=$(sha_of "$2" 16)
	fi
	if [ "$got" != "$want" ]; then
		fail "$1" "the host reads sha256 $got, the guest wrote $want"
		return 1
	fi
}

t_disk_raw() {
	truncate -s 64M "$T/raw.img"
	write_and_compare disk_raw "$T/raw.img" raw && pass disk_raw
	rm -f "$T/raw.img"
}

t_disk_qcow2() {
	"$IMG" create "$T/q.qcow2" 64M >/dev/null
	write_and_compare disk_qcow2 "$T/q.qcow2" qcow2 && qcheck disk_qcow2 "$T/q.qcow2" && pass disk_qcow2
	rm -f "$T/q.qcow2"
}

# Several disks, in order, each with its own serial and size.
t_disk_several() {
	"$IMG" create "$T/q.qcow2" 96M >/dev/null
	truncate -s 40M "$T/r.raw"
	disk_boot "for d in vda vdb; do echo \$d \$(cat /sys/block/\$d/serial) \$(cat /sys/block/\$d/size); done" \
		--disk "$T/q.qcow2,serial=disk-42" --disk "$T/r.raw,format=raw,serial=disk-43"
	if ! grep -qx "vda disk-42 $((96 * 2048))" "$T/console"; then
		fail disk_several "the guest does not see vda as disk-42 of 96 MiB"
	elif ! grep -qx "vdb disk-43 $((40 * 2048))" "$T/console"; then
		fail disk_several "the guest does not see vdb as disk-43 of 40 MiB"
	else
		pass disk_several
	fi
	rm -f "$T/q.qcow2" "$T/r.raw"
}

t_disk_readonly() {
	head -c 1048576 /dev/urandom >"$T/ro.img"
	before=$(sha_of "$T/ro.img")
	disk_boot "cat /sys/block/vda/ro; dd if=/dev/zero of=/dev/vda bs=4096 count=1 conv=fsync && echo WROTE" \
		--disk "$T/ro.img,format=raw,ro"
	if ! grep -qx 1 "$T/console"; then
		fail disk_readonly "the guest does not see a read-only disk"
	elif console_has WROTE || [ "$(sha_of "$T/ro.img")" != "$before" ]; then
		fail disk_readonly "the guest wrote a read-only disk"
	else
		pass disk_readonly
	fi
	rm -f "$T/ro.img"
}

# Offsets past 4 GiB on a sparse 6 GiB image: the host file stays small.
t_disk_past_4g() {
	"$IMG" create "$T/big.qcow2" 6G >/dev/null
	disk_boot "head -c 4194304 /dev/urandom > /tmp/d; dd if=/tmp/d of=/dev/vda bs=1M seek=5120 conv=fsync 2>/dev/null; sha256sum /tmp/d; dd if=/dev/vda bs=1M skip=5120 count=4 2>/dev/null | sha256sum" \
		--disk "$T/big.qcow2"
	n=$(awk 'length($1) == 64 {print $1}' "$T/console" | sort -u | wc -l)
	size=$(du -k "$T/big.qcow2" | cut -f1)
	if [ "$status" != 0 ] || [ "$n" != 1 ]; then
		fail disk_past_4g "data written at 5 GiB did not read back the same (status $status)"
	elif [ "$size" -gt 16384 ]; then
		fail disk_past_4g "the image takes $size KiB for 4 MiB of data"
	else
		qcheck disk_past_4g "$T/big.qcow2" && pass disk_past_4g
	fi
	rm -f "$T/big.qcow2"
}

# A layer's writes never reach its base.
t_disk_base_untouched() {
	head -c 8388608 /dev/urandom >"$T/base.raw"
	"$IMG" convert -f raw -O qcow2 "$T/base.raw" "$T/base.qcow2" >/dev/null
	"$IMG" create -b "$T/base.qcow2" -F qcow2 "$T/layer.qcow2" >/dev/null
	before=$(sha_of "$T/base.qcow2")
	disk_boot "dd if=/dev/vda bs=1M count=8 2>/dev/null | sha256sum; dd if=/dev/zero of=/dev/vda bs=4096 seek=3 count=100 conv=fsync 2>/dev/null" \
		--disk "$T/layer.qcow2"
	if ! grep -q "^$(sha_of "$T/base.raw") " "$T/console"; then
		fail disk_base_untouched "the guest does not read the base's data through the layer"
	elif [ "$(sha_of "$T/base.qcow2")" != "$before" ]; then
		fail disk_base_untouched "writing the layer changed the base"
	else
		qcheck disk_base_untouched "$T/layer.qcow2" && pass disk_base_untouched
	fi
	rm -f "$T/base.raw" "$T/base.qcow2" "$T/layer.qcow2"
}

t_disk_bad_input() {
	truncate -s 1M "$T/plain.raw"
	vmm --kernel "$KERNEL" --disk "$T/missing.qcow2"
	s1=$status
	grep -q "missing.qcow2" "$T/stderr" || s1=x
	vmm --kernel "$KERNEL" --disk "$T/plain.raw"
	s2=$status
	grep -q "format=raw" "$T/stderr" || s2=x
	vmm --kernel "$KERNEL" --disk "$T/plain.raw,bogus"
	s3=$status
	grep -q "bogus" "$T/stderr" || s3=x
	if [ "$s1$s2$s3" = 222 ]; then
		pass disk_bad_input
	else
		fail disk_bad_input "missing file/raw without format=raw/bad option: statuses $s1 $s2 $s3, want 2 2 2 with the problem named"
	fi
	rm -f "$T/plain.raw"
}

# An encrypted layer (its own key) over an encrypted base (another): the VMM gets both keys
# in its key pipe (--key-fd, 'disk HEX PATH'), the guest's writes come back through
# husk-img with the same keys, qemu-img checks the layer with them, and without a key the
# VMM refuses the disk rather than give the guest I/O errors.
t_disk_encrypted() {
	k1=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
	k2=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
	echo "$k1" >"$T/k1"
	echo "$k2" >"$T/k2"
	"$IMG" create -K "$T/k1" "$T/eb.qcow2" 64M >/dev/null &&
		HUSK_IMG_KEYS="$T/eb.qcow2=$T/k1" "$IMG" create -K "$T/k2" -b "$T/eb.qcow2" -F qcow2 "$T/et.qcow2" >/dev/null ||
		{ fail disk_encrypted "husk-img create -K failed"; return; }
	printf 'disk %s %s\ndisk %s %s\n' "$k1" "$T/eb.qcow2" "$k2" "$T/et.qcow2" >"$T/keys"
	disk_boot "head -c 16777216 /dev/urandom > /tmp/d && dd if=/tmp/d of=/dev/vda bs=1M conv=fsync 2>/dev/null && sha256sum /tmp/d" \
		--disk "$T/et.qcow2,serial=husk-test-disk" --key-fd 3 3<"$T/keys"
	want=$(awk 'length($1) == 64 {print $1; exit}' "$T/console")
	HUSK_IMG_KEYS="$T/eb.qcow2=$T/k1 $T/et.qcow2=$T/k2" "$IMG" convert -O raw "$T/et.qcow2" "$T/flat.raw" >/dev/null 2>&1
	got=$(sha_of "$T/flat.raw" 16)
	rm -f "$T/flat.raw"
	if [ "$status" != 0 ] || [ -z "$want" ] || [ "$got" != "$want" ]; then
		fail disk_encrypted "status $status, the guest wrote '$want', the host reads '$got'"
	elif command -v qemu-img >/dev/null && ! qemu-img check -q --object secret,id=s1,data="$k1" \
		--object secret,id=s2,data="$k2" --image-opts \
		"driver=qcow2,file.filename=$T/et.qcow2,encrypt.key-secret=s2,backing.encrypt.key-secret=s1" >"$T/qcheck" 2>&1; then
		fail disk_encrypted "qemu-img check with the keys: $(cat "$T/qcheck")"
	else
		disk_boot "echo BOOTED" --disk "$T/et.qcow2,serial=husk-test-disk"
		if [ "$status" = 0 ] || grep -q BOOTED "$T/console" || ! grep -q "is encrypted and no key" "$T/stderr"; then
			fail disk_encrypted "without keys: status $status, $(tail -n 2 "$T/stderr")"
		else
			pass disk_encrypted
		fi
	fi
	rm -f "$T/eb.qcow2" "$T/et.qcow2" "$T/keys" "$T/k1" "$T/k2"
}
