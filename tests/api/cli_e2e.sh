# The husk CLI (ASan build) end to end on real KVM. Sourced by e2e.sh: it
# shares that huskd ($port, key $key), its temporary folder $T and $rc.
# Prints PASS/FAIL cli/NAME lines.

cli_bin="$top/build/bin/husk-san"
: >"$T/cli.allerr"

# h ARGS...: runs husk with stdout in $T/o and stderr in $T/e; its status.
h() {
	HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key "$cli_bin" "$@" >"$T/o" 2>"$T/e"
	cli_s=$?
	cat "$T/e" >>"$T/cli.allerr"
	return $cli_s
}
pass() { echo "PASS cli/$1"; }
fail() {
	echo "FAIL cli/$1: $2"
	echo "  stdout: $(head -c 400 "$T/o")"
	echo "  stderr: $(head -c 400 "$T/e")"
	rc=1
}
# j EXPR: a value (JavaScript, the document is d) of the JSON in $T/o; strings
# bare, the rest as JSON. node, not jq: the nested host has node and busybox.
j() {
	node -e 'let d; try { d = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); }
		catch (e) { process.exit(1); }
		let v; try { v = new Function("d", "return (" + process.argv[2] + ")")(d); }
		catch (e) { process.exit(1); }
		console.log(typeof v === "string" ? v : JSON.stringify(v));' "$T/o" "$1" 2>/dev/null
}
# check NAME WHY CONDITION...: PASS if the condition (a command) holds.
check() {
	n=$1
	why=$2
	shift 2
	if "$@"; then pass "$n"; else fail "$n" "$why"; fi
}

h run --runtime python:3.13 -- python3 -c 'print(sum([1,2,3]))'
check run_python "want stdout 6 and status 0, got status $cli_s" \
	test "$cli_s" = 0 -a "$(cat "$T/o")" = 6

h run -- sh -c 'exit 3'
check run_exit_code "want status 3, got $cli_s" test "$cli_s" = 3

h run -- sh -c 'echo to-out; echo to-err >&2; exit 0'
check run_streams_apart "stdout must be to-out, stderr must hold to-err" \
	test "$cli_s" = 0 -a "$(cat "$T/o")" = to-out -a "$(grep -c to-err "$T/e")" = 1

h run --json -- sh -c 'echo json-out'
check run_json "want .exitCode 0 and .stdout json-out" \
	test "$(j '[d.exitCode, d.stdout]')" = '[0,"json-out\n"]'

printf 'twelve bytes' >"$T/twelve"
h sb run --env GREETING=hi --file data.txt:"$T/twelve" -- sh -c 'echo "$GREETING"; wc -c <data.txt'
check run_env_and_file "want hi and 12, got '$(tr '\n' ' ' <"$T/o")'" \
	test "$(tr '\n' ' ' <"$T/o")" = "hi 12 "

h run --memory 3Gx -- true
check run_bad_memory "want status 2 naming --memory, got $cli_s" \
	test "$cli_s" = 2 -a "$(grep -c -- --memory "$T/e")" -ge 1

h create --json --runtime python:3.13 --name cli-e2e --idle-timeout 20m
id=$(j d.sandboxId)
case "$id" in
sbx_*) pass create_json ;;
*) fail create_json "no sandboxId in the JSON (status $cli_s)" ;;
esac

h exec "$id" -- sh -c 'for i in 1 2 3; do echo line$i; echo err$i >&2; done; exit 4'
check exec_order_and_code "want lines 1-3 in order on stdout, errs on stderr, status 4 (got $cli_s)" \
	test "$cli_s" = 4 -a "$(tr '\n' ' ' <"$T/o")" = "line1 line2 line3 " \
	-a "$(grep err "$T/e" | tr '\n' ' ')" = "err1 err2 err3 "

# Live: the first line is out while the command still runs (it waits for a file
# the test copies in once it has looked; the bound only ends a hang).
HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key "$cli_bin" exec "$id" -- \
	sh -c 'echo first; i=0; while [ ! -e /tmp/go ] && [ $i -lt 6000 ]; do sleep 0.1; i=$((i + 1)); done; echo second' >"$T/live" 2>>"$T/cli.allerr" &
live=$!
i=0
while [ $i -lt 600 ] && ! grep -q first "$T/live"; do
	sleep 0.1
	i=$((i + 1))
done
if grep -q first "$T/live" && ! grep -q second "$T/live" && kill -0 $live 2>/dev/null; then
	pass exec_streams_live
else
	fail exec_streams_live "'first' did not arrive while the command ran"
