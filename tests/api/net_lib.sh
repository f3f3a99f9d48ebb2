# Sourced by the network suites (net.sh, net_serve.sh) after lib.sh: the
# stand-in internet - a network namespace "standin" on a veth, 198.51.100.2/24,
# holding a public address (203.0.113.10, .11), a private one (10.99.0.1) and
# a metadata service's (169.254.169.254), each serving a page, IPv6 ones
# (standin_up6), and a DNS server naming the public one web.standin.test
# (web6.standin.test for IPv6) - and the checks' helpers.
# Nothing leaves the machine.
# iproute2's ip (brought in by tests/run.sh): busybox's has no netns or veth.
ip=/usr/sbin/ip
[ -x /sbin/ip ] && /sbin/ip -V 2>/dev/null | grep -q iproute2 && ip=/sbin/ip

standin_up() {
	mkdir -p "$T/www" /run/netns &&
		echo "hello from the stand-in" >"$T/www/index.html" &&
		$ip netns add standin &&
		$ip link add sv0 type veth peer name sv1 netns standin &&
		$ip addr add 198.51.100.1/24 dev sv0 && $ip link set sv0 up &&
		$ip -n standin link set lo up && $ip -n standin link set sv1 up &&
		$ip -n standin addr add 198.51.100.2/24 dev sv1 &&
		for a in 203.0.113.10 203.0.113.11 10.99.0.1 169.254.169.254; do
			$ip -n standin addr add $a/32 dev lo && $ip route add $a/32 via 198.51.100.2 || return 1
		done &&
		$ip -n standin route add default via 198.51.100.1 &&
		standin_up6 &&
		{ $ip netns exec standin busybox httpd -f -p 80 -h "$T/www" & } &&
		standin_httpd=$! &&
		{ busybox httpd -f -p 8081 -h "$T/www" & } &&
		host_httpd=$! &&
		{ $ip netns exec standin dnsmasq --no-daemon --no-resolv --no-hosts --pid-file= \
			--user=root --listen-address=198.51.100.2 --bind-interfaces \
			--address=/web.standin.test/203.0.113.10 --address=/web6.standin.test/2001:db8:113::10 --address=/web6.standin.test/203.0.113.11 & } &&
		standin_dnsd=$!
}

# IPv6 beside it, from the documentation range: the stand-in 2001:db8:51::2 on
# the pair (the host 2001:db8:51::1), public 2001:db8:113::10 and ::11, and a
# private (ULA) fd99::1 behind it. (No duplicate address detection: both
# ends are the test's.)
STANDIN6="2001:db8:113::10 2001:db8:113::11 fd99::1"
standin_up6() {
	$ip addr add 2001:db8:51::1/64 dev sv0 nodad &&
		$ip -n standin addr add 2001:db8:51::2/64 dev sv1 nodad &&
		for a in $STANDIN6; do
			$ip -n standin addr add $a/128 dev lo && $ip -6 route add $a/128 via 2001:db8:51::2 || return 1
		done &&
		$ip -n standin -6 route add default via 2001:db8:51::1
}

# What standin_up made goes again (on a KVM host this runs on the host itself).
standin_down() {
	kill $standin_httpd $host_httpd $standin_dnsd ${standin_more:-} 2>/dev/null
	for a in 203.0.113.10 203.0.113.11 10.99.0.1 169.254.169.254; do $ip route del $a/32 2>/dev/null; done
	for a in $STANDIN6; do $ip -6 route del $a/128 2>/dev/null; done
	$ip link del sv0 2>/dev/null
	$ip netns del standin 2>/dev/null
}
standin_httpd=
host_httpd=
standin_dnsd=
# (the servers first: a bare "wait" in lib.sh's way of ending would wait for them)
trap 'standin_down; kill $pid 2>/dev/null; [ -n "$pid" ] && wait $pid 2>/dev/null; rm -rf "$T"' EXIT

# hv_count: the veth pairs of sandboxes on this host.
hv_count() { $ip -o link show | grep -c ': hv[0-9]*@' || true; }

# hv_gone NAME: waits for every sandbox pair to go (the kernel removes them
# after the namespace's last process), up to a bound; FAIL if one stays.
hv_gone() {
	i=0
	while [ "$(hv_count)" != 0 ] && [ $i -lt 300 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if [ "$(hv_count)" = 0 ]; then pass "$1"; else fail "$1" "a veth pair outlived its sandbox: $($ip -o link show | grep ': hv')"; fi
}

# want NAME WANT...: each line WANT is in $T/o.
want() {
	n=$1
	shift
	for w in "$@"; do
		grep -qx "$w" "$T/o" || { fail "$n" "want the line '$w'"; return; }
	done
	pass "$n"
}
