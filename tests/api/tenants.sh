#!/bin/sh
# Orgs and API keys (issue I): huskd (ASan) on the host with fake VMMs
# (tests/fakes), driven by tests/api/client/tenants.mjs with the published
# client, the husk CLI and plain requests; then once more after a restart
# (keys, revocations and owners are kept), with small per-key limits, and
# with org keys in a (toy) key service. Prints PASS/FAIL lines.
set -u
port=18376
. "$(dirname "$0")/lib.sh"

rc=0
fake_images "$T/images" || { echo "FAIL tenants/images: husk-img cannot make one"; exit 1; }
export HUSKD_IMAGES=$T/images HUSKD_VMM=$top/build/tests/fake-vmm
export HUSK_CLI=$top/build/bin/husk-san HUSK_STATE=$T/state HUSK_KEYS=$T/keys.json
export HUSKD_BIN=$top/build/bin/huskd-san
start_huskd 1 || exit 1
client tenants.mjs 1 || rc=1
stop_huskd tenants/huskd_clean_exit || rc=1
if [ -s "$T/keys.json" ]; then
	# Stream URLs expire a second after they are given out (stream_url_expires).
	HUSKD_ARGS="--stream-url-ttl 1s" start_huskd 2 || exit 1
	client tenants.mjs 2 || rc=1
	stop_huskd tenants/huskd_clean_exit_2 || rc=1
	# Per-key limits, small enough to reach (key_concurrency_limited, key_rate_limited...).
	HUSKD_ARGS="--key-concurrency 1 --key-rate 10/1h" start_huskd 3 || exit 1
	client tenants.mjs 3 || rc=1
	stop_huskd tenants/huskd_clean_exit_3 || rc=1
	# Org keys in a key service (--kms-command): a toy KMS that logs its calls (kms_*).
	cat >"$T/kms" <<'KMS'
#!/bin/sh
d=$(dirname "$0")
echo "$1 $2" >>"$d/kms.log"
[ -e "$d/$2.deleted" ] && { echo "org $2 is gone from the toy KMS" >&2; exit 3; }
case $1 in
wrap) read k; echo "tr-$(echo "$k" | tr 0-9a-f g-v)";;
unwrap) read w; echo "${w#tr-}" | tr g-v 0-9a-f;;
delete) touch "$d/$2.deleted";;
*) exit 2;;
esac
KMS
	chmod 755 "$T/kms"
	HUSKD_ARGS="--kms-command $T/kms" start_huskd 4 || exit 1
	KMS_LOG=$T/kms.log client tenants.mjs 4 || rc=1
	stop_huskd tenants/huskd_clean_exit_4 || rc=1
	# Every sandbox was destroyed: none of their fake VMMs may be left.
	left=$(pgrep -f "$T/state/sandboxes/")
	if [ -z "$left" ]; then
		echo "PASS tenants/no_vmm_left"
	else
		echo "FAIL tenants/no_vmm_left: $(echo "$left" | tr '\n' ' ')"
		rc=1
	fi
fi
exit $rc
