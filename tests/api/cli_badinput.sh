#!/bin/sh
# The husk CLI (ASan build) against bad input and huskd's errors, on the
# host: no sandbox is started, so nothing here needs KVM. Prints PASS/FAIL
# cli_badinput/NAME lines. Run by badinput.sh.
set -u
port=18373
. "$(dirname "$0")/lib.sh"

cli_bin="$top/build/bin/husk-san"
rc=0
: >"$T/cli.allerr"

# huskd with a Unix socket too (lib.sh's start_huskd has none).
HUSK_API_KEY=$key "$top/build/bin/huskd-san" --port "$port" --unix "$T/sock" --state "$T/state" \
	--images "$top/build/images" --vmm "$top/build/bin/husk-vmm" >>"$T/huskd.log" 2>&1 &
pid=$!
i=0
while [ $i -lt 100 ] && ! grep -q listening "$T/huskd.log" 2>/dev/null; do
	sleep 0.1
	i=$((i + 1))
done
if ! grep -q listening "$T/huskd.log"; then
	echo "FAIL cli_badinput/huskd_starts: huskd did not start"
	cat "$T/huskd.log"
	exit 1
fi

# h ARGS...: husk against that huskd; stdout in $T/o, stderr in $T/e; its status.
h() {
	HUSK_URL=http://127.0.0.1:$port HUSK_API_KEY=$key "$cli_bin" "$@" >"$T/o" 2>"$T/e"
	cli_s=$?
	cat "$T/e" >>"$T/cli.allerr"
	return $cli_s
}
# expect NAME STATUS TEXT: the last h ended with STATUS and its stderr has TEXT.
expect() {
	if [ "$cli_s" = "$2" ] && grep -qF -- "$3" "$T/e"; then
		echo "PASS cli_badinput/$1"
	else
		echo "FAIL cli_badinput/$1: want status $2 and '$3' on stderr; got status $cli_s:"
		head -c 600 "$T/e"
		rc=1
	fi
}
# check NAME WHY CONDITION...: PASS if the condition (a command) holds.
check() {
	n=$1
	why=$2
	shift 2
	if "$@"; then
		echo "PASS cli_badinput/$n"
	else
		echo "FAIL cli_badinput/$n: $why (status $cli_s)"
		head -c 600 "$T/e"
		rc=1
	fi
}

# Usage errors: status 2, saying what is wrong.
h
expect no_command 2 "give a husk command"
h frobnicate
expect unknown_command 2 "unknown command 'frobnicate'"
h get
expect get_missing_id 2 "missing ID"
# husk ssh: a command as one string (run by sh -c, as the reference's), --show sends nothing.
h ssh sbx_x 'ls -la /tmp' --show
check ssh_show "want the request and its REQUEST frame's JSON on stdout" \
	test "$cli_s" = 0 -a "$(grep -c '^POST http://127.0.0.1:.*/sandbox/sbx_x/shell$' "$T/o")" = 1 -a \
	"$(grep -c '"command":\["/bin/sh","-c","ls -la /tmp"\]' "$T/o")" = 1