fi
# A second command meanwhile: huskd's busy answer, printed.
h exec "$id" -- true
check exec_busy_message "want status 1 and SANDBOX_BUSY, got $cli_s" \
	test "$cli_s" = 1 -a "$(grep -c SANDBOX_BUSY "$T/e")" = 1
: >"$T/go"
h fs cp "$T/go" "$id:/tmp/go"
wait $live
check exec_live_completes "want first and second" test "$(tr '\n' ' ' <"$T/live")" = "first second "

h exec "$id" --timeout 2s -- sleep 60
check exec_timeout "want a non-zero status and 'timeout' on stderr, got $cli_s" \
	test "$cli_s" != 0 -a "$(grep -c 'status timeout' "$T/e")" = 1

h exec "$id" echo hi there
check exec_missing_dashes "want status 2 and a hint about --" \
	test "$cli_s" = 2 -a "$(grep -c -- "after '--'" "$T/e")" = 1

# husk ssh (issue L item 6): a login shell on a real PTY fed from a pipe, its exit code;
# a command on the terminal sees a terminal; a window size given at start.
printf 'echo sum=$((6*7)); exit 3\n' >"$T/keys"
HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key "$cli_bin" ssh "$id" <"$T/keys" >"$T/o" 2>"$T/e"
cli_s=$?
# (the terminal echoes the line typed, and the prompt may share a line with the output)
check ssh_shell_exit_code "want sum=42 and status 3, got $cli_s: $(tr -d '\r' <"$T/o" | tail -3)" \
	test "$cli_s" = 3 -a "$(tr -d '\r' <"$T/o" | grep -c 'sum=42$')" = 1
HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key "$cli_bin" ssh "$id" -- sh -c 'tty; stty size' \
	</dev/null >"$T/o" 2>"$T/e"
cli_s=$?
check ssh_command_on_a_pty "want /dev/pts/N and 24 80, got $cli_s: $(tr -d '\r' <"$T/o")" \
	test "$cli_s" = 0 -a "$(tr -d '\r' <"$T/o" | grep -c '^/dev/pts/')" = 1 -a \
	"$(tr -d '\r' <"$T/o" | grep -c '^24 80$')" = 1
h ssh sbx_nosuchthing -- true
check ssh_unknown_sandbox "want status 1 and SANDBOX_NOT_FOUND, got $cli_s" \
	test "$cli_s" = 1 -a "$(grep -c SANDBOX_NOT_FOUND "$T/e")" = 1

# Files: one up into new directories, and back.
printf 'hello\001\377 files\n' >"$T/f.bin"
h fs cp --json "$T/f.bin" "$id:/home/agentuity/new/dir/f.bin"
check fs_cp_up_json "want 1 file, 2 directories created" test \
	"$(j '[d.filesTransferred, d.bytesTransferred, d.directoriesCreated]')" = \
	'[1,14,["/home/agentuity/new","/home/agentuity/new/dir"]]'
h fs cp "$id:/home/agentuity/new/dir/f.bin" "$T/back/f.bin"
check fs_cp_down_file "the file came back different (status $cli_s)" cmp -s "$T/f.bin" "$T/back/f.bin"
h fs cp --strict "$T/f.bin" "$id:/home/agentuity/nowhere/f.bin"
check fs_cp_strict "want status 1 for a missing parent, got $cli_s" \
	test "$cli_s" = 1 -a "$(grep -c strict "$T/e")" = 1

# A directory with -r, up and down.
mkdir -p "$T/tree/a" "$T/tree/b/c"
echo one >"$T/tree/a/1.txt"
echo two >"$T/tree/b/c/2.txt"
head -c 100000 /dev/urandom >"$T/tree/b/big.bin"
h fs cp -r "$T/tree" "$id:/home/agentuity/tree"
check fs_cp_up_dir "status $cli_s" test "$cli_s" = 0
h fs cp -r --json "$id:/home/agentuity/tree" "$T/tree2"
check fs_cp_down_dir_json "want 3 files" test "$(j d.filesTransferred)" = 3
check fs_cp_dir_roundtrip "the trees differ" diff -r "$T/tree" "$T/tree2"

h fs ls "$id" /home/agentuity/tree
check fs_ls "want a/ and b/" test "$(sort "$T/o" | tr '\n' ' ')" = "a/ b/ "
h fs ls "$id" /home/agentuity/tree/b -l
check fs_ls_long "want big.bin with its size and mode" \
	test "$(grep big.bin "$T/o" | grep -c '100000')" = 1
