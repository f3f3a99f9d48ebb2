#!/bin/sh
# Runtime benchmark: each runtime's image size (its qcow2 file, and the file
# system a sandbox gets at least) and create -> first exec through huskd
# (release build) with the published client (tools/bench/runtimes.mjs), the
# ratio against base:latest. Run through tools/husk-kvm-run.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
port=18376
# shellcheck source=tools/bench/lib.sh
. "$top/tools/bench/lib.sh"
bench_huskd
echo "measuring create -> first exec for every runtime..." >&2
HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key node "$top/tools/bench/runtimes.mjs" | tee "$T/times" >&2 ||
	{ tail -n 40 "$T/huskd.log"; exit 1; }
awk '{ p50[$1] = $2; max[$1] = $3; size[$1] = $4; fs[$1] = $5; order[++n] = $1 } END {
	print "\nruntime benchmark (create -> first exec through huskd, the runtime'"'"'s memory requirement)"
	printf "%-20s %10s %10s %12s %10s %10s\n", "runtime", "image MiB", "fs MiB", "first ms p50", "max ms", "vs base"
	for (i = 1; i <= n; i++) {
		r = order[i]
		printf "%-20s %10.0f %10.0f %12.0f %10.0f %10.2f\n", r, size[r] / 1048576, fs[r] / 1048576,
			p50[r], max[r], p50[r] / p50["base:latest"]
	}
	print "(image: the qcow2 file on the host; fs: the smallest disk a sandbox of it gets)"
}' "$T/times"
