#!/bin/sh
# A sandbox's exposed port, egress accounting and limits, and lists changed
# at run time, end to end on real KVM in the nested host: huskd (ASan), the
# husk CLI and tests/api/net_client.mjs against the stand-in internet of
# net_lib.sh. Nothing leaves the machine. Prints PASS/FAIL net/NAME lines.
set -u
port=8792
suite=net
. "$(dirname "$0")/lib.sh"
rc=0
. "$(dirname "$0")/net_lib.sh"
# (bounded: a client left waiting would stall the suite until the harness's idle limit)
nc() { HUSK_PORT=$port HUSK_API_KEY=$key timeout 120 node "$top/tests/api/net_client.mjs" "$@" >"$T/o" 2>"$T/e"; }
sid() { sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1; }

# The guest's server: a page naming the request, and a WebSocket echo.
SRV='
const http = require("http"), crypto = require("crypto"), fs = require("fs");
const s = http.createServer((q, r) => r.end(`served ${q.method} ${q.url} for ${q.headers["x-forwarded-host"]}\n`));
s.on("upgrade", (q, sock, head) => {
	const k = crypto.createHash("sha1").update(q.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
	sock.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + k + "\r\n\r\n");
	let buf = Buffer.alloc(0);
	const take = (d) => {
		buf = Buffer.concat([buf, d]);
		while (buf.length >= 6 && buf.length >= 6 + (buf[1] & 127)) {
			const n = buf[1] & 127, m = buf.subarray(2, 6);
			const p = Buffer.from(buf.subarray(6, 6 + n)).map((x, i) => x ^ m[i % 4]);
			buf = buf.subarray(6 + n);
			const out = Buffer.from("echo: " + p.toString());
			sock.write(Buffer.concat([Buffer.from([0x81, out.length]), out]));
		}
	};
	take(head); /* what came with the request: the client sent its first frame at once */
	sock.on("data", take);
});
const port = Number(process.argv[2] || 8080);
s.listen(port, "0.0.0.0", () => fs.writeFileSync(`/tmp/listening-${port}`, "yes"));
'
# serve ID [PORT]: the server started as a job (on 8080 unless PORT), waited for until it listens.
serve() {
	h exec "$1" -- sh -c 'printf %s "$1" >/tmp/srv.js' sh "$SRV"
	h job create "$1" -- node /tmp/srv.js "${2:-8080}"
	h exec "$1" -- sh -c 'i=0; while [ ! -e "$1" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done; cat "$1"' sh "/tmp/listening-${2:-8080}"
}
# What a guest runs to see where it can connect: "ADDR:PORT open|closed" for each.
PROBE='for (const t of process.argv.slice(1)) {
	const [h, p] = t.split(":");
	const s = require("net").connect(Number(p), h);
	const say = (r) => { console.log(`${t} ${r}`); s.destroy(); };
	s.setTimeout(10000, () => say("timeout"));
	s.on("connect", () => say("open"));
	s.on("error", () => say("closed"));
}'
probe() { h exec "$@"; }

if ! standin_up >"$T/e" 2>&1; then
	echo "FAIL net/standin: cannot build the stand-in internet: $(cat "$T/e")"
	exit 1
fi
# A small apt repository on the stand-in, holding one package of the test's making
# (dpkg-deb by path: busybox's shell here prefers its own, smaller applet).
deb_repo() {
	d=$T/www/debian
	mkdir -p "$T/pkg/DEBIAN" "$T/pkg/usr/bin" "$d" &&
		printf 'Package: husk-test-dep\nVersion: 1.0\nArchitecture: all\nMaintainer: husk <husk@localhost>\nDescription: husk test package\n' >"$T/pkg/DEBIAN/control" &&
		printf '#!/bin/sh\necho husk test dep works\n' >"$T/pkg/usr/bin/husk-test-dep" &&
		chmod 755 "$T/pkg/usr/bin/husk-test-dep" &&
		/usr/bin/dpkg-deb -Zgzip --build "$T/pkg" "$d/husk-test-dep_1.0_all.deb" >/dev/null &&
		{
			cat "$T/pkg/DEBIAN/control"
			echo "Filename: ./husk-test-dep_1.0_all.deb"
			echo "Size: $(stat -c %s "$d/husk-test-dep_1.0_all.deb")"
			echo "SHA256: $(sha256sum "$d/husk-test-dep_1.0_all.deb" | cut -d' ' -f1)"
			echo
		} >"$d/Packages"
}
if ! deb_repo >"$T/e" 2>&1; then
	echo "FAIL net/deb_repo: cannot build the test's apt repository: $(cat "$T/e")"
	exit 1
