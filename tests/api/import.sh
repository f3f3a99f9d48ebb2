#!/bin/sh
# husk runtime import through huskd (ASan), on the host: nothing here boots a
# guest (tests/integration's t_import does, in the nested host). An image the
# test makes (tests/img/oci_lib.sh) goes in as a docker save archive and as an
# OCI layout folder, each uploaded by the CLI and converted with its steps
# shown; it is listed with the image's Env and WorkingDir as its defaults.
# A registry reference is pulled (docker-registry on loopback). Refused: a name taken, an image with a ../ path, a truncated archive, a
# size past --import-max-bytes, an upload part at the wrong offset - and after
# each, nothing is left in huskd's state folder. Imported runtimes delete; a
# built-in one does not. Prints PASS/FAIL import/NAME lines.
set -u
port=18376
suite=import
. "$(dirname "$0")/lib.sh"
. "$top/tests/img/oci_lib.sh"
rc=0

if ! mkimage "$T/lay"; then
	echo "FAIL import/make_image: umoci could not make the test image: $(tail -n 3 "$T/log")"
	exit 1
fi
q skopeo --tmpdir "$T" --insecure-policy copy oci:"$T/lay:v1" docker-archive:"$T/docker.tar":husk/test:v1
# The nested host's disk is its memory: huskd's reserve stays small here.
HUSKD_ARGS="--import-max-bytes 256Mi --min-free-disk 64Mi"
if ! start_huskd 1; then
	echo "FAIL import/huskd_start: huskd did not start; its log:"
	tail -n 20 "$T/huskd.log"
	exit 1
fi
state=$T/state

