#!/bin/sh
# User streams (API.md §6.2, issue L item 1): huskd (ASan) on the host with
# the fake VMM, driven by tests/api/client/streams.mjs - the published
# client's run() with stdin, and plain requests for POST/PUT/GET /streams,
# stream ids in stream.stdin/stdout/stderr and stream.timestamps.
# A small --output-limit makes a stream's limit reachable; a second huskd over
# the same state follows a job's output again. Prints PASS/FAIL lines.
set -u
port=18378
. "$(dirname "$0")/lib.sh"

fake_images "$T/images" || { echo "FAIL streams/images: husk-img cannot make one"; exit 1; }
HUSKD_IMAGES=$T/images HUSKD_VMM=$top/build/tests/fake-vmm HUSKD_ARGS="--output-limit 4Mi" \
	start_huskd 1 || exit 1
STREAMS_KEEP=$T/kept.json client streams.mjs
rc=$?
stop_huskd streams/huskd_clean_exit || rc=1
# huskd again, over the same state: a job left running is followed again.
if [ -s "$T/kept.json" ]; then
	HUSKD_IMAGES=$T/images HUSKD_VMM=$top/build/tests/fake-vmm HUSKD_ARGS="--output-limit 4Mi" \
		start_huskd 2 || exit 1
	STREAMS_KEEP=$T/kept.json client streams.mjs restarted || rc=1
	stop_huskd streams/huskd_clean_exit_2 || rc=1
else
	echo "FAIL streams/job_stream_after_restart: the first phase left no job"
	rc=1
fi
exit $rc
