#!/bin/sh
# huskd (ASan) against bad requests, on the host: nothing here needs KVM
# (the one sandbox is played by build/tests/fake-vmm).
# Prints PASS/FAIL lines; the daemon must survive and exit clean.
set -u
port=18372
. "$(dirname "$0")/lib.sh"

# The fake VMM (tests/fakes): the body checks need a sandbox that exists.
fake_images "$T/images" || { echo "FAIL badinput/images: husk-img cannot make one"; exit 1; }
HUSKD_IMAGES=$T/images HUSKD_VMM=$top/build/tests/fake-vmm start_huskd 1
# cgroup v2 here or not (this host's may be v1): usage figures, or none at all.
# Asked as huskd asks (the file system's type): a v1 host's /sys/fs/cgroup is
# a tmpfs where an older huskd's writes left a plain cgroup.subtree_control.
[ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ] && cg2=1 || cg2=0
HUSK_CGROUP2=$cg2 HUSKD_PID=$pid client badinput.mjs
rc=$?
stop_huskd badinput/huskd_clean_exit || rc=1
sh "$(dirname "$0")/cli_badinput.sh" || rc=1
exit $rc