# clean: no import's folder is left and state/runtimes holds N images (the
# folder goes off huskd's loop: waited for, bounded for a huskd that hangs).
clean() {
	i=0
	while [ -n "$(ls -A "$state/imports")" ] && [ $i -lt 600 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	[ -z "$(ls -A "$state/imports")" ] && [ "$(ls "$state/runtimes" | wc -l)" = "$1" ]
}
listed() { h runtime list --json && jq -e --arg n "$1" '.runtimes[] | select(.name == $n)' "$T/o" >"$T/rt"; }

if h runtime import test:v1 "$T/docker.tar" && [ "$(cat "$T/o")" = test:v1 ] &&
	[ "$(grep -c '^husk: \[[1-6]/6\]' "$T/e")" = 6 ] && grep -q '^husk: uploaded' "$T/e" && clean 1; then
	pass import_docker_archive
else
	fail import_docker_archive "exit $cli_s; state: $(ls -A "$state/imports" "$state/runtimes" | tr '\n' ' ')"
fi
if listed test:v1 && [ "$(jq -r .defaults.env.GREETING "$T/rt")" = hi ] &&
	[ "$(jq -r .defaults.workingDir "$T/rt")" = /work ] && [ "$(jq -r '.tags[0]' "$T/rt")" = imported ]; then
	pass listed_with_defaults
else
	fail listed_with_defaults "$(cat "$T/rt" 2>/dev/null | head -c 400)"
fi
if h runtime import test:dir "$T/lay" && [ "$(cat "$T/o")" = test:dir ] && listed test:dir && clean 2; then
	pass import_layout_folder
else
	fail import_layout_folder "exit $cli_s"
fi

# From a registry: Debian's docker-registry on loopback, the image pushed there by skopeo.
cat >"$T/registry.yml" <<EOF
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $T/registry
http:
  addr: 127.0.0.1:$((port + 1000))
EOF
# Its binary from the Debian package, unpacked into the cache: installing the package would
# also start a registry service on port 5000 of the machine.
registry=$(command -v docker-registry)
if [ -z "$registry" ] || [ -n "${HUSK_TEST_FETCH_REGISTRY:-}" ]; then
	registry=${HUSK_CACHE:-$HOME/.cache/husk}/docker-registry/usr/bin/docker-registry
	if [ ! -x "$registry" ]; then
		mkdir -p "$T/deb"
		(cd "$T/deb" && apt-get download docker-registry >>"$T/log" 2>&1 &&
			dpkg -x docker-registry_*.deb "${registry%/usr/bin/docker-registry}") ||
			echo "import: cannot fetch Debian's docker-registry: $(tail -n 2 "$T/log")"
	fi
fi
"$registry" serve "$T/registry.yml" >"$T/registry.log" 2>&1 &
reg=$!
reg_url=docker://127.0.0.1:$((port + 1000))/husk/test:v1
i=0
until skopeo --tmpdir "$T" --insecure-policy copy --dest-tls-verify=false oci:"$T/lay:v1" "$reg_url" >>"$T/log" 2>&1 ||
	[ $i -ge 100 ] || ! kill -0 $reg 2>/dev/null; do
	sleep 0.1 # the registry is not listening yet
	i=$((i + 1))
done
if h runtime import test:reg "$reg_url" && [ "$(cat "$T/o")" = test:reg ] && listed test:reg &&
	[ "$(jq -r .defaults.env.GREETING "$T/rt")" = hi ] && clean 3; then
	pass import_from_registry
else
	fail import_from_registry "exit $cli_s; registry: $(tail -n 3 "$T/registry.log" "$T/log" | tr '\n' ' ')"
fi
kill $reg 2>/dev/null
wait $reg 2>/dev/null
h runtime delete test:reg --confirm

# refused NAME WANT ARGS...: the CLI fails saying WANT, and nothing is left.
refused() {
	t=$1
	want=$2
	shift 2
	if ! h "$@" && grep -q "$want" "$T/e" && clean 2 && ! listed bad:latest; then
		pass "refuses_$t"
	else
		fail "refuses_$t" "exit $cli_s (wanted '$want'); left: $(ls -A "$state/imports" | tr '\n' ' ')"
	fi
}
refused name_taken "a runtime named test:v1 exists" runtime import test:v1 "$T/docker.tar"
refused builtin_name_taken "a runtime named base:latest exists" runtime import base "$T/docker.tar"
cp -a "$T/lay" "$T/evil"
mkdir -p "$T/ev"
echo x >"$T/ev/x"
(cd "$T/ev" && tar --transform='s|^x$|../../x|' -cf - x) >"$T/layer.tar" 2>/dev/null
q umoci raw add-layer --image "$T/evil:v1" "$T/layer.tar"
refused dotdot "climbs out of the image's root" runtime import bad "$T/evil"
head -c $(($(stat -c %s "$T/docker.tar") / 2)) "$T/docker.tar" >"$T/short.tar"
refused truncated "truncated" runtime import bad "$T/short.tar"
truncate -s 1T "$T/huge.tar"
refused size_claim "huskd takes images up to 268435456 bytes" runtime import bad "$T/huge.tar"
refused bad_name "name must be NAME or NAME:TAG" runtime import 'Bad/Name' "$T/docker.tar"

# An upload part not at the end of what came: 409 naming the offset to send.
HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key node -e '
const u = process.env.HUSK_URL, h = {Authorization: "Bearer " + process.env.HUSK_API_KEY};
(async () => {
	let r = await fetch(u + "/sandbox/runtimes/import", {method: "POST", headers: {...h,
		"Content-Type": "application/json"}, body: JSON.stringify({name: "bad", size: 10})});
	const id = (await r.json()).data.importId;
	r = await fetch(u + "/sandbox/runtimes/import/" + id + "?offset=5", {method: "PUT", headers: h,
		body: "12345"});
	const j = await r.json();
	console.log(r.status, j.message);
	r = await fetch(u + "/sandbox/runtimes/import/" + id, {headers: h});
	const g = (await r.json()).data;
	console.log(r.status, g.status, g.received, g.name);
})();' >"$T/o" 2>"$T/e"
if grep -q '^409 .*at byte 0' "$T/o"; then pass wrong_offset; else fail wrong_offset "$(cat "$T/o")"; fi
if grep -qx '200 uploading 0 bad:latest' "$T/o"; then pass import_status; else fail import_status "$(cat "$T/o")"; fi

if h runtime delete test:dir --confirm && ! listed test:dir && [ "$(ls "$state/runtimes" | wc -l)" = 1 ]; then
	pass delete_imported
else
	fail delete_imported "exit $cli_s"
fi
if ! h runtime delete base:latest --confirm && grep -q "comes with husk" "$T/e"; then
	pass builtin_not_deleted
else
	fail builtin_not_deleted "exit $cli_s"
fi
if ! h runtime delete nosuch:1 --confirm && grep -q "not found" "$T/e"; then
	pass delete_unknown
else
	fail delete_unknown "exit $cli_s"
fi
# Imported runtimes outlive a restart (the catalog's reload keeps them).
kill -TERM $pid
wait $pid
[ -n "$(ls -A "$state/imports")" ] || fail upload_left_open "the open upload of bad:latest has no folder"
start_huskd 2
if listed test:v1; then pass kept_after_restart; else fail kept_after_restart "not listed"; fi
# The upload left open when huskd stopped is gone, folder and all.
if [ -z "$(ls -A "$state/imports")" ]; then pass open_upload_removed_at_start; else
	fail open_upload_removed_at_start "left: $(ls -A "$state/imports")"
fi
stop_huskd import/huskd_clean_exit || rc=1
exit $rc
