#!/bin/sh
# Conformance with the published client's API list (tests/api/client/conformance.mjs):
# huskd (ASan) on the host with the fake VMM, its query parameter trace on.
# Prints PASS/FAIL lines.
set -u
port=18379
. "$(dirname "$0")/lib.sh"

fake_images "$T/images" || { echo "FAIL conformance/images: husk-img cannot make one"; exit 1; }
: >"$T/queries"
export HUSKD_TRACE_QUERIES="$T/queries"
# (debug: its access log, each request's answer and time, checked below)
HUSKD_ARGS="--log-level debug" HUSKD_IMAGES=$T/images HUSKD_VMM=$top/build/tests/fake-vmm \
	start_huskd 1 || exit 1
TRACE=$T/queries client conformance.mjs
rc=$?
# Every request the client made has its line; a query (it may hold a token) is never logged.
served=$(grep -E '^[0-9TZ:.-]* debug  ?(GET|POST|PUT|PATCH|DELETE|HEAD) /[^ ]*: [0-9]{3} in [0-9.]+ ms$' "$T/huskd.log")
if echo "$served" | grep -q ' POST /sandbox: 20[01] in ' && echo "$served" | grep -q ' GET /sandbox/sbx_[a-z0-9]*: 200 in ' &&
	! grep -E ' debug  ?[A-Z]+ /[^ ]*\?' "$T/huskd.log" | grep -q .; then
	echo "PASS conformance/access_log ($(echo "$served" | wc -l) requests)"
else
	echo "FAIL conformance/access_log: $(echo "$served" | wc -l) lines; its log's debug lines: $(grep -c ' debug ' "$T/huskd.log")"
	grep ' debug ' "$T/huskd.log" | head -n 5
	rc=1
fi
stop_huskd conformance/huskd_clean_exit || rc=1
exit $rc
