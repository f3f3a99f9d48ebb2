#!/bin/sh
# Sandbox networking end to end on real KVM, in the nested host: huskd (ASan)
# and the husk CLI against a stand-in internet this script builds itself - a
# network namespace "standin" on a veth, 198.51.100.2/24, holding a public
# address (203.0.113.10), a private one (10.99.0.1) and a metadata service's
# (169.254.169.254), each serving a page, and a DNS server naming the public
# one web.standin.test (dnsmasq; huskd forwards the sandboxes' DNS to it). Nothing
# leaves the machine.
# Prints PASS/FAIL net/NAME lines.
set -u
port=8791
suite=net
. "$(dirname "$0")/lib.sh"
rc=0
. "$(dirname "$0")/net_lib.sh"

# What a guest runs: one connection to each of "$@" (ADDR:PORT or
# [IPv6]:PORT), each said open, refused (a reset), or unreachable (ICMP) - a
# refusal is at once, a hang would end in "timeout". PROBE first fetches a
# page from the public stand-in.
PROBE_EACH='
for t in "$@"; do
	h=${t%:*}; h=${h#[}; h=${h%]}; p=${t##*:}
	s=$(date +%s%N)
	if timeout 10 bash -c "exec 4<>/dev/tcp/$h/$p" 2>/tmp/err; then r=open
	elif [ $? = 124 ]; then r=timeout
	elif grep -q refused /tmp/err; then r=refused
	else r="unreachable ($(sed "s/.*: //" /tmp/err | head -n 1))"; fi
	echo "probe $t: $r, $((($(date +%s%N) - s) / 1000000)) ms"
done
'
PROBE='
echo "resolved: $(getent hosts web.standin.test | awk "{print \$1}")"
exec 3<>/dev/tcp/web.standin.test/80 && printf "GET /index.html HTTP/1.0\r\n\r\n" >&3 && sed -n "s/^hello/fetched: hello/p" <&3
'"$PROBE_EACH"

# IPv6: the guest waits (bounded) for its address from the router
# advertisement to pass duplicate detection, resolves web6.standin.test's
# AAAA through huskd, then probes each [address]:port as PROBE does.
PROBE6='
i=0
while ! awk "\$1 ~ /^fd6875736b01/ && \$5 !~ /^[4567cdef]/ { f = 1 } END { exit !f }" /proc/net/if_inet6 && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
echo "resolved6: $(getent ahostsv6 web6.standin.test | awk "/^2001/ {print \$1; exit}")"
'"$PROBE_EACH"

if ! standin_up >"$T/e" 2>&1; then
	echo "FAIL net/standin: cannot build the stand-in internet: $(cat "$T/e")"
	exit 1
fi
# The nested host's disk is its memory: huskd's reserve stays small here.
HUSKD_ARGS="--dns-upstream 198.51.100.2 --min-free-disk 64Mi"
if ! start_huskd 1; then
	echo "FAIL net/huskd_start: huskd did not start; its log:"
	tail -n 20 "$T/huskd.log"
	exit 1
fi

# Another sandbox, with a server in its namespace: the first must not reach it.
h create --json --runtime base:latest --network --idle-timeout 20m
other=$(sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1)
# Up first (an exec waits for its agent): its VMM is past its exec, its command line final.
h exec "$other" -- true
other_pid=$(vmm_pid "$other")
other_addr=
other_addr6=
other_httpd=
if [ -n "$other_pid" ]; then
	nsenter -t "$other_pid" -n busybox httpd -f -p 8082 -h "$T/www" &
	other_httpd=$!
	other_addr=$(nsenter -t "$other_pid" -n $ip -4 -o addr show eth0 | sed -n 's/.*inet \([0-9.]*\).*/\1/p')
	other_addr6=$(nsenter -t "$other_pid" -n $ip -6 -o addr show eth0 scope global | sed -n 's/.*inet6 \([0-9a-f:]*\).*/\1/p')
fi
if [ -n "$other_addr" ]; then
	pass other_sandbox
else
	fail other_sandbox "no networked sandbox to aim at (create said: $(head -c 300 "$T/o"))"
	other_addr=10.233.255.254
fi

h create --json --runtime base:latest --network --idle-timeout 20m
id=$(sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1)
h get --json "$id"
if grep -q '"networkEnabled": *true' "$T/o"; then pass network_enabled; else fail network_enabled "get did not say networkEnabled: true"; fi
h exec "$id" -- bash -c "$PROBE" probe 10.99.0.1:80 169.254.169.254:80 198.51.100.1:8081 10.0.2.2:8081 "$other_addr:8082" 203.0.113.10:80
cp "$T/o" "$T/probe"
if grep -q '^resolved: 203.0.113.10$' "$T/probe"; then pass dns_through_huskd; else fail dns_through_huskd "web.standin.test did not resolve to 203.0.113.10 through huskd's forwarder"; fi
if grep -q '^fetched: hello from the stand-in' "$T/probe"; then pass fetch_public_by_name; else fail fetch_public_by_name "the guest could not fetch http://web.standin.test/"; fi
if grep -q '^probe 203.0.113.10:80: open' "$T/probe"; then pass reach_public; else fail reach_public "the public stand-in was not reachable"; fi
for t in 10.99.0.1:80:private_range 169.254.169.254:80:metadata_service 198.51.100.1:8081:host_address \
	10.0.2.2:8081:host_loopback "$other_addr:8082:other_sandbox"; do
	name=${t##*:}
	addr=${t%:*}
	line=$(grep "^probe $addr:" "$T/probe")
	case "$line" in
	*": refused,"* | *": unreachable"*) pass "blocked_$name" ;;
	*) fail "blocked_$name" "want refused or unreachable at once, got: ${line:-nothing}" ;;
	esac
