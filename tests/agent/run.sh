#!/bin/sh
# Agent tests through the real client, against an agent on a Unix socket
# (--unix PATH: husk-agent on the host) or in a guest (--vsock PATH: through
# husk-vmm's vsock socket). Prints PASS/FAIL lines; exit status 1 on failure.
# usage: run.sh (--unix PATH | --vsock PATH) [PREFIX]
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
ctl="$top/build/bin/husk-agentctl $1 $2"
prefix=${3:-agent}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
failed=0

ok() { echo "PASS $prefix/$1"; }
bad() {
	echo "FAIL $prefix/$1: $2"
	failed=1
	for f in "$T/out" "$T/err"; do
		[ -s "$f" ] && { echo "--- $f"; tail -n 10 "$f"; }
	done
	return 0
}
# x ARGS...: runs husk-agentctl with a time limit; stdout in $T/out, stderr in $T/err.
# The limits only end hangs: they are far beyond a transfer on a loaded, emulated host.
x() {
	timeout 600 $ctl "$@" >"$T/out" 2>"$T/err"
	rc=$?
}

x exec -- echo hi
if [ "$rc" = 0 ] && [ "$(cat "$T/out")" = hi ]; then ok echo_hi; else bad echo_hi "status $rc"; fi

x exec -- sh -c 'exit 7'
[ "$rc" = 7 ] && ok exit_code || bad exit_code "status $rc, want 7"

x exec -- sh -c 'echo to-out; echo to-err >&2'
if [ "$(cat "$T/out")" = to-out ] && [ "$(cat "$T/err")" = to-err ]; then ok separate_streams; else bad separate_streams "streams mixed or lost"; fi

x exec -- sh -c 'kill -9 $$'
[ "$rc" = 137 ] && ok killed_by_signal || bad killed_by_signal "status $rc, want 137"

x exec -- /no/such/program
if [ "$rc" = 127 ] && grep -q "cannot run '/no/such/program'" "$T/err"; then ok program_not_found; else bad program_not_found "status $rc"; fi

# 20 MiB of stdout arrives intact.
x exec -- sh -c 'head -c 20971520 /dev/urandom > /tmp/husk-big; sha256sum /tmp/husk-big'
want=$(cut -d' ' -f1 "$T/out")
timeout 600 $ctl exec -- cat /tmp/husk-big >"$T/big" 2>"$T/err"
got=$(sha256sum <"$T/big" | cut -d' ' -f1)
if [ -n "$want" ] && [ "$want" = "$got" ] && [ "$(wc -c <"$T/big")" -eq 20971520 ]; then ok stdout_20mib; else bad stdout_20mib "sha256 $got ($(wc -c <"$T/big") bytes), want $want (20971520)"; fi

# stdin piped through, 5 MiB of it.
head -c 5242880 /dev/urandom >"$T/in"
timeout 600 $ctl exec --stdin -- sha256sum <"$T/in" >"$T/out" 2>"$T/err"
if [ "$(cut -d' ' -f1 "$T/out")" = "$(sha256sum <"$T/in" | cut -d' ' -f1)" ]; then ok stdin_5mib; else bad stdin_5mib "sha256 differs"; fi
echo "line one" | timeout 60 $ctl exec --stdin -- cat >"$T/out" 2>"$T/err"
[ "$(cat "$T/out")" = "line one" ] && ok stdin_short || bad stdin_short "got '$(cat "$T/out")'"

# A timeout ends the whole process tree within the grace period.
start=$(date +%s)
x exec --timeout 1000 -- sh -c 'sleep 1017 & sleep 1017 & wait'
took=$(($(date +%s) - start))
# "[s]" keeps the pattern from matching the checking shell itself.
timeout 60 $ctl exec -- sh -c 'pgrep -f "[s]leep 1017" >/dev/null && echo alive || echo gone' >"$T/left" 2>/dev/null
if [ "$rc" = 143 ] && grep -q "timed out" "$T/err" && [ "$took" -le 8 ] && [ "$(cat "$T/left")" = gone ]; then
	ok timeout_kills_tree
else
	bad timeout_kills_tree "status $rc after ${took}s; sleeps $(cat "$T/left")"
fi

# Ctrl-C on the client cancels the remote process (sent once the process runs:
# its first line is in).
timeout 600 $ctl exec -- sh -c 'echo started; exec sleep 100' >"$T/out" 2>"$T/err" &
pid=$!
i=0
while ! grep -q started "$T/out" 2>/dev/null && kill -0 $pid 2>/dev/null && [ $i -lt 6000 ]; do
	sleep 0.1
	i=$((i + 1))
done
kill -INT $pid
wait $pid
rc=$?
if [ "$rc" = 143 ] && grep -q cancelled "$T/err"; then ok cancel; else bad cancel "status $rc"; fi