fi
# (its output away from ours: a server left holding it would keep the suite open)
$ip netns exec standin node "$top/tests/api/net_client.mjs" sink 9000 203.0.113.10 "$T/sink" >/dev/null 2>&1 &
standin_more=$!
# The nested host's disk is its memory: huskd's reserve stays small here.
HUSKD_ARGS="--dns-upstream 198.51.100.2 --public-domain sandboxes.test --egress-deny 203.0.113.11 --min-free-disk 64Mi"
HUSKD_APT_SOURCE='deb [trusted=yes] http://web.standin.test/debian ./'
if ! start_huskd 1; then
	echo "FAIL net/huskd_start: huskd did not start; its log:"
	tail -n 20 "$T/huskd.log"
	exit 1
fi

# Exposed port, by name and by path, HTTP and WebSocket; paused, then woken by a request.
if section serve_port; then
	h create --json --runtime node:lts --port 8080 --idle-timeout 20m
	id=$(sid)
	url=$(sed -n 's/.*"url": *"\([^"]*\)".*/\1/p' "$T/o")
	host=sbx-${id#sbx_}-8080.sandboxes.test
	if [ "$url" = "http://$host/" ]; then pass url_in_create; else fail url_in_create "want url http://$host/, got '$url'"; fi
	h get --json "$id"
	if grep -q "\"url\": *\"http://$host/\"" "$T/o" && grep -q '"networkPort": *8080' "$T/o"; then pass url_in_get; else fail url_in_get "get did not give the url and networkPort"; fi
	nc get "http://127.0.0.1:$port/p/$id/"
	if grep -q '^status 502' "$T/o" && grep -q 'SANDBOX_UNREACHABLE.*port 8080' "$T/o"; then pass nothing_listening_502; else fail nothing_listening_502 "want a 502 naming port 8080 before the server runs"; fi
	serve "$id"
	nc get "http://127.0.0.1:$port/hello?x=1" "$host"
	if grep -q "^served GET /hello?x=1 for $host\$" "$T/o"; then pass serve_by_name; else fail serve_by_name "the guest's page did not come through by host name"; fi
	nc get "http://127.0.0.1:$port/p/$id/sub/page?y=2"
	if grep -q "^served GET /sub/page?y=2 for 127.0.0.1:$port\$" "$T/o"; then pass serve_by_path; else fail serve_by_path "the guest's page did not come through by path"; fi
	nc ws "http://127.0.0.1:$port/p/$id/ws"
	if grep -q '^HTTP/1.1 101' "$T/o" && grep -q '^ws: echo: ping$' "$T/o"; then pass websocket_echo; else fail websocket_echo "want a 101 and the echo of ping"; fi
	h pause "$id"
	nc get "http://127.0.0.1:$port/p/$id/again"
	if grep -q "^served GET /again" "$T/o"; then pass paused_woken_by_url; else fail paused_woken_by_url "a request to a paused sandbox's url did not resume it"; fi
	nc get "http://127.0.0.1:$port/p/sbx_doesnotexist/"
	if grep -q '^status 404' "$T/o"; then pass unknown_sandbox_404; else fail unknown_sandbox_404 "want 404"; fi
	h destroy "$id"
fi

# A port alone: served, but the guest reaches nothing outside.
if section port_only; then
	nc api POST /sandbox '{"runtime":"node:lts","network":{"port":8080},"timeout":{"idle":"20m"}}'
	pid_=$(sid)
	serve "$pid_"
	nc get "http://127.0.0.1:$port/p/$pid_/"
	served=$(grep -c '^served GET /' "$T/o")
	probe "$pid_" -- node -e "$PROBE" 203.0.113.10:80
	if [ "$served" = 1 ] && grep -qx '203.0.113.10:80 closed' "$T/o"; then pass port_only_no_egress; else fail port_only_no_egress "want the page served and 203.0.113.10:80 closed"; fi
	h destroy "$pid_"
fi

# A url with its token (network.urlToken): refused without it, served with it as a
# header or as ?husk_token= (which the guest's server never sees); get gives it again.
if section url_token; then
	nc api POST /sandbox '{"runtime":"node:lts","network":{"port":8080,"urlToken":true},"timeout":{"idle":"20m"}}'
	tid=$(sid)
	tok=$(sed -n 's/.*"urlToken": *"\([0-9a-f]*\)".*/\1/p' "$T/o")
	serve "$tid"
	nc get "http://127.0.0.1:$port/p/$tid/t?a=1"
	grep -q '^status 401' "$T/o" && grep -q URL_TOKEN_REQUIRED "$T/o" && t1=ok || t1="without it: $(head -c 200 "$T/o")"
	nc get "http://127.0.0.1:$port/p/$tid/t?a=1&husk_token=$tok"
	grep -q "^served GET /t?a=1 for" "$T/o" && t2=ok || t2="by query: $(head -c 200 "$T/o")"
	nc get "http://127.0.0.1:$port/p/$tid/h" "" "$tok"
	grep -q "^served GET /h for" "$T/o" && t3=ok || t3="by header: $(head -c 200 "$T/o")"
	nc get "http://127.0.0.1:$port/p/$tid/t?husk_token=0123456789abcdef0123456789abcdef"
	grep -q '^status 401' "$T/o" && t4=ok || t4="a wrong one: $(head -c 200 "$T/o")"
	h get --json "$tid"
	grep -q "\"urlToken\": *\"$tok\"" "$T/o" && t5=ok || t5="get has no urlToken"
	if [ ${#tok} = 32 ] && [ "$t1$t2$t3$t4$t5" = okokokokok ]; then
		pass url_token
	else
		fail url_token "token '$tok': $t1 / $t2 / $t3 / $t4 / $t5"
	fi
	h destroy "$tid"
fi

# Every port (network.allPorts, what E2B's getHost(port) rests on): two servers in one
# sandbox, each by E2B's host form, husk's, and the path with a port; a port nothing
# serves is a 502 naming it; a request must name a port; after a pause and a request
# (a new VMM) a port is served again.
if section all_ports; then
	nc api POST /sandbox '{"runtime":"node:lts","network":{"allPorts":true},"timeout":{"idle":"20m"}}'
	aid=$(sid)
	purl=$(sed -n 's/.*"portUrl": *"\([^"]*\)".*/\1/p' "$T/o")
	if [ "$purl" = "http://sbx-${aid#sbx_}-{port}.sandboxes.test/" ]; then pass port_url_in_create; else fail port_url_in_create "want portUrl http://sbx-${aid#sbx_}-{port}.sandboxes.test/, got '$purl'"; fi
	serve "$aid" 8080
	serve "$aid" 9090
	nc get "http://127.0.0.1:$port/a" "8080-$aid.sandboxes.test"
	grep -q "^served GET /a for 8080-$aid.sandboxes.test\$" "$T/o" && a1=ok || a1="e2b host 8080: $(head -c 200 "$T/o")"
	nc get "http://127.0.0.1:$port/b" "sbx-${aid#sbx_}-9090.sandboxes.test"
	grep -q "^served GET /b for sbx-" "$T/o" && a2=ok || a2="husk host 9090: $(head -c 200 "$T/o")"
	nc get "http://127.0.0.1:$port/p/$aid:9090/c?z=1"
	grep -q "^served GET /c?z=1 for" "$T/o" && a3=ok || a3="path 9090: $(head -c 200 "$T/o")"
	if [ "$a1$a2$a3" = okokok ]; then pass all_ports_served; else fail all_ports_served "$a1 / $a2 / $a3"; fi
	nc get "http://127.0.0.1:$port/p/$aid:7070/"
	if grep -q '^status 502' "$T/o" && grep -q 'port 7070' "$T/o"; then pass all_ports_nothing_listening_502; else fail all_ports_nothing_listening_502 "want a 502 naming port 7070: $(head -c 200 "$T/o")"; fi
	nc get "http://127.0.0.1:$port/p/$aid/"
	if grep -q '^status 400' "$T/o" && grep -q "name one (/p/$aid:PORT/" "$T/o"; then pass all_ports_port_needed; else fail all_ports_port_needed "want a 400 asking for a port: $(head -c 200 "$T/o")"; fi
	h pause "$aid"
	nc get "http://127.0.0.1:$port/p/$aid:9090/again"
	if grep -q "^served GET /again" "$T/o"; then pass all_ports_after_resume; else fail all_ports_after_resume "port 9090 not served after a pause: $(head -c 200 "$T/o")"; fi
	h destroy "$aid"
fi

# The same through E2B's SDK: sandbox.getHost(port), and its traffic token.
if section e2b_host; then
	E2B_TEMPLATE=node:lts client e2b_host.mjs || rc=1
fi

# Egress counted and held to its rate; huskd's deny list; lists changed at run time.
if section egress_and_lists; then
	h create --json --runtime node:lts --egress-rate 200000 --idle-timeout 20m
	nid=$(sid)
	h exec "$nid" -- node -e 'const s = require("net").connect(9000, "203.0.113.10", () => s.end(Buffer.alloc(2000000)))'
	i=0
	while [ ! -s "$T/sink" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
	read -r _ bytes _ ms <"$T/sink" || bytes=0
	h get --json "$nid"
	egress=$(sed -n 's/.*"networkEgressBytes": *\([0-9]*\).*/\1/p' "$T/o")
	if [ "${egress:-0}" -ge 2000000 ] && [ "${egress:-0}" -le 2400000 ]; then pass egress_counted; else fail egress_counted "want networkEgressBytes from 2000000 to 2400000 after sending 2000000, got '${egress:-none}'"; fi
	# A list says the same (every counter read in one query for the whole list).
	h list --json
	listed=$(node -e 'const j = JSON.parse(require("fs").readFileSync(0, "utf8")); const a = Array.isArray(j) ? j : j.sandboxes; const s = a.find((x) => x.sandboxId === process.argv[1]); console.log(s ? s.networkEgressBytes : "none")' "$nid" <"$T/o")
	if [ "${listed:-0}" -ge "${egress:-1}" ] && [ "${listed:-0}" -le 2400000 ]; then pass egress_in_list; else fail egress_in_list "list said '$listed', get said '${egress:-none}'"; fi
	echo "  (measured) sink got ${bytes:-?} bytes in ${ms:-?} ms at a limit of 200000 B/s; egress counted ${egress:-?}"
	if [ "${bytes:-0}" = 2000000 ] && [ "${ms:-0}" -gt 0 ] && [ $((bytes * 1000 / ms)) -le 240000 ]; then pass egress_rate_held; else fail egress_rate_held "want 2000000 bytes at no more than 240000 B/s"; fi
	probe "$nid" -- node -e "$PROBE" 203.0.113.10:80 203.0.113.11:80
	want huskd_deny_list "203.0.113.10:80 open" "203.0.113.11:80 closed"
	nc api PUT "/sandbox/$nid/network" '{"deny":["203.0.113.10"]}'
	probe "$nid" -- node -e "$PROBE" 203.0.113.10:80
	want list_changed_at_run_time "203.0.113.10:80 closed"
	nc api PUT "/sandbox/$nid/network" '{}'
	probe "$nid" -- node -e "$PROBE" 203.0.113.10:80 203.0.113.11:80
	want list_cleared_keeps_huskd_list "203.0.113.10:80 open" "203.0.113.11:80 closed"
	nc api PUT "/sandbox/$nid/network" '{"deny":["not a host!"]}'
	if grep -q '"success": *false' "$T/o" && grep -q 'network.deny\[0\]' "$T/o"; then pass list_change_bad_entry; else fail list_change_bad_entry "want a refusal naming network.deny[0]"; fi
	h destroy "$nid"
	h get --json "$nid"
	after=$(sed -n 's/.*"networkEgressBytes": *\([0-9]*\).*/\1/p' "$T/o")
	if [ "${after:-0}" -ge "${egress:-1}" ]; then pass egress_kept_after_destroy; else fail egress_kept_after_destroy "want networkEgressBytes of at least $egress recorded, got '${after:-none}'"; fi
fi

# A connection open across a pause ends cleanly in the guest (its new stack
# does not know it: a reset, not a hang): the guest's program says how its
# first write after the resume went.
if section connection_across_pause; then
	HOLD='
	const fs = require("fs"), s = require("net").connect(9000, "203.0.113.10", () => fs.writeFileSync("/tmp/held", "yes"));
	const say = (r) => { if (!fs.existsSync("/tmp/result")) fs.writeFileSync("/tmp/result", r); };
	s.on("error", (e) => say("error " + e.code));
	s.on("close", () => say("closed"));
	const t = setInterval(() => {
		if (!fs.existsSync("/tmp/go")) return;
		clearInterval(t);
		s.write(Buffer.alloc(1 << 20));
	}, 100);
	'
	h create --json --runtime node:lts --network --idle-timeout 20m
	cid=$(sid)
	h exec "$cid" -- sh -c 'printf %s "$1" >/tmp/hold.js' sh "$HOLD"
	h job create "$cid" -- node /tmp/hold.js
	h exec "$cid" -- sh -c 'i=0; while [ ! -e /tmp/held ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done; cat /tmp/held'
	held=$(cat "$T/o")
	h pause "$cid"
	# The resume's setup ends the old stack's connections (the agent aborts
	# them): the program learns it without writing. Its setup is done before the
	# exec runs, so the result is there or on its way (bounded wait: a hang guard).
	h exec "$cid" -- sh -c 'i=0; while [ ! -e /tmp/result ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done; cat /tmp/result 2>/dev/null || echo "no result before a write"'
	unasked=$(cat "$T/o")
	h exec "$cid" -- sh -c 'touch /tmp/go; i=0; while [ ! -e /tmp/result ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done; cat /tmp/result 2>/dev/null || echo "no result in 120 s"'
	case "$held $(cat "$T/o")" in
	yes*error* | yes*closed*) pass connection_ends_after_pause; echo "  (measured) after the resume: $(cat "$T/o")" ;;
	*) fail connection_ends_after_pause "want the held connection to fail at its first write after the resume" ;;
	esac
	case "$unasked" in
	"error ECONNABORTED") pass connection_aborted_at_resume ;;
	*) fail connection_aborted_at_resume "want the held connection aborted by the resume itself (error ECONNABORTED), got: $unasked" ;;
	esac
	h destroy "$cid"