done
sed -n 's/^probe /  (measured) /p' "$T/probe"

# IPv6 the same way: the public stand-in by name and address; its private
# (ULA) address, the host's own and the other sandbox's are refused at once.
h exec "$id" -- bash -c "$PROBE6" probe6 "[2001:db8:113::10]:80" "[fd99::1]:80" "[2001:db8:51::1]:8081" \
	"[${other_addr6:-fd68:7573:6b00::ffff:2}]:8082"
cp "$T/o" "$T/probe6"
if grep -q '^resolved6: 2001:db8:113::10$' "$T/probe6" && grep -q '^probe \[2001:db8:113::10\]:80: open' "$T/probe6"; then
	pass reach_public_ipv6
else
	fail reach_public_ipv6 "want web6.standin.test's AAAA through huskd and [2001:db8:113::10]:80 open; got: $(head -c 400 "$T/probe6")"
fi
for t in "fd99::1]:80:private_ipv6" "2001:db8:51::1]:8081:host_address_ipv6" "${other_addr6:-fd68:7573:6b00::ffff:2}]:8082:other_sandbox_ipv6"; do
	name=${t##*:}
	addr="[${t%:*}"
	line=$(grep -F "probe $addr:" "$T/probe6")
	case "$line" in
	*": refused,"* | *": unreachable"*) pass "blocked_$name" ;;
	*) fail "blocked_$name" "want refused or unreachable at once, got: ${line:-nothing}" ;;
	esac
done
if [ -n "$other_addr6" ]; then pass other_sandbox_ipv6_address; else fail other_sandbox_ipv6_address "the other sandbox's namespace had no IPv6 address"; fi
sed -n 's/^probe /  (measured) /p' "$T/probe6"

# A guest's MAC and IPv4 address, as its kernel has them (the base runtime has no ip tool).
IDENT='echo "mac $(cat /sys/class/net/eth0/address)"; echo "addr $(awk "/32 host LOCAL/{print a} {a=\$2}" /proc/net/fib_trie | grep -v "^127\." | sort -u | tr "\n" " ")"'
h exec "$id" -- sh -c "$IDENT"
cp "$T/o" "$T/ident_before"

# Paused to disk and resumed in a new VMM (a new jail, a new stack): the
# guest keeps its address and reaches the stand-in again by name.
h pause "$id"
h exec "$id" -- bash -c "$PROBE" probe 10.99.0.1:80
if grep -q '^fetched: hello from the stand-in' "$T/o" && grep -q '^probe 10.99.0.1:80: refused' "$T/o"; then
	pass after_pause_resume