# keep: the process outlives its connection (a pause drops every one); without it,
# it ends with it. Both clients killed, kept one first: once the other is
# gone, the agent has seen both connections close.
started() { # FILE CLIENT: waits for the pid its command printed first, while its client runs
	i=0
	while [ ! -s "$1" ] && kill -0 "$2" 2>/dev/null && [ $i -lt 6000 ]; do sleep 0.1; i=$((i + 1)); done
	head -n 1 "$1"
}
# (the clients themselves in the background, not under timeout: killed, their connections close)
$ctl exec --keep -- sh -c 'echo $$; exec sleep 1000' >"$T/kept" 2>/dev/null &
kc=$!
$ctl exec -- sh -c 'echo $$; exec sleep 1000' >"$T/plain" 2>/dev/null &
pc=$!
kpid=$(started "$T/kept" $kc)
ppid_=$(started "$T/plain" $pc)
kill -9 $kc
kill -9 $pc
wait $kc $pc 2>/dev/null
# (alive: a process that is not a zombie; on the host the agent is no one's reaper)
alive() { x exec -- sh -c 'grep -q "^State:[[:space:]]*[^Z]" "/proc/$1/status"' sh "$1"; }
i=0
while alive "$ppid_" && [ "$rc" = 0 ] && [ $i -lt 6000 ]; do sleep 0.1; i=$((i + 1)); done
plain_rc=$rc
alive "$kpid"
kept_rc=$rc
x exec -- kill "$kpid"
if [ -n "$kpid" ] && [ -n "$ppid_" ] && [ "$plain_rc" != 0 ] && [ "$kept_rc" = 0 ]; then
	ok keep_outlives_connection
else
	bad keep_outlives_connection "kept pid '$kpid' alive-check status $kept_rc (want 0); plain pid '$ppid_' status $plain_rc (want non-zero)"
fi

x exec --pty -- sh -c 'test -t 0 && test -t 1 && echo on-a-tty'
grep -q on-a-tty "$T/out" && ok pty || bad pty "not on a terminal"

x exec --cwd /tmp --env HUSK_X=42 -- sh -c 'echo "$(pwd) $HUSK_X"'
[ "$(cat "$T/out")" = "/tmp 42" ] && ok cwd_and_env || bad cwd_and_env "got '$(cat "$T/out")'"

# Another user (as an OCI image's User says): a bare uid:gid needs no /etc/passwd entry.
x exec --user 65534:65534 -- sh -c 'echo "$(id -u) $(id -g) $(id -G)"'
[ "$(cat "$T/out")" = "65534 65534 65534" ] && ok run_as_user || bad run_as_user "got '$(cat "$T/out")' $(cat "$T/err")"
x exec --user no-such-user -- true
[ $rc != 0 ] && grep -q "no such user" "$T/err" && ok unknown_user_refused ||
	bad unknown_user_refused "exit $rc: $(cat "$T/err")"

# 32 execs at once, each on its own connection.
i=0
while [ $i -lt 32 ]; do
	(timeout 120 $ctl exec -- sh -c "echo n$i" >"$T/c$i" 2>&1) &
	i=$((i + 1))
done
wait
good=0
i=0
while [ $i -lt 32 ]; do
	[ "$(cat "$T/c$i")" = "n$i" ] && good=$((good + 1))
	i=$((i + 1))
done
[ $good = 32 ] && ok concurrent_32 || bad concurrent_32 "$good of 32 right"

# Sandbox environment defaults.
x env-set HUSK_DEFAULT=one
x exec -- sh -c 'echo $HUSK_DEFAULT'
first=$(cat "$T/out")
x env-set HUSK_DEFAULT
x exec -- sh -c 'echo "[$HUSK_DEFAULT]"'
if [ "$first" = one ] && [ "$(cat "$T/out")" = "[]" ]; then ok env_defaults; else bad env_defaults "got '$first' then '$(cat "$T/out")'"; fi

