# Shared by tests/img/oci.sh and tests/api/import.sh: sourced with $T set.
q() { "$@" >>"$T/log" 2>&1; }
# (skopeo keeps blobs in /var/tmp, which a nested host lacks: its calls here say --tmpdir)

# mkimage LAYOUT: base:v1 = busybox and three files; v1 then deletes one
# (a whiteout) and adds /hello and /work; config as the header says.
mkimage() {
	l=$1
	q umoci init --layout "$l" && q umoci new --image "$l:v1" && q umoci unpack --image "$l:v1" "$T/b" || return 1
	r=$T/b/rootfs
	mkdir -p "$r/bin" "$r/etc" "$r/work"
	# (busybox's own sh answers command -v busybox with a bare name: the path is asked of the file system)
	for bb in /bin/busybox /usr/bin/busybox; do [ -x "$bb" ] && break; done
	cp "$bb" "$r/bin/busybox"
	for a in sh cat ls env pwd id echo; do ln -s busybox "$r/bin/$a"; done
	echo base >"$r/etc/gone"
	echo kept >"$r/etc/kept"
	printf 'root:x:0:0::/root:/bin/sh\nbuilder:x:1234:1234::/work:/bin/sh\n' >"$r/etc/passwd"
	printf 'root:x:0:\nbuilder:x:1234:\n' >"$r/etc/group"
	q umoci repack --image "$l:v1" "$T/b" || return 1
	rm "$r/etc/gone"
	echo "hello from layer 2" >"$r/hello"
	q umoci repack --image "$l:v1" "$T/b" || return 1
	rm -rf "$T/b"
	q umoci config --image "$l:v1" --config.env GREETING=hi --config.env PATH=/bin \
		--config.workingdir /work --config.user builder --config.entrypoint /bin/sh \
		--config.cmd -c --config.cmd 'echo entry' --architecture amd64 --os linux
}

