#!/bin/sh
# E2B's API (API.md §11, issue M): huskd (ASan) on the host with the fake
# VMM, driven by the published, unmodified e2b SDK (tests/api/client/e2b.mjs),
# and a check that it serves all the SDK's sandbox calls (e2b_conformance.mjs).
# Prints PASS/FAIL lines.
set -u
port=18379
. "$(dirname "$0")/lib.sh"

fake_images "$T/images" || { echo "FAIL e2b/images: husk-img cannot make one"; exit 1; }
# (--public-domain: E2B's SDK by domain alone, e2b/served_by_domain)
HUSKD_ARGS="--public-domain e2b.test" HUSKD_IMAGES=$T/images HUSKD_VMM=$top/build/tests/fake-vmm start_huskd 1 || exit 1
E2B_TEST_DOMAIN=e2b.test E2B_KEEP=$T/kept.json client e2b.mjs
rc=$?
# Every REST path and RPC method the SDK's sandbox calls, served (the SDK's own dist read).
HUSKD_BIN=$top/build/bin/huskd-san client e2b_conformance.mjs || rc=1
stop_huskd e2b/huskd_clean_exit || rc=1
# huskd again, over the same state: a sandbox's deadline (E2B's timeout) is kept.
if [ -s "$T/kept.json" ]; then
	HUSKD_IMAGES=$T/images HUSKD_VMM=$top/build/tests/fake-vmm start_huskd 2 || exit 1
	E2B_KEEP=$T/kept.json client e2b.mjs restarted || rc=1
	stop_huskd e2b/huskd_clean_exit_2 || rc=1
else
	echo "FAIL e2b/deadline_kept_across_restart: the first phase kept no sandbox"
	rc=1
fi
exit $rc
