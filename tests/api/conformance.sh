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
HUSKD_IMAGES=$T/images HUSKD_VMM=$top/build/tests/fake-vmm \
	start_huskd 1 || exit 1
TRACE=$T/queries client conformance.mjs
rc=$?
stop_huskd conformance/huskd_clean_exit || rc=1
exit $rc