h fs ls "$id" /home/agentuity/tree/a --json
check fs_ls_json "want 1.txt of 4 bytes" \
	test "$(j '[d.files[0].path, d.files[0].size]')" = '["1.txt",4]'

h fs mkdir "$id" /home/agentuity/m/n/o
check fs_mkdir_needs_p "want status 1 without -p, got $cli_s" test "$cli_s" = 1
h fs mkdir "$id" /home/agentuity/m/n/o -p
h fs ls "$id" /home/agentuity/m/n
check fs_mkdir_p "want o/" test "$(cat "$T/o")" = o/

h fs rm "$id" /home/agentuity/new/dir/f.bin
h fs cp "$id:/home/agentuity/new/dir/f.bin" "$T/gone.bin"
check fs_rm "the file is still readable (status $cli_s)" test "$cli_s" = 1 -a ! -e "$T/gone.bin"

h fs rmdir "$id" /home/agentuity/tree
check fs_rmdir_needs_r "want status 1 for a full directory, got $cli_s" test "$cli_s" = 1
h fs rmdir "$id" /home/agentuity/tree -r
h fs ls "$id" /home/agentuity/tree
check fs_rmdir_r "the directory is still listed (status $cli_s)" test "$cli_s" = 1

# Archives.
h fs download "$id" "$T/m.tar.gz" --path /home/agentuity/m
check fs_download "want an archive holding ./n/o/" test "$(tar -tzf "$T/m.tar.gz" 2>/dev/null | grep -c 'n/o/$')" = 1
h fs upload "$id" "$T/m.tar.gz" --path /home/agentuity/up
h fs ls "$id" /home/agentuity/up/n
check fs_upload "want o/ under up/n (status $cli_s)" test "$(cat "$T/o")" = o/

# Environment.
h env "$id" FOO=bar BAZ=qux
check env_set "want FOO=bar listed" test "$(grep -c '^FOO=bar$' "$T/o")" = 1
h exec "$id" -- sh -c 'echo "$FOO-$BAZ"'
check env_seen "want bar-qux, got '$(cat "$T/o")'" test "$(cat "$T/o")" = bar-qux
h env "$id" -d FOO --json
check env_delete "FOO must be gone, BAZ kept" \
	test "$(j '[d.env.FOO, d.env.BAZ]')" = '[null,"qux"]'

# Jobs.
h job create "$id" -- sh -c 'sleep 120'
job=$(cat "$T/o")
case "$job" in job_*) pass job_create ;; *) fail job_create "no job id" ;; esac
h job list "$id" --json
check job_list "the job is not listed" test "$(j 'd.jobs.map((x) => x.jobId).join("\n")' | grep -c "^$job$")" = 1
h job get "$id" "$job" --json
check job_get "want running" test "$(j d.status)" = running
h job destroy "$id" "$job" --force --json
check job_destroy "want cancelled" test "$(j d.status)" = cancelled
h job get "$id" job_nope
check job_get_unknown "want status 1 and JOB_NOT_FOUND" test "$cli_s" = 1 -a "$(grep -c JOB_NOT_FOUND "$T/e")" = 1

h execution list "$id" --json
n=$(j d.executions.length)
check execution_list "want 3 or more executions, got '$n'" test "${n:-0}" -ge 3
eid=$(j 'd.executions.filter((x) => x.exitCode === 4)[0].executionId')
h execution get "$eid"
check execution_get "want exit code 4 in the fields" test "$(grep -c '^exit code *4$' "$T/o")" = 1

h events "$id" --json
check events "want a create event first" test "$(j 'd.events[0].type')" = create
h events "$id" --reverse --limit 1 --json
check events_reverse "want one event, not create" \
	test "$(j d.events.length)" = 1 -a "$(j 'd.events[0].type')" != create

h runtime list --json
check runtime_list_json "python:3.13 missing" test "$(j 'd.runtimes.map((x) => x.name).join("\n")' | grep -c '^python:3.13$')" = 1
h list --json
check list_json "the sandbox is not listed" test "$(j 'd.sandboxes.map((x) => x.sandboxId).join("\n")' | grep -c "^$id$")" = 1
h get "$id"
check get "want status idle and name cli-e2e" \
	test "$(grep -c '^status *idle$' "$T/o")" = 1 -a "$(grep -c '^name *cli-e2e$' "$T/o")" = 1