else
	fail after_pause_resume "after a pause and resume the guest could not fetch by name, or reached a private address"
fi
# Its own MAC (locally administered) and an address of 10.0.2.16-239, the same after the resume.
h exec "$id" -- sh -c "$IDENT"
if grep -Eq '^mac 02:' "$T/ident_before" && grep -Eq '^addr 10\.0\.2\.(1[6-9]|[2-9][0-9]|1[0-9][0-9]|2[0-3][0-9]) $' "$T/ident_before" &&
	cmp -s "$T/o" "$T/ident_before"; then
	pass keeps_mac_and_address_after_resume
else
	fail keeps_mac_and_address_after_resume "before: $(tr '\n' ' ' <"$T/ident_before"); after: $(tr '\n' ' ' <"$T/o")"
fi

# A template with a NIC: the first networked create had one made (its maker had a NIC and no
# way out); a networked create restores it, and its guest reaches out as a booted one does.
i=0
while ! grep -q "template of base:latest ([0-9]* MiB, 1 vCPUs, NIC) ready" "$T/huskd.log" && [ $i -lt 3000 ]; do
	sleep 0.2 # a hang guard for the log line, not a wait for a time
	i=$((i + 1))
done
h create --json --runtime base:latest --network --idle-timeout 20m
tid=$(sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1)
h exec "$tid" -- bash -c "$PROBE" probe 10.99.0.1:80
if grep -q "\[$tid\] created: .*restored from its runtime's template" "$T/huskd.log" &&
	grep -q '^fetched: hello from the stand-in' "$T/o" && grep -q '^probe 10.99.0.1:80: refused' "$T/o"; then
	pass nic_template_child_reaches_out
else
	fail nic_template_child_reaches_out "$(grep -i "template" "$T/huskd.log" | tail -n 3); $(head -c 300 "$T/o")"
fi
# Two children of the one template: each its own MAC and address (the agent
# reset the link and took them when the guest resumed), and both reach out.
h exec "$tid" -- sh -c "$IDENT"
cp "$T/o" "$T/ident_a"
h create --json --runtime base:latest --network --idle-timeout 20m
tid2=$(sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1)
h exec "$tid2" -- bash -c "$IDENT; $PROBE"
a_mac=$(sed -n 's/^mac //p' "$T/ident_a")
a_addr=$(sed -n 's/^addr //p' "$T/ident_a")
b_mac=$(sed -n 's/^mac //p' "$T/o")
b_addr=$(sed -n 's/^addr //p' "$T/o")
if [ -n "$a_mac" ] && [ -n "$b_mac" ] && [ "$a_mac" != "$b_mac" ] && [ -n "$a_addr" ] && [ -n "$b_addr" ] &&
	[ "$a_addr" != "$b_addr" ] && grep -q '^fetched: hello from the stand-in' "$T/o" &&
	grep -q "\[$tid2\] created: .*restored from its runtime's template" "$T/huskd.log"; then
	pass template_children_own_mac_and_address
	echo "  (measured) children: $a_mac $a_addr / $b_mac $b_addr"
else
	fail template_children_own_mac_and_address "first: $a_mac $a_addr; second: $b_mac $b_addr; $(head -c 300 "$T/o")"
fi
h destroy "$tid2"
h destroy "$tid"

# Lists. LISTS probes before and after asking DNS for web.standin.test.
LISTS='
p() { if timeout 10 bash -c "exec 4<>/dev/tcp/${1%:*}/${1#*:}" 2>/dev/null; then echo "$2 $1: open"; else echo "$2 $1: closed"; fi; }
p 203.0.113.10:80 before; p 203.0.113.11:80 before
if getent hosts web.standin.test >/dev/null; then echo "name: resolved"; else echo "name: refused"; fi
p 203.0.113.10:80 after; p 203.0.113.11:80 after
'
h create --json --runtime base:latest --allow-host web.standin.test --idle-timeout 20m
lid=$(sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1)
h exec "$lid" -- bash -c "$LISTS"
want allow_list_opens_by_name_only "before 203.0.113.10:80: closed" "before 203.0.113.11:80: closed" \
	"name: resolved" "after 203.0.113.10:80: open" "after 203.0.113.11:80: closed"
