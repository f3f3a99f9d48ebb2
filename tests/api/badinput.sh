#!/bin/sh
# huskd (ASan) against bad requests, on the host: nothing here needs KVM.
# Prints PASS/FAIL lines; the daemon must survive and exit clean.
set -u
port=18372
. "$(dirname "$0")/lib.sh"

start_huskd 1
client badinput.mjs
rc=$?
stop_huskd badinput/huskd_clean_exit || rc=1
sh "$(dirname "$0")/cli_badinput.sh" || rc=1
exit $rc
