#!/bin/sh
# huskd over HTTPS (issue I, item 7), on the host with fake VMMs: the
# published client works through it with a member key and its CA; plain
# HTTP to that port gets nothing; a non-loopback listener without TLS, or a
# key that does not fit its certificate, is refused at start. Prints
# PASS/FAIL lines "tls/<name>".
set -u
port=18377
. "$(dirname "$0")/lib.sh"

rc=0
fake_images "$T/images" || { echo "FAIL tls/images: husk-img cannot make one"; exit 1; }
export HUSKD_IMAGES=$T/images HUSKD_VMM=$top/build/tests/fake-vmm
# A CA of the test's own and a certificate for 127.0.0.1 signed by it; a stray key.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/ca.key" -out "$T/ca.pem" -days 2 \
	-subj "/CN=husk test CA" >/dev/null 2>&1 &&
	openssl req -newkey rsa:2048 -nodes -keyout "$T/key.pem" -out "$T/req.pem" \
		-subj "/CN=127.0.0.1" >/dev/null 2>&1 &&
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$T/ext" &&
	openssl x509 -req -in "$T/req.pem" -CA "$T/ca.pem" -CAkey "$T/ca.key" -CAcreateserial \
		-out "$T/cert.pem" -days 2 -extfile "$T/ext" >/dev/null 2>&1 &&
	openssl genrsa -out "$T/other.key" 2048 >/dev/null 2>&1 ||
	{ echo "FAIL tls/certificates: openssl could not make them"; exit 1; }

# refused NAME WANT ARGS...: huskd must refuse to start (exit 2), say WANT, and leak nothing.
refused() {
	name=$1 want=$2
	shift 2
	HUSK_API_KEY=$key "$top/build/bin/huskd-san" --port "$port" --state "$T/state0" \
		--images "$T/images" --vmm "$HUSKD_VMM" "$@" >"$T/o" 2>&1
	s=$?
	if [ "$s" = 2 ] && grep -q -- "$want" "$T/o" && ! grep -q "Sanitizer" "$T/o"; then
		echo "PASS tls/$name"
	else
		echo "FAIL tls/$name: exit $s: $(head -c 300 "$T/o")"
		rc=1
	fi
}
refused plain_off_loopback_refused "--tls-cert" --listen 0.0.0.0
refused key_not_of_the_cert "mismatch" --tls-cert "$T/cert.pem" --tls-key "$T/other.key"
refused cert_alone_refused "both --tls-cert and --tls-key" --tls-cert "$T/cert.pem"

HUSKD_ARGS="--tls-cert $T/cert.pem --tls-key $T/key.pem" start_huskd 1 || exit 1
# A second huskd on its port: refused, with what it had made freed.
refused port_taken_refused "address already in use"
if grep -q "listening on https://" "$T/huskd.log"; then
	echo "PASS tls/says_https"
else
	echo "FAIL tls/says_https: $(grep listening "$T/huskd.log")"
	rc=1
fi
NODE_EXTRA_CA_CERTS=$T/ca.pem HUSK_URL=https://127.0.0.1:$port HUSK_API_KEY=$key \
	node "$top/tests/api/client/tls.mjs" || rc=1
stop_huskd tls/huskd_clean_exit || rc=1
exit $rc