h destroy "$lid"
h create --json --runtime base:latest --deny-host web.standin.test --deny-host 203.0.113.11 --idle-timeout 20m
lid=$(sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1)
h exec "$lid" -- bash -c "$LISTS"
want deny_list_refuses_name_and_address "before 203.0.113.10:80: open" "before 203.0.113.11:80: closed" \
	"name: refused" "after 203.0.113.11:80: closed"
h destroy "$lid"
# The lists hold IPv6 too: an allowed name's AAAA opens its address alone; a denied CIDR refuses.
h create --json --runtime base:latest --allow-host web6.standin.test --allow-host 2001:db8:113::11/128 --idle-timeout 20m
lid=$(sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1)
h exec "$lid" -- bash -c "$PROBE6" probe6 "[2001:db8:113::10]:80" "[2001:db8:113::11]:80" "[fd99::1]:80"
if grep -q '^probe \[2001:db8:113::10\]:80: open' "$T/o" && grep -q '^probe \[2001:db8:113::11\]:80: open' "$T/o" &&
	grep -Eq '^probe \[fd99::1\]:80: (refused|unreachable)' "$T/o"; then
	pass allow_list_ipv6
else
	fail allow_list_ipv6 "want ::10 (by name) and ::11 (by CIDR) open and fd99::1 refused; got: $(head -c 400 "$T/o")"
fi
h destroy "$lid"
h create --json --runtime base:latest --network --deny-host 2001:db8:113::/112 --idle-timeout 20m
lid=$(sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1)
h exec "$lid" -- bash -c "$PROBE6" probe6 "[2001:db8:113::10]:80"
if grep -Eq '^probe \[2001:db8:113::10\]:80: (refused|unreachable)' "$T/o"; then
	pass deny_list_ipv6_cidr
else
	fail deny_list_ipv6_cidr "want [2001:db8:113::10]:80 refused; got: $(head -c 400 "$T/o")"
fi
h destroy "$lid"
h create --json --runtime base:latest --network --deny-host 'bad host!' --idle-timeout 20m
if [ "$cli_s" != 0 ] && grep -q "network.deny\[0\]" "$T/e"; then pass list_bad_entry_refused; else fail list_bad_entry_refused "want a refusal naming network.deny[0]"; fi

# What DNS answers taught a sandbox's allow list outlives a huskd restart (until they expire).
h create --json --runtime base:latest --allow-host web.standin.test --idle-timeout 20m
rid=$(sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1)
h exec "$rid" -- bash -c "$LISTS"
stop_huskd net/huskd_clean_exit_before_restart || rc=1
start_huskd 2 || fail restart "huskd did not start again"
h exec "$rid" -- bash -c 'if timeout 10 bash -c "exec 4<>/dev/tcp/203.0.113.10/80" 2>/dev/null; then echo "learned: open"; else echo "learned: closed"; fi'
if grep -qx 'learned: open' "$T/o"; then pass learned_address_kept_across_restart; else fail learned_address_kept_across_restart "203.0.113.10 (web.standin.test, resolved before the restart) is closed after it"; fi
h destroy "$rid"

# Destroyed, and killed: the pairs go with the VMMs.
h destroy "$id"
# (the server put in the other's namespace would keep it alive: it goes first)
[ -n "$other_httpd" ] && kill "$other_httpd"
[ -n "$other_pid" ] && kill -9 "$other_pid"
hv_gone pairs_gone_after_destroy_and_kill

# Without network: no NIC at all.
h create --json --runtime base:latest --idle-timeout 20m
id=$(sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1)
h exec "$id" -- sh -c 'ls /sys/class/net | tr "\n" " "'
if grep -qx 'lo ' "$T/o"; then pass no_network_no_nic; else fail no_network_no_nic "want only lo"; fi
h destroy "$id"

[ $rc = 0 ] || { echo "--- huskd's log"; tail -n 30 "$T/huskd.log"; }
stop_huskd net/huskd_clean_exit || rc=1
exit $rc
