# Network: virtio-net over libslirp. The guest's "internet" is a stand-in
# made here: an address from a documentation range (203.0.113.1) on this
# host's loopback, with an HTTP server; nothing leaves the machine.

STANDIN=203.0.113.1
standin_made=

# A stand-in web server at $STANDIN:8080, and one on 127.0.0.1:8081 that a
# guest must never reach (10.0.2.2 is not the host's loopback).
standin_up() {
	[ -n "$standin_made" ] && return 0
	busybox ip addr add "$STANDIN/32" dev lo 2>/dev/null
	busybox ip link set lo up
	mkdir -p "$T/www"
	echo "hello from the stand-in" >"$T/www/index.html"
	busybox httpd -p "$STANDIN:8080" -h "$T/www" || return 1
	busybox httpd -p 127.0.0.1:8081 -h "$T/www" || return 1
	standin_made=1
}

# net_run LAYER SCRIPT VMM-ARGS...: runs the shell script SCRIPT (text) in a
# guest whose root is LAYER, passed in as a small raw disk (/dev/vdb).
net_run() {
	layer=$1
	printf '%s\n' "$2" >"$T/script.sh"
	shift 2
	n=$(wc -c <"$T/script.sh")
	head -c $((4096 - n % 4096)) /dev/zero | tr '\0' '\n' >>"$T/script.sh"
	vmm --kernel "$KERNEL" --initrd "$INITRD" --vcpus 1 --mem 256M -v --disk "$layer" \
		--disk "$T/script.sh,format=raw,ro" "$@" \
		--cmdline "quiet husk.root=/dev/vda husk.cmd=\"bash /dev/vdb\""
}

# What the guests run: address, resolver, a fetch from the stand-in, and
# the two places a guest must not reach.
NET_PROBE='
echo "addr: $(awk '\''$1 == "eth0" && $2 == "00000000" {print "default-route"}'\'' /proc/net/route)"
grep -h "^nameserver" /etc/resolv.conf | sed "s/^/resolver: /"
ls /sys/class/net | tr "\n" " " | sed "s/^/ifaces: /"; echo
if exec 3<>/dev/tcp/203.0.113.1/8080; then
	printf "GET /index.html HTTP/1.0\r\nHost: standin\r\n\r\n" >&3
	sed -n "s/^hello/fetched: hello/p" <&3
	exec 3<&-
fi
for hp in 10.0.2.2/8081 127.0.0.1/8081; do
	if (exec 4<>/dev/tcp/$hp) 2>"/tmp/err"; then echo "reached: $hp"; else echo "refused: $hp: $(sed "s/.*: //" /tmp/err)"; fi
done
'

t_net_fetch_from_the_standin() {
	if ! standin_up; then
		fail net_fetch_from_the_standin "cannot start the stand-in web server"
		return
	fi
	rt_layer base:latest "$T/net.qcow2"
	net_run "$T/net.qcow2" "$NET_PROBE" --net slirp
	if [ "$status" != 0 ]; then
		fail net_fetch_from_the_standin "husk-vmm exited with $status"
	elif ! console_has '^addr: default-route$'; then
		fail net_fetch_from_the_standin "the guest has no default route (DHCP did not configure eth0)"
	elif ! console_has '^resolver: nameserver 10.0.2.3$'; then
		fail net_fetch_from_the_standin "resolv.conf does not name slirp's resolver 10.0.2.3"
	elif ! console_has '^fetched: hello from the stand-in'; then
		fail net_fetch_from_the_standin "the guest could not fetch a page from $STANDIN:8080"
	elif console_has '^reached: '; then
		fail net_fetch_from_the_standin "the guest reached the host's loopback through 10.0.2.2"
	elif ! console_has '^refused: 127.0.0.1/8081: Connection refused'; then
		fail net_fetch_from_the_standin "the guest's own loopback is not up"
	else
		pass net_fetch_from_the_standin
	fi
	rm -f "$T/net.qcow2"
}

t_net_none_without_a_nic() {
	rt_layer base:latest "$T/net.qcow2"
	net_run "$T/net.qcow2" "$NET_PROBE"
	if [ "$status" != 0 ]; then
		fail net_none_without_a_nic "husk-vmm exited with $status"
	elif ! console_has '^ifaces: lo $'; then
		fail net_none_without_a_nic "a guest without --net has interfaces other than lo"
	elif console_has '^fetched: ' || console_has '^reached: '; then
		fail net_none_without_a_nic "a guest without --net reached something"
	elif ! console_has '^refused: 127.0.0.1/8081: Connection refused'; then
		fail net_none_without_a_nic "the guest's own loopback is not up"
	else
		pass net_none_without_a_nic
	fi
	rm -f "$T/net.qcow2"
}