h ssh sbx_x 'ls' -- ls
expect ssh_string_and_dashes 2 "as one string or after '--', not both"
h sb get
expect sb_get_missing_id 2 "missing ID"
h fs cp onlyone
expect fs_cp_missing_dst 2 "missing DST"
h run --memory lots -- true
expect run_bad_memory 2 "--memory 'lots' is not a size"
h run --memory '' -- true
expect run_empty_memory 2 "--memory '' is not a size"
h create --cpu 5x
expect create_bad_cpu 2 "--cpu '5x' is not a CPU amount"
h run --timeout 5 -- true
expect run_bad_timeout 2 "--timeout '5' is not a duration"
h exec sbx_x --timeout 1y -- true
expect exec_bad_timeout 2 "--timeout '1y' is not a duration"
h exec sbx_x echo hi
expect exec_without_dashes 2 "put the command after '--': husk exec sbx_x -- echo"
h exec sbx_x ls -l
expect exec_option_without_dashes 2 "go after '--'"
# "--" alone asks for an imported image's own command: huskd answers (no such sandbox here).
h exec sbx_x --
expect exec_empty_command 1 "sbx_x not found"
h run
expect run_no_command 2 "missing the command"
h list --frob
expect unknown_option 2 "unknown option '--frob'"
h list --limit 99999999999999999999999
expect list_huge_limit 2 "--limit '99999999999999999999999' is not a whole number"
h list --limit -3
expect list_negative_limit 2 "--limit '-3' is not a whole number"
h list --status weird
expect list_bad_status 2 "--status 'weird' is not one of"
h create --port 80
expect create_low_port 2 "--port 80"
h create --url-token
expect create_url_token_needs_port 2 "--url-token guards --port's url"
h create --metadata '[1]'
expect create_bad_metadata 2 "--metadata must be a JSON object"
h run --env NOEQUALS -- true
expect run_bad_env 2 "--env 'NOEQUALS' must be KEY=VALUE"
h run --file nosuchcolon -- true
expect run_bad_file 2 "must be SANDBOX_PATH:LOCAL_PATH"
h run --file /x:/nonexistent/file -- true
expect run_missing_file 2 "cannot read '/nonexistent/file'"
h env sbx_x "$(printf 'K=\377')"
expect env_not_utf8 2 "not valid UTF-8"
h fs cp a b
expect fs_cp_two_local 2 "exactly one of SRC and DST"
h fs cp sbx_a:/x sbx_b:/y
expect fs_cp_two_remote 2 "exactly one of SRC and DST"
h snapshot tag snp_x
expect snapshot_tag_nothing 2 "give either a TAG or --clear"
h --url ftp://host list
expect bad_url 2 "is not a huskd URL"
h --url http://127.0.0.1:99999 list
expect bad_port 2 "port 1-65535"
h run --help
check help_exit_0 "want usage on stdout, status 0" test "$cli_s" = 0 -a "$(grep -c '^usage: husk run' "$T/o")" = 1

# huskd's and the network's errors: status 1 with the message.
HUSK_API_KEY=$key "$cli_bin" --url http://127.0.0.1:1 list >"$T/o" 2>"$T/e"
cli_s=$?
expect unreachable 1 "cannot reach huskd at http://127.0.0.1:1"
expect unreachable_hint 1 "make run"
h --api-key wrong list
expect wrong_key 1 "(UNAUTHORIZED)"
h get sbx_nope
expect unknown_sandbox 1 "sandbox sbx_nope not found (SANDBOX_NOT_FOUND)"
h exec sbx_nope -- true
expect exec_unknown_sandbox 1 "(SANDBOX_NOT_FOUND)"
h fs ls sbx_nope
expect fs_unknown_sandbox 1 "sbx_nope"
h execution get exec_nope
expect unknown_execution 1 "(EXECUTION_NOT_FOUND)"
# Pause and resume: huskd's 501 while it has none, its 404 once it has.
for verb in pause resume; do
	h $verb sbx_nope
	check "${verb}_unknown" "want status 1 and huskd's NOT_IMPLEMENTED or SANDBOX_NOT_FOUND" \
		test "$cli_s" = 1 -a "$(grep -c '(NOT_IMPLEMENTED)$\|(SANDBOX_NOT_FOUND)$' "$T/e")" = 1
done
h snapshot list --json
if [ "$cli_s" = 0 ]; then
	check snapshot_list "want a snapshots array" test "$(jq '.snapshots | type' "$T/o")" = '"array"'
else
	expect snapshot_list 1 "(NOT_IMPLEMENTED)"
fi
h checkpoint create sbx_nope first
check checkpoint_create_unknown "want status 1 and NOT_IMPLEMENTED or SANDBOX_NOT_FOUND" \
	test "$cli_s" = 1 -a "$(grep -c '(NOT_IMPLEMENTED)$\|(SANDBOX_NOT_FOUND)$' "$T/e")" = 1
h stats --start nonsense
expect stats_bad_start 1 "husk: "
# Whether or not this huskd serves stats: JSON with the counts, or its message.
h stats --json
if [ "$cli_s" = 0 ]; then
	check stats_json "want services.sandbox.totalActive" \
		test "$(jq '.services.sandbox.totalActive | type' "$T/o")" = '"number"'
