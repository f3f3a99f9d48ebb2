# Shared by the huskd suites (e2e.sh, badinput.sh): sourced after setting port.
top=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d)
key=husk-test-key
pid=
# On any exit: huskd, and any VMM it left that runs from this suite's folder
# (VMMs outlive huskd by design).
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; pkill -9 -f "$T/" 2>/dev/null; rm -rf "$T"' EXIT

# listening: how many times huskd's log says it listens (0 before the log exists).
listening() {
	n=$(grep -c listening "$T/huskd.log" 2>/dev/null)
	echo "${n:-0}"
}

# fake_images DIR: a runtime catalog of two small bases for huskd with
# build/tests/fake-vmm (no KVM): the kernel files only have to exist.
# Returns 1 if husk-img cannot make the image.
fake_images() {
	mkdir -p "$1/runtimes"
	: >"$1/bzImage"
	: >"$1/initramfs.cpio"
	"$top/build/bin/husk-img" create "$1/runtimes/base.qcow2" 64M >/dev/null || return 1
	"$top/build/bin/husk-img" create "$1/runtimes/alt.qcow2" 64M >/dev/null || return 1
	cat >"$1/runtimes/catalog.json" <<'EOF'
{"runtimes": [{"id": "srt_base", "name": "base:latest", "description": "fake-vmm base",
  "requirements": {"memory": "256Mi", "cpu": "1", "disk": "64Mi", "networkEnabled": false},
  "image": {"file": "base.qcow2", "format": "qcow2"}},
 {"id": "srt_alt", "name": "alt:latest", "description": "a second one, for sorting",
  "requirements": {"memory": "256Mi", "cpu": "1", "disk": "64Mi", "networkEnabled": false},
  "image": {"file": "alt.qcow2", "format": "qcow2"}}]}
EOF
}

# start_huskd N: starts huskd (ASan) on $port with state in $T/state and waits
# for its Nth "listening" line in $T/huskd.log (N counts restarts).
start_huskd() {
	want=$1
	# (an argument with spaces: HUSKD_APT_SOURCE, kept one word)
	if [ -n "${HUSKD_APT_SOURCE:-}" ]; then set -- --apt-source "$HUSKD_APT_SOURCE"; else set --; fi
	# shellcheck disable=SC2086
	HUSK_API_KEY=$key "$top/build/bin/huskd-san" --port "$port" --state "$T/state" ${HUSKD_ARGS:-} "$@" \
		--images "${HUSKD_IMAGES:-$top/build/images}" --vmm "${HUSKD_VMM:-$top/build/bin/husk-vmm}" \
		>>"$T/huskd.log" 2>&1 &
	pid=$!
	i=0
	# Its "listening" line is the event; the bound is for a huskd that hangs.
	while [ $i -lt 600 ] && [ "$(listening)" -lt "$want" ]; do
		sleep 0.1
		i=$((i + 1))
	done
	if [ "$(listening)" -lt "$want" ]; then
		echo "huskd (pid $pid) has not said it listens after $((i / 10)) s: state $(cut -d' ' -f3 /proc/$pid/stat 2>/dev/null), waiting in $(cat /proc/$pid/wchan 2>/dev/null)"
		return 1
	fi
}

# section NAME: whether to run a suite's section NAME, announced by "-- t_NAME"
# (tests/run.sh's suite --resume): after a wedge of the nested host it goes on
# from the one in flight (HUSK_SKIP: those done), and runs those with a failure
# once more (HUSK_ONLY), each time in a fresh host where huskd starts afresh.
section() {
	case " ${HUSK_SKIP:-} " in *" t_$1 "*) return 1 ;; esac
	[ -z "${HUSK_ONLY:-}" ] || case " $HUSK_ONLY " in *" t_$1 "*) ;; *) return 1 ;; esac
	echo "-- t_$1"
}

# The checks of a suite that sets $suite before sourcing this: PASS/FAIL
# $suite/NAME lines, the last h's output shown with a failure.
pass() { echo "PASS ${suite:-api}/$1"; }
fail() {
	echo "FAIL ${suite:-api}/$1: $2"
	[ -s "$T/o" ] && echo "  stdout: $(head -c 800 "$T/o")"
	[ -s "$T/e" ] && echo "  stderr: $(head -c 400 "$T/e")"
	rc=1
}
# story ID: what huskd logged of sandbox ID and the ends of its VMM's log and console, for a
# failure that its sandbox's death explains.
story() {
	grep -F "[$1]" "$T/huskd.log" | tail -n 15
	for f in vmm.log console.log; do
		[ -s "$T/state/sandboxes/$1/$f" ] || continue
		echo "  $1/$f:"
		tail -n 25 "$T/state/sandboxes/$1/$f"
	done
}
# h ARGS...: the husk CLI (ASan) against it; stdout in $T/o, stderr in $T/e, status in $cli_s.
h() {
	HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key "$top/build/bin/husk-san" "$@" >"$T/o" 2>"$T/e"
	cli_s=$?
	return $cli_s
}
# vmm_pid ID: the pid of sandbox ID's husk-vmm (its serial is the id's last 20 characters).
# By /proc: busybox's ps cuts long command lines, and a jailed, keyed, networked VMM's is long.
vmm_pid() {
	tail=$(echo "$1" | tail -c 21)
	for p in /proc/[0-9]*; do
		cmd=$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
		case $cmd in
		*husk-vmm*"serial=$tail"*) echo "${p#/proc/}" ;;
		esac
	done | sort -n | head -n 1
}

# client SCRIPT ARGS...: runs a tests/api/client script against it.
client() { HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key node "$top/tests/api/client/$@"; }

# stop_huskd NAME: SIGTERM; it must exit 0 with no sanitizer report. Returns 1 if not.
stop_huskd() {
	kill -TERM $pid
	wait $pid
	status=$?
	pid=
	if [ "$status" = 0 ] && ! grep -q "ERROR: AddressSanitizer\|runtime error:" "$T/huskd.log"; then
		echo "PASS $1"
		return 0
	fi
	echo "FAIL $1: status $status; its log:"
	tail -n 40 "$T/huskd.log"
	return 1
}