fi

# dependencies at create: installed by apt from the stand-in before the sandbox is idle.
if section dependencies; then
	h create --json --runtime base:latest --network --dependency husk-test-dep --idle-timeout 20m
	did=$(sid)
	h exec "$did" -- husk-test-dep
	if grep -qx 'husk test dep works' "$T/o"; then pass dependencies_installed; else fail dependencies_installed "the package from the stand-in's repository did not run"; fi
	h destroy "$did"
	h create --json --runtime base:latest --network --dependency nosuch-pkg --idle-timeout 20m
	did=$(sid)
	i=0
	while ! grep -q "\[$did\] failed: .*nosuch-pkg" "$T/huskd.log" && [ $i -lt 3000 ]; do sleep 0.1; i=$((i + 1)); done
	h get --json "$did"
	if grep -q '"status": *"failed"' "$T/o" && grep -q "\[$did\] failed: .*Unable to locate package nosuch-pkg" "$T/huskd.log"; then
		pass dependency_missing_fails_create
	else
		fail dependency_missing_fails_create "want the create failed with apt's 'Unable to locate package nosuch-pkg'; log: $(grep "$did" "$T/huskd.log" | tail -n 2)"
	fi
	h create --json --runtime base:latest --dependency curl
	if [ "$cli_s" != 0 ] && grep -q 'network.enabled' "$T/e"; then pass dependencies_need_network; else fail dependencies_need_network "want a refusal naming network.enabled"; fi
fi

[ $rc = 0 ] || { echo "--- huskd's log"; tail -n 30 "$T/huskd.log"; }
stop_huskd net/huskd_clean_exit_serve || rc=1
exit $rc