else
	expect stats_json 1 "husk: "
fi
h get "$(head -c 70000 /dev/zero | tr '\0' a)"
check huge_id "want status 1 and a message" test "$cli_s" = 1 -a -s "$T/e"
h get ''
check empty_id "want status 1 or 2 and a message" test "$cli_s" -ge 1 -a "$cli_s" -le 2 -a -s "$T/e"

# The key file: the first line that is not a comment.
mkdir -p "$T/keys"
printf '# a comment\n\n%s\nsecond\n' "$key" >"$T/keys/api-keys"
HUSK_STATE=$T/keys HUSK_URL=http://127.0.0.1:$port "$cli_bin" list >"$T/o" 2>"$T/e"
cli_s=$?
check key_from_state_file "want status 0 with the key from \$HUSK_STATE/api-keys" test "$cli_s" = 0
HUSK_API_KEY="wrong,$key" HUSK_URL=http://127.0.0.1:$port "$cli_bin" list >"$T/o" 2>"$T/e"
cli_s=$?
expect key_list_uses_first 1 "(UNAUTHORIZED)"

# --json: what is printed parses.
h list --json
check list_json "want {sandboxes: [], total: 0}" test "$(jq -c '[.sandboxes, .total]' "$T/o")" = '[[],0]'
h runtime list --json
check runtime_list_json "want python:3.13 among the runtimes" \
	test "$(jq -r '.runtimes[].name' "$T/o" | grep -c '^python:3.13$')" = 1
h runtime list
check runtime_list_table "want a NAME column and python:3.13" \
	test "$(grep -c '^NAME ' "$T/o")" = 1 -a "$(grep -c '^python:3.13 ' "$T/o")" = 1
h get sbx_nope --json
check json_error_no_stdout "want status 1, nothing on stdout" test "$cli_s" = 1 -a ! -s "$T/o"
HUSK_API_KEY=$key "$cli_bin" --url "unix:$T/sock" list --json >"$T/o" 2>"$T/e"
cli_s=$?
check unix_socket "want the list over the Unix socket" test "$cli_s" = 0 -a "$(jq .total "$T/o")" = 0

# snapshot generate is local; snapshot build reads what it made.
h snapshot generate
check snapshot_generate_yaml "want version: 1 and runtime: lines" \
	test "$cli_s" = 0 -a "$(grep -c '^version: 1$' "$T/o")" = 1 -a "$(grep -c '^runtime: ' "$T/o")" = 1
mkdir -p "$T/snap"
cp "$T/o" "$T/snap/agentuity-snapshot.yaml"
h snapshot generate --format json
check snapshot_generate_json "want version 1 and a runtime" \
	test "$(jq -c '[.version, (.runtime | type)]' "$T/o")" = '[1,"string"]'
cp "$T/o" "$T/snap/gen.json"
# --dry-run sends nothing: a huskd that cannot be reached does not matter.
h --url http://127.0.0.1:1 snapshot build "$T/snap" --dry-run --json
check snapshot_build_parses_generate "want the template's runtime, dependencies, env and metadata" \
	test "$cli_s" = 0 -a "$(jq -c '[.build.runtime, .finalize.dependencies, .finalize.env, .finalize.metadata]' "$T/o")" = \
	'["base:latest",["curl"],{"NODE_ENV":"production"},{"author":"team-name"}]'
yhash=$(jq -r .contentHash "$T/o")
h snapshot build "$T/snap" --file gen.json --dry-run --json
check snapshot_build_json_template "want the JSON template to give the YAML one's content hash" \
	test "$cli_s" = 0 -a "$(jq -r .contentHash "$T/o")" = "$yhash" -a "${#yhash}" = 64