# Files: 50 MiB there and back, atomic replace, directory operations.
head -c 52428800 /dev/urandom >"$T/f50"
x put "$T/f50" /tmp/husk-files/deep/f50 0640
timeout 600 $ctl get /tmp/husk-files/deep/f50 "$T/f50.back" >/dev/null 2>&1
if [ "$(sha256sum <"$T/f50" | cut -d' ' -f1)" = "$(sha256sum <"$T/f50.back" | cut -d' ' -f1)" ]; then ok file_50mib_roundtrip; else bad file_50mib_roundtrip "sha256 differs"; fi
x stat /tmp/husk-files/deep/f50
grep -q '"size":52428800' "$T/out" && grep -q '"mode":416' "$T/out" && ok file_stat || bad file_stat "$(cat "$T/out")"
echo new >"$T/small"
x put "$T/small" /tmp/husk-files/deep/f50
x get /tmp/husk-files/deep/f50 -
[ "$(cat "$T/out")" = new ] && ok file_replace || bad file_replace "got '$(head -c 20 "$T/out")'"
x mkdir /tmp/husk-files/a/b/c
x ls /tmp/husk-files/a/b
grep -q '"name":"c","size":[0-9]*,"mode":[0-9]*,"mtime_ms":[0-9]*,"type":"dir"' "$T/out" && ok file_mkdir_ls || bad file_mkdir_ls "$(cat "$T/out")"
x get /tmp/husk-files/missing -
if [ "$rc" = 1 ] && grep -q not_found "$T/err"; then ok file_missing; else bad file_missing "status $rc"; fi
x rm /tmp/husk-files/a
[ "$rc" = 1 ] && grep -q is_a_directory "$T/err" && ok rm_refuses_directory || bad rm_refuses_directory "status $rc"
x rmdir -r /tmp/husk-files
x stat /tmp/husk-files
[ "$rc" = 1 ] && ok rmdir_recursive || bad rmdir_recursive "still there"

# A directory as a tar stream, both ways.
mkdir -p "$T/tree/sub/deeper" "$T/back"
echo alpha >"$T/tree/a.txt"
head -c 100000 /dev/urandom >"$T/tree/sub/blob"
echo omega >"$T/tree/sub/deeper/z.txt"
x tar-put "$T/tree" /tmp/husk-tar
x tar-get /tmp/husk-tar "$T/back"
if diff -r "$T/tree" "$T/back" >/dev/null 2>&1; then ok tar_roundtrip; else bad tar_roundtrip "trees differ"; fi
x rmdir -r /tmp/husk-tar

# Jobs: start, list, output, stop.
x job-start -- sh -c 'echo job-started; sleep 100'
job=$(sed -n 's/.*"id":"\([^"]*\)".*/\1/p' "$T/out")
# (its first line waited for: then it runs, and has said what it says)
i=0
while [ -n "$job" ] && [ $i -lt 6000 ]; do
	x job-output "$job"
	[ "$(cat "$T/out")" = job-started ] || [ "$rc" != 0 ] && break
	sleep 0.1
	i=$((i + 1))
done
output=$(cat "$T/out")
x job-list
listed=$(grep -c "\"id\":\"$job\",[^}]*\"running\":true" "$T/out")
x job-stop "$job"
if [ -n "$job" ] && [ "$listed" = 1 ] && [ "$output" = job-started ] &&
	grep -q '"running":false' "$T/out" && grep -q '"signal":15' "$T/out"; then
	ok jobs
else
	bad jobs "id '$job', listed $listed, output '$output', stop: $(cat "$T/out")"
fi

# A followed job's output comes as it is written and ends with the job's pipe.
x job-start -- sh -c 'echo one; sleep 1; echo two >&2; echo three'
job=$(sed -n 's/.*"id":"\([^"]*\)".*/\1/p' "$T/out")
x job-output "$job" --follow
out=$(cat "$T/out")
x job-output "$job" stderr --follow
err=$(cat "$T/out")
if [ "$out" = "$(printf 'one\nthree')" ] && [ "$err" = two ]; then
	ok job_output_follow
else
	bad job_output_follow "stdout '$out', stderr '$err'"
fi

x info
grep -q '"protocol":1' "$T/out" && ok info || bad info "$(cat "$T/out")"
grep -q '"cpu":{"busy_ms":[0-9]*,"total_ms":[0-9]*}' "$T/out" && ok info_cpu || bad info_cpu "$(cat "$T/out")"

# file.watch: a folder's changes as they happen, below it too with -r.
x rmdir -r /tmp/husk-watch
x mkdir /tmp/husk-watch/sub
timeout 600 $ctl watch /tmp/husk-watch -r '"name":"sub/new","type":"remove"' >"$T/watch" 2>&1 &
wpid=$!
# Changes count only once the watch is set: its start line says so.
timeout 600 sh -c "until grep -q start '$T/watch'; do sleep 0.05; done"
x put "$T/small" /tmp/husk-watch/sub/new
x rm /tmp/husk-watch/sub/new
wait $wpid
w=$(cat "$T/watch")
if echo "$w" | grep -q '"name":"sub/new","type":"create"' &&
	echo "$w" | grep -q '"name":"sub/new","type":"remove"' && echo "$w" | grep -q '"dropped":0'; then
	ok file_watch
else
	bad file_watch "$w"
fi
x call '{"op":"file.watch","path":"/tmp/husk-watch/none"}'
grep -q not_found "$T/err" && ok file_watch_missing || bad file_watch_missing "$(cat "$T/err")"

exit $failed
