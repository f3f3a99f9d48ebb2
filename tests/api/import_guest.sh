#!/bin/sh
# An imported image runs (issue K), on real KVM in the nested host: the
# image this test makes (tests/img/oci_lib.sh: busybox, a file a later
# layer deleted, Env, WorkingDir, User, Entrypoint and Cmd) is imported as
# a docker save archive through huskd (ASan) and the CLI, a sandbox is made
# of it, and a command there sees the image's files (not the deleted one),
# runs in its WorkingDir as its User with its Env; "--" alone runs the
# image's Entrypoint and Cmd. The runtime cannot be deleted while the
# sandbox sits on it, and can after. Prints PASS/FAIL import_guest/NAME lines.
set -u
port=8794
suite=import_guest
. "$(dirname "$0")/lib.sh"
. "$top/tests/img/oci_lib.sh"
rc=0

if ! mkimage "$T/lay" || ! q skopeo --tmpdir "$T" --insecure-policy copy oci:"$T/lay:v1" docker-archive:"$T/img.tar":t:v1; then
	echo "FAIL import_guest/make_image: $(tail -n 3 "$T/log")"
	exit 1
fi
# The nested host's disk is its memory: huskd's reserve stays small here.
if ! HUSKD_ARGS="--min-free-disk 64Mi" start_huskd 1; then
	echo "FAIL import_guest/huskd_start: huskd did not start; its log:"
	tail -n 20 "$T/huskd.log"
	exit 1
fi
if h runtime import img:v1 "$T/img.tar" && [ "$(cat "$T/o")" = img:v1 ]; then
	pass imported
else
	fail imported "exit $cli_s"
fi
h create --json --runtime img:v1 --idle-timeout 20m
id=$(sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1)
h exec "$id" -- sh -c 'cat /hello; pwd; id -u; echo "$GREETING $HOME"; [ -e /etc/gone ] || echo gone; cat /etc/kept'
want="hello from layer 2
/work
1234
hi /work
gone
kept"
if [ "$(cat "$T/o")" = "$want" ]; then
	pass runs_as_the_image_says
else
	fail runs_as_the_image_says "got '$(cat "$T/o" | tr '\n' '|')', wanted '$(echo "$want" | tr '\n' '|')'"
	tail -n 20 "$T/huskd.log"
fi
h exec "$id" --
if [ "$(cat "$T/o")" = entry ]; then pass entrypoint_and_cmd; else fail entrypoint_and_cmd "got '$(cat "$T/o")'"; fi
if ! h runtime delete img:v1 --confirm && grep -q "is the base of 1 sandboxes" "$T/e"; then
	pass kept_while_used
else
	fail kept_while_used "exit $cli_s"
fi
h delete "$id" --confirm
if h runtime delete img:v1 --confirm && [ -z "$(ls -A "$T/state/runtimes")" ]; then
	pass deleted_once_unused
else
	fail deleted_once_unused "exit $cli_s; left: $(ls -A "$T/state/runtimes")"
fi
stop_huskd import_guest/huskd_clean_exit || rc=1
exit $rc