# bad_build NAME FILE CONTENT TEXT: with CONTENT (printf %b) in FILE, build says TEXT, status 2.
bad_build() {
	printf '%b' "$3" >"$T/snap/$2"
	h snapshot build "$T/snap" --file "$2" --dry-run
	expect "$1" 2 "$4"
}
bad_build snapshot_build_yaml_error bad.yaml 'version: 1\nruntime: [base\nname: x\n' \
	"bad.yaml: line 3, column 5: did not find expected ',' or ']'"
bad_build snapshot_build_yaml_indent indent.yaml 'version: 1\n  runtime: x\n' \
	"indent.yaml: line 2, column 10: mapping values are not allowed"
bad_build snapshot_build_yaml_duplicate dup.yaml 'version: 1\nruntime: x\nruntime: y\n' \
	"dup.yaml: line 3, column 1: a second value for the key runtime"
bad_build snapshot_build_json_error bad.json '{"version": 1,\n "runtime": }\n' "bad.json: line 2"
bad_build snapshot_build_needs_env env.yaml 'version: 1\nruntime: base:latest\nenv:\n  SECRET: ${TOKEN} # from --env\n' \
	'the build file uses ${TOKEN}: give --env TOKEN=VALUE'
h snapshot build "$T/snap" --file env.yaml --dry-run --json --env 'TOKEN=a: b'
check snapshot_build_env_value "want env.SECRET to be 'a: b', one value" \
	test "$(jq -c .finalize.env "$T/o")" = '{"SECRET":"a: b"}'
bad_build snapshot_build_pattern_outside up.yaml 'version: 1\nruntime: x\nfiles: [../up]\n' \
	"file pattern '../up' must be relative to"

# Which files a build takes, and its content hash (--dry-run: nothing is sent).
g=$T/ctx
mkdir -p "$g/src/lib" "$g/node_modules/m" "$g/.git"
printf 'version: 1\nruntime: base:latest\nfiles:\n  - "*.js"\n  - src/**\n  - "!**/*.test.js"\n  - "!node_modules"\n' \
	>"$g/agentuity-snapshot.yaml"
for f in a.js a.test.js src/lib/b.js src/lib/b.test.js src/.env node_modules/m/i.js .git/x.js readme.md; do
	echo "$f" >"$g/$f"
done
ln -s /etc/passwd "$g/src/passwd"
chmod 755 "$g/src/lib/b.js"
h snapshot build "$g" --dry-run --json
check snapshot_build_selects "want a.js and src/lib/b.js only" \
	test "$cli_s" = 0 -a "$(jq -c '[.finalize.files[].path]' "$T/o")" = '["a.js","src/lib/b.js"]'
check snapshot_build_file_fields "want a.js's size, sha256, mode and type, and b.js's mode 0755" \
	test "$(jq -c '.finalize.files[0] | [.size, .sha256, .mode, .contentType]' "$T/o")" = \
	"[5,\"$(sha256sum "$g/a.js" | cut -c1-64)\",420,\"text/javascript\"]" -a \
	"$(jq '.finalize.files[1].mode' "$T/o")" = 493 -a "$(jq -c '[.finalize.sizeBytes, .finalize.fileCount]' "$T/o")" = '[18,2]'
check snapshot_build_symlink_said "want the symbolic link named as left out" grep -q "src/passwd is not a regular file" "$T/e"
h1=$(jq -r .contentHash "$T/o")
h snapshot build "$g" --dry-run --json
check snapshot_build_hash_stable "want the same hash for the same inputs" test "$(jq -r .contentHash "$T/o")" = "$h1"
echo changed >"$g/a.test.js"
h snapshot build "$g" --dry-run --json
check snapshot_build_hash_ignores_excluded "want the same hash after an excluded file changed" \
	test "$(jq -r .contentHash "$T/o")" = "$h1"
echo changed >"$g/a.js"
h snapshot build "$g" --dry-run --json
check snapshot_build_hash_changes "want another hash after a.js changed" test "$(jq -r .contentHash "$T/o")" != "$h1"
h2=$(jq -r .contentHash "$T/o")
h snapshot build "$g" --dry-run --json --metadata owner=me
check snapshot_build_hash_metadata "want another hash with --metadata" \
	test "$(jq -r .contentHash "$T/o")" != "$h2" -a "$(jq -c .finalize.metadata "$T/o")" = '{"owner":"me"}'
