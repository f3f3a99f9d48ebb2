# Shared by the benchmarks that drive huskd (sourced; set top, port first).
key=husk-bench-key
T=$(mktemp -d)
pid=""
# (errexit holds in the trap too: a huskd already stopped must not fail the bench)
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$T"' EXIT

# bench_huskd [ARG...]: huskd (release build, with ARGs) on $port with state in
# $T/state, up once it says it listens (its log: $T/huskd.log).
bench_huskd() {
	HUSK_API_KEY=$key "$top/build/bin/huskd" --port "$port" --state "$T/state" \
		--images "$top/build/images" "$@" >"$T/huskd.log" 2>&1 &
	pid=$!
	huskd_up "$T/huskd.log"
}

# huskd_up LOG: waits until the huskd writing LOG says it listens; says so
# with the log's tail and fails if it never does.
huskd_up() {
	for _ in $(seq 1 100); do
		grep -q listening "$1" && return 0
		sleep 0.1
	done
	echo "huskd did not start; its log:" >&2
	tail -n 20 "$1" >&2
	return 1
}

# bench_failed WHAT: says what went wrong, then huskd's log and what its
# sandboxes left (console; VMM log, where a request the agent never answered
# has the VMM's queues and connections), and exits 1.
bench_failed() {
	echo "$1; huskd's log and its sandboxes' consoles and VMM logs:" >&2
	tail -n 40 "$T/huskd.log" >&2
	for d in "$T"/state/sandboxes/*/; do
		# The VMM's queues and connections now (a stalled exec has no deadline to ask).
		[ -S "${d}control.sock" ] &&
			timeout 20 "$top/build/bin/husk-agentctl" --control "${d}control.sock" dump >/dev/null 2>&1 || true
		for f in console.log vmm.log; do
			[ -s "$d$f" ] && { echo "--- $d$f" && tail -n 20 "$d$f"; } >&2
		done
	done
	exit 1
}