h exec "$id" -- sh -c 'echo kept-over-pause > /root/pause-mark'
h pause "$id" --json
check pause_json "want status paused" test "$cli_s" = 0 -a "$(j d.status)" = paused
h get "$id" --json
check get_paused "want status paused" test "$(j d.status)" = paused
h resume "$id"
check resume "status $cli_s" test "$cli_s" = 0
h exec "$id" -- cat /root/pause-mark
check file_kept_over_pause "want kept-over-pause, got status $cli_s" \
	test "$cli_s" = 0 -a "$(cat "$T/o")" = kept-over-pause
h resume "$id"
check resume_not_paused "want status 1 and INVALID_STATE" \
	test "$cli_s" = 1 -a "$(grep -c INVALID_STATE "$T/e")" = 1

h checkpoint create "$id" cli-ckpt --json
check checkpoint_create "want name cli-ckpt and a ckpt_ id" \
	test "$cli_s" = 0 -a "$(j d.name)" = cli-ckpt -a "$(j 'd.id.slice(0, 5)')" = ckpt_
h exec "$id" -- rm /root/pause-mark
h checkpoint list "$id" --json
check checkpoint_list "want one checkpoint" test "$(j 'd.checkpoints.length')" = 1
h checkpoint restore "$id" cli-ckpt
check checkpoint_restore_by_name "status $cli_s" test "$cli_s" = 0
h exec "$id" -- cat /root/pause-mark
check checkpoint_brings_file_back "want kept-over-pause, got status $cli_s" \
	test "$cli_s" = 0 -a "$(cat "$T/o")" = kept-over-pause
h checkpoint delete "$id" cli-ckpt --confirm
check checkpoint_delete "status $cli_s" test "$cli_s" = 0

# Snapshots through the CLI: one taken from the sandbox, one built from a
# build file; sandboxes from each see their files.
h exec "$id" -- sh -c 'echo snap-mark > /root/snap-mark'
h snapshot create "$id" --name cli-snap --tag one --json
snap=$(j d.snapshotId)
check snapshot_create "want an snp_ id, status $cli_s" test "$cli_s" = 0 -a "${snap#snp_}" != "$snap"
h run --snapshot cli-snap:one -- cat /root/snap-mark
check snapshot_run_from "want snap-mark, got status $cli_s" test "$cli_s" = 0 -a "$(cat "$T/o")" = snap-mark
h snapshot list --json
check snapshot_list_has_it "want $snap listed" test "$(j "d.snapshots.some((s) => s.snapshotId === '$snap')")" = true
h snapshot tag "$snap" stable --json
check snapshot_tag "want tag stable" test "$(j d.tag)" = stable
h snapshot delete "$snap" --confirm
check snapshot_delete "status $cli_s" test "$cli_s" = 0
mkdir -p "$T/build/src"
echo 'from the build' >"$T/build/src/hello.txt"
echo 'left out' >"$T/build/src/skip.test.txt"
cat >"$T/build/agentuity-snapshot.yaml" <<'YAML'
version: 1
runtime: base:latest
name: cli-built
files:
  - src/**
  - "!**/*.test.txt"
env:
  GREETING: ${WHO}
YAML
h snapshot build "$T/build" --env WHO=husk --tag v1 --json
check snapshot_build "want a built snapshot, got status $cli_s" test "$cli_s" = 0 -a "$(j d.name)" = cli-built
h run --snapshot cli-built:v1 -- sh -c 'cat src/hello.txt; ls src; echo "$GREETING"'
check snapshot_build_run "want the file, no excluded one, and the env; got '$(tr '\n' ' ' <"$T/o")'" \
	test "$(tr '\n' ' ' <"$T/o")" = "from the build hello.txt husk "
h snapshot build "$T/build" --env WHO=husk --tag v1
check snapshot_build_unchanged "want status 0 and 'unchanged', got $cli_s" \
	test "$cli_s" = 0 -a "$(grep -ci unchanged "$T/o" "$T/e" | awk -F: '{ s += $NF } END { print s }')" -ge 1

h delete "$id" --confirm
check delete "status $cli_s" test "$cli_s" = 0 -a "$(cat "$T/o")" = "deleted $id"
h exec "$id" -- true
check exec_after_delete "want status 1 and SANDBOX_TERMINATED" \
	test "$cli_s" = 1 -a "$(grep -c SANDBOX_TERMINATED "$T/e")" = 1
h get "$id" --json
check get_after_delete "want status deleted" test "$(j d.status)" = deleted

if grep -q "ERROR: AddressSanitizer\|runtime error:" "$T/cli.allerr"; then
	fail cli_sanitizers "a sanitizer report from husk-san:"
	grep -A 20 "ERROR: AddressSanitizer\|runtime error:" "$T/cli.allerr" | head -n 40
else
	pass cli_sanitizers
fi