h snapshot build "$g" --dry-run
check snapshot_build_dry_run_text "want the files, the content hash and the request" \
	test "$cli_s" = 0 -a "$(grep -c "^content hash: $h2$" "$T/o")" = 1 -a \
	"$(grep -c '^POST /sandbox/snapshots/build$' "$T/o")" = 1 -a "$(grep -c '  src/lib/b.js  (text/javascript)$' "$T/o")" = 1

# The build, upload and finalize steps (API.md (38)-(40)) against a stand-in
# for huskd that records what it gets: huskd's own is not needed for them.
mkdir -p "$T/mock"
cat >"$T/mock/mock.js" <<'EOF'
const http = require('http'), fs = require('fs');
const dir = process.argv[2], seen = new Set();
const srv = http.createServer((req, res) => {
	const chunks = [];
	req.on('data', (c) => chunks.push(c));
	req.on('end', () => {
		const body = Buffer.concat(chunks), u = req.url, h = req.headers;
		const send = (code, j) => {
			res.writeHead(code, {'Content-Type': 'application/json'});
			res.end(JSON.stringify(j));
		};
		// A file that starts coming and never ends (husk fs cp --timeout).
		if (req.method === 'GET' && u.startsWith('/fs/sbx_hang')) {
			res.writeHead(200, {'Content-Type': 'application/octet-stream', 'Content-Length': '1000000'});
			res.write(Buffer.alloc(4096, 120));
			return;
		}
		fs.appendFileSync(dir + '/log', `${req.method} ${u} auth=${h.authorization ? 'yes' : 'no'} ` +
			`type=${h['content-type'] || '-'} length=${h['content-length'] || '-'} got=${body.length}\n`);
		if (req.method === 'POST' && u === '/sandbox/snapshots/build') {
			const b = JSON.parse(body);
			fs.writeFileSync(dir + '/build.json', body);
			if (seen.has(b.contentHash) && !b.force)
				return send(200, {success: true, data: {unchanged: true, existingId: 'snp_old',
					existingName: b.name, existingTag: 'latest'}});
			seen.add(b.contentHash);
			const data = {snapshotId: 'snp_mock1'};
			if (fs.existsSync(dir + '/use-url'))
				data.uploadUrl = `http://127.0.0.1:${srv.address().port}/direct/upload?sig=a%2Fb`;
			return send(200, {success: true, data});
		}
		if (req.method === 'PUT' && (u === '/sandbox/snapshots/snp_mock1/upload' || u.startsWith('/direct/'))) {
			fs.writeFileSync(dir + '/upload.tgz', body);
			return send(200, {success: true, data: {success: true, scanned: false}});
		}
		if (req.method === 'POST' && u === '/sandbox/snapshots/snp_mock1/finalize') {
			if (fs.existsSync(dir + '/fail'))
				return send(500, {success: false, code: 'INTERNAL_ERROR', message: 'the build failed'});
			const b = JSON.parse(body);
			fs.writeFileSync(dir + '/finalize.json', body);
			return send(200, {success: true, data: {snapshotId: 'snp_mock1', name: 'built', tag: 'latest',
				sizeBytes: b.sizeBytes, fileCount: b.fileCount, createdAt: '2025-01-01T00:00:00Z'}});
		}
		send(404, {success: false, code: 'NOT_FOUND', message: `no route ${req.method} ${u}`});
	});
});
srv.listen(0, '127.0.0.1', () => fs.writeFileSync(dir + '/port', String(srv.address().port)));
EOF
node "$T/mock/mock.js" "$T/mock" >"$T/mock/out" 2>&1 &
mock=$!
trap 'kill $pid $mock 2>/dev/null; wait $pid $mock 2>/dev/null; rm -rf "$T"' EXIT
i=0
while [ $i -lt 100 ] && [ ! -s "$T/mock/port" ]; do
	sleep 0.1
	i=$((i + 1))
done
murl=http://127.0.0.1:$(cat "$T/mock/port" 2>/dev/null)
# fs cp --timeout bounds the whole copy: cut short, it leaves neither the file nor a part of it.
mkdir "$T/cp"
h --url "$murl" fs cp sbx_hang:/big "$T/cp/got" --timeout 1s
check fs_cp_timeout "want status 124, the reason, and nothing left in the target folder" \
	test "$cli_s" = 124 -a -z "$(ls -A "$T/cp")" -a "$(grep -c 'did not finish within its --timeout' "$T/e")" = 1
h --url "$murl" fs cp sbx_hang:/big "$T/cp/got" --timeout 0s
expect fs_cp_timeout_zero 2 "give a duration longer than 0"
h --url "$murl" snapshot build "$g" --tag v1
check snapshot_build_flow "want status 0 and the finished snapshot's fields" \
	test "$cli_s" = 0 -a "$(grep -c '^id  *snp_mock1$' "$T/o")" = 1 -a "$(grep -c '^files  *2$' "$T/o")" = 1
check snapshot_build_requests "want build, upload (gzip, with the key) and finalize, in order" \
	test "$(cut -d' ' -f1-4 "$T/mock/log" | tr '\n' '|')" = "POST /sandbox/snapshots/build auth=yes type=application/json|PUT /sandbox/snapshots/snp_mock1/upload auth=yes type=application/gzip|POST /sandbox/snapshots/snp_mock1/finalize auth=yes type=application/json|"
check snapshot_build_content_length "want the upload's Content-Length to be the archive's size" \
	test "$(sed -n 2p "$T/mock/log" | cut -d' ' -f5-)" = "length=$(wc -c <"$T/mock/upload.tgz") got=$(wc -c <"$T/mock/upload.tgz")"
check snapshot_build_body "want runtime, tag, the dry run's content hash and no force" \
	test "$(jq -c '[.runtime, .tag, .contentHash, .force]' "$T/mock/build.json")" = "[\"base:latest\",\"v1\",\"$h2\",null]"
check snapshot_build_archive "want the archive to hold what finalize lists" \
	test "$(tar -tzf "$T/mock/upload.tgz" | tr '\n' ' ')" = "a.js src/lib/b.js " -a \
	"$(jq -c '[.files[].path]' "$T/mock/finalize.json")" = '["a.js","src/lib/b.js"]'
check snapshot_build_progress "want progress on stderr" grep -q "^husk: uploading .* (tar.gz of 2 files)$" "$T/e"
h --url "$murl" snapshot build "$g" --json
check snapshot_build_unchanged "want status 0 and unchanged: true for the same content" \
	test "$cli_s" = 0 -a "$(jq -c '[.unchanged, .existingId]' "$T/o")" = '[true,"snp_old"]'
h --url "$murl" snapshot build "$g"
check snapshot_build_unchanged_text "want the existing snapshot named" \
	test "$cli_s" = 0 -a "$(grep -c '^unchanged: snapshot snp_old' "$T/o")" = 1
: >"$T/mock/use-url"
h --url "$murl" snapshot build "$g" --force --json
check snapshot_build_upload_url "want force sent, and the archive PUT to uploadUrl without the key" \
	test "$cli_s" = 0 -a "$(jq .force "$T/mock/build.json")" = true -a \
	"$(grep -c '^PUT /direct/upload?sig=a%2Fb auth=no type=application/gzip' "$T/mock/log")" = 1 -a \
	"$(jq -r .snapshotId "$T/o")" = snp_mock1
: >"$T/mock/fail"
h --url "$murl" snapshot build "$g" --force
expect snapshot_build_finalize_fails 1 "build snp_mock1 is not finished"
kill $mock 2>/dev/null
wait $mock 2>/dev/null

if grep -q "ERROR: AddressSanitizer\|runtime error:" "$T/cli.allerr"; then
	echo "FAIL cli_badinput/sanitizers: a report from husk-san:"
	grep -A 20 "ERROR: AddressSanitizer\|runtime error:" "$T/cli.allerr" | head -n 40
	rc=1
else
	echo "PASS cli_badinput/sanitizers"
fi
stop_huskd cli_badinput/huskd_clean_exit || rc=1
exit $rc
