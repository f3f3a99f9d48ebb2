#!/bin/sh
# Templates (issue J), on real KVM in the nested host, through huskd (ASan)
# and the CLI: the first create of a runtime and shape boots, and huskd makes
# that shape's template in the background (a hidden sandbox, never listed);
# later creates restore it, mapping its memory from one file. Children are
# isolated (boot id, machine id, host name, random bytes, a clock set; a
# sibling's file unseen), get their own env and files, pause and resume,
# can be snapshotted, and run on after the template's maker is gone. After a
# huskd restart the template is used again; with --templates off nothing is
# made. Pauses and snapshots seal the guest's memory (issue I, item 6): a
# sealed diff resumes over the template's file, a sealed snapshot restores
# but gets no memory file (with --seal off it does), and once the org's key
# is deleted neither a paused sandbox nor a sealed snapshot can be restored. Disks are
# sealed too (a sandbox's layers, its snapshots' disks): a text written in the guest is
# not in its layer as it is, and after the shred a snapshot whose disk was sealed cannot
# start. Warm VMMs (the second run): one is made after a create from the template, unseen
# by requests; the next create takes it (its id, a guest of its own, the create's env);
# a snapshot's child leaves one of the snapshot, its next child takes it; a stopping
# huskd kills the next one and removes its folder.
# Prints PASS/FAIL templates/NAME lines.
set -u
port=8796
suite=templates
. "$(dirname "$0")/lib.sh"
rc=0
# The nested host's disk is its memory: huskd's reserve stays small here. Creates restore the
# template themselves here; warm VMMs (the default) come with the second run.
HUSKD_ARGS="--min-free-disk 64Mi --warm-pool 0"
# Each diff pause here also compares every page, and fails on one that changed unrecorded.
export HUSKD_VERIFY_DIRTY=1

# wait_log PATTERN [N]: until the log holds N (1) lines matching PATTERN; a hang guard, not a time.
wait_log() {
	i=0
	while [ "$(grep -c "$1" "$T/huskd.log")" -lt "${2:-1}" ] && [ $i -lt 3000 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	[ "$(grep -c "$1" "$T/huskd.log")" -ge "${2:-1}" ]
}
new() {
	h create --memory 256Mi "$@" >/dev/null
	tail -n 1 "$T/o"
}
restored() { grep -q "\[$1\] created: .*restored from its runtime's template" "$T/huskd.log"; }

if ! start_huskd 1; then
	echo "FAIL templates/huskd_start: huskd did not start; its log:"
	tail -n 20 "$T/huskd.log"
	exit 1
fi
cold=$(new)
if h exec "$cold" -- true && ! restored "$cold"; then
	pass first_create_boots
else
	fail first_create_boots "exit $cli_s (sandbox ${cold:-none})"
	[ -z "$cold" ] || story "$cold"
fi
if wait_log "template of base:latest (256 MiB, 1 vCPUs) ready"; then
	pass template_made
else
	fail template_made "no template; the log: $(grep -i template "$T/huskd.log" | tail -n 3)"
fi
maker=$(sed -n 's/.*\[\(sbx_[a-z0-9]*\)\] making the template.*/\1/p' "$T/huskd.log" | head -n 1)
a=$(new)
b=$(new --env FOO=bar)
if restored "$a" && restored "$b" && h exec "$a" -- true; then
	pass children_restore_the_template
else
	fail children_restore_the_template "$(grep "created:" "$T/huskd.log" | tail -n 2)"
fi
# What each guest is: boot id, machine id, host name, 16 random bytes, the clock.
what='cat /proc/sys/kernel/random/boot_id /etc/machine-id; hostname; head -c 16 /dev/urandom | od -An -tx1 | tr -d " \n"; echo; date +%s'
h exec "$a" -- sh -c "$what" && cp "$T/o" "$T/wa"
h exec "$b" -- sh -c "$what" && cp "$T/o" "$T/wb"
now=$(date +%s)
if [ "$(wc -l <"$T/wa")" = 5 ] && [ "$(wc -l <"$T/wb")" = 5 ] &&
	[ -z "$(sed -n 1,4p "$T/wa" | grep -xFf - "$T/wb")" ] &&
	[ "$(sed -n 3p "$T/wa")" = "$(echo "$a" | tr _ -)" ] &&
	[ $((now - $(sed -n 5p "$T/wa"))) -lt 120 ] && [ $(($(sed -n 5p "$T/wb") - now)) -lt 120 ]; then
	pass children_isolated
else
	fail children_isolated "a: $(tr '\n' '|' <"$T/wa") b: $(tr '\n' '|' <"$T/wb") host clock $now"
	story "$a"
	story "$b"
fi
h exec "$a" -- sh -c 'echo mine > /home/agentuity/f && sync'
if h exec "$b" -- sh -c 'test ! -e /home/agentuity/f && echo "$FOO"' && [ "$(cat "$T/o")" = bar ]; then
	pass sibling_unseen_env_own
else
	fail sibling_unseen_env_own "exit $cli_s: $(cat "$T/o")"
fi
h list --json
if [ -n "$maker" ] && ! grep -q "$maker" "$T/o" && grep -q "$a" "$T/o" && ! h get "$maker" &&
	grep -q "not found" "$T/e"; then
	pass maker_hidden
else
	fail maker_hidden "maker '$maker'; get exit $cli_s"
fi
# The maker is gone (its record too); the children run on from the template's files.
if h pause "$a" && h exec "$a" -- cat /home/agentuity/f && [ "$(cat "$T/o")" = mine ]; then
	pass child_pauses_and_resumes
else
	fail child_pauses_and_resumes "exit $cli_s: $(cat "$T/o")"
fi
# A child's pause writes what differs from the template's memory (a diff over its file), a
# cold-booted sandbox's the whole guest: both after the same 8 MiB of random bytes in RAM.
fill='head -c 8M /dev/urandom >/dev/shm/r && sha256sum /dev/shm/r'
h exec "$b" -- sh -c "$fill" && cp "$T/o" "$T/sb"
# A text in the guest's RAM that a snapshot in the clear would hold as it is.
mark="husk-plain-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
h exec "$b" -- sh -c "echo $mark >/dev/shm/mark"
h exec "$cold" -- sh -c "$fill" && cp "$T/o" "$T/sc"
# The same on its disk: its layer (qcow2+LUKS under its own key) never holds it as it is.
dmark="husk-disk-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
if h exec "$b" -- sh -c "echo $dmark >/home/agentuity/dm && sync" &&
	grep -qa "$dmark" "$T/state/sandboxes/$b/layer.qcow2"; then
	fail disk_sealed_at_rest "the text is in $b's layer as it is"
elif [ "$cli_s" = 0 ] && od -An -c -j0 -N4 "$T/state/sandboxes/$b/layer.qcow2" | grep -q Q; then
	pass disk_sealed_at_rest
else
	fail disk_sealed_at_rest "exit $cli_s: $(cat "$T/e")"
fi
h pause "$b"
h pause "$cold"
sz() { stat -c %s "$T/state/sandboxes/$1/memory.snap" 2>/dev/null || echo 0; }
db=$(sz "$b")
fc=$(sz "$cold")
echo "  memory.snap: child (diff) $db bytes, cold-booted (full) $fc bytes"
if grep -q "\[$b\] paused in .*a diff over its memory file" "$T/huskd.log" &&
	! grep -q "\[$cold\] paused in .*a diff" "$T/huskd.log" && [ "$db" -gt 8000000 ] &&
	[ "$db" -lt "$fc" ]; then
	pass child_pause_is_a_diff
else
	fail child_pause_is_a_diff "diff $db, full $fc: $(grep "paused in" "$T/huskd.log" | tail -n 2)"
fi
# Header flags (vmm/snap/FORMAT.md): bit 0 a diff, bit 1 sealed.
flags() { od -An -tu4 -j16 -N4 "$T/state/sandboxes/$1/memory.snap" 2>/dev/null | tr -d ' '; }
fb=$(flags "$b")
fcold=$(flags "$cold")
if [ "$fb" = 3 ] && [ "$fcold" = 2 ] && ! grep -qa "$mark" "$T/state/sandboxes/$b/memory.snap"; then
	pass pauses_sealed
else
	fail pauses_sealed "flags: child $fb (want 3: a sealed diff), cold-booted $fcold (want 2)"
fi
if h exec "$b" -- sha256sum /dev/shm/r && cmp -s "$T/o" "$T/sb" &&
	grep -q "\[$b\] resumed from its snapshot over its memory file" "$T/huskd.log" &&
	h exec "$cold" -- sha256sum /dev/shm/r && cmp -s "$T/o" "$T/sc"; then
	pass diff_resumes_intact
else
	fail diff_resumes_intact "exit $cli_s: $(cat "$T/o") vs $(cat "$T/sb")"
fi
# Its next VMM was made once it paused (huskd --resume-ahead, on by default): restored under
# its own jail with the sealed diff's key, held; the exec's resume only set its vCPUs going.
if grep -q "\[$b\] resuming on its VMM made ahead" "$T/huskd.log" &&
	! grep -q "\[$b\] its VMM made ahead" "$T/huskd.log"; then
	pass resume_on_the_vmm_made_ahead
else
	fail resume_on_the_vmm_made_ahead "$(grep "\[$b\].*ahead" "$T/huskd.log" | tail -n 3)"
fi
h snapshot create "$a" --name tchild >/dev/null
c=$(new --snapshot tchild)
if h exec "$c" -- cat /home/agentuity/f && [ "$(cat "$T/o")" = mine ]; then
	pass snapshot_of_a_child
else
	fail snapshot_of_a_child "exit $cli_s: $(cat "$T/o") $(tail -n 3 "$T/huskd.log")"
fi
# Its memory is sealed: restored (lazily) by every sandbox, never written out as a memory file.
if grep -q "\[$c\] created: .*resumed from its memory$" "$T/huskd.log" && c2=$(new --snapshot tchild) &&
	grep -q "\[$c2\] created: .*resumed from its memory$" "$T/huskd.log" &&
	h exec "$c2" -- cat /home/agentuity/f && [ "$(cat "$T/o")" = mine ] &&
	! ls "$T"/state/snapshots/*/memory.raw >/dev/null 2>&1; then
	pass sealed_snapshot_no_memory_file
else
	fail sealed_snapshot_no_memory_file "exit $cli_s: $(grep "created:" "$T/huskd.log" | tail -n 2)"
fi
# Paused again (a diff again, over the same file) and left paused across the restart;
# the cold-booted one too, sealed, for the end of the second run.
h pause "$b"
h pause "$cold"
stop_huskd templates/huskd_clean_exit || rc=1

# A restart: the template is found again; the children are adopted, the paused one resumes
# over its memory file. Now without sealing: what was sealed still opens, and a snapshot's
# memory in the clear gets its memory file, which the next sandboxes map. And with a warm
# VMM kept ahead (--warm-pool 1), made after the first create from the template.
HUSKD_ARGS="$HUSKD_ARGS --seal off --warm-pool 1"
start_huskd 2 || fail restart "huskd did not start again"
d=$(new)
if restored "$d" && h exec "$d" -- true && h exec "$b" -- sha256sum /dev/shm/r &&
	cmp -s "$T/o" "$T/sb" &&
	[ "$(grep -c "\[$b\] resumed from its snapshot over its memory file" "$T/huskd.log")" -ge 2 ]; then
	pass used_after_restart
else
	fail used_after_restart "exit $cli_s: $(cat "$T/e" "$T/o"); $(grep "created:" "$T/huskd.log" | tail -n 1); $(grep "$b" "$T/huskd.log" | tail -n 6)"
fi
# Made without sealing: its disk is clear (what the check above would have found).
dmark2="husk-disk-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
if h exec "$d" -- sh -c "echo $dmark2 >/home/agentuity/g && sync" &&
	grep -qa "$dmark2" "$T/state/sandboxes/$d/layer.qcow2"; then
	pass disk_clear_with_seal_off
else
	fail disk_clear_with_seal_off "exit $cli_s: $(cat "$T/e")"
fi
# The warm VMM: a sandbox recorded nowhere (not listed, not found) until a create takes it;
# then it is that create's sandbox (its id), a guest of its own, with the create's env.
warm_id() { sed -n 's/.*\[\(sbx_[a-z0-9]*\)\] a warm VMM of base:latest (256 MiB, 1 vCPUs) is ready.*/\1/p' "$T/huskd.log" | sed -n "${1}p"; }
wait_log "a warm VMM of base:latest (256 MiB, 1 vCPUs) is ready"
w1=$(warm_id 1)
h list --json
if [ -n "$w1" ] && ! grep -q "$w1" "$T/o" && ! h get "$w1" && grep -q "not found" "$T/e" &&
	[ -d "$T/state/sandboxes/$w1" ]; then
	pass warm_vmm_unseen
else
	fail warm_vmm_unseen "warm VMM '$w1'; get exit $cli_s: $(cat "$T/e")"
fi
h exec "$d" -- sh -c "$what" && cp "$T/o" "$T/wd"
w=$(new --env FOO=warm)
h exec "$w" -- sh -c "$what" && cp "$T/o" "$T/ww"
now=$(date +%s)
if [ "$w" = "$w1" ] && grep -q "\[$w\] created: .*a warm VMM of its runtime's template" "$T/huskd.log" &&
	[ "$(wc -l <"$T/ww")" = 5 ] && [ -z "$(sed -n 1,4p "$T/wd" | grep -xFf - "$T/ww")" ] &&
	[ "$(sed -n 3p "$T/ww")" = "$(echo "$w" | tr _ -)" ] &&
	[ $((now - $(sed -n 5p "$T/ww"))) -lt 120 ] && h exec "$w" -- sh -c 'echo "$FOO"' &&
	[ "$(cat "$T/o")" = warm ]; then
	pass warm_vmm_taken
else
	fail warm_vmm_taken "created $w, warm $w1: $(grep "\[$w\]" "$T/huskd.log" | tail -n 4); d: $(tr '\n' '|' <"$T/wd") w: $(tr '\n' '|' <"$T/ww") host clock $now"
fi
# The next is made once one is taken; a huskd that stops kills it and removes its folder.
wait_log "a warm VMM of base:latest (256 MiB, 1 vCPUs) is ready" 2
w2=$(warm_id 2)
live() { [ -n "$1" ] && grep -qa . "/proc/$1/cmdline" 2>/dev/null; }
w2pid=$(cut -d' ' -f1 "$T/state/sandboxes/$w2/warm.pid" 2>/dev/null)
live "$w2pid" && w2live=yes || w2live=no
h snapshot create "$d" --name tdclear >/dev/null
h snapshot create "$a" --name tclear >/dev/null
c3=$(new --snapshot tclear)
# c3 leaves a warm VMM of tclear; a create with another disk size (0 is "the base's") takes none.
h get "$c3" --json
d3=$(grep -o '"disk": *"[0-9]*Mi"' "$T/o" | grep -o '[0-9]*Mi')
wsnap="a warm VMM of snapshot .* (256 MiB, 1 vCPUs) is ready"
if [ -n "$c3" ] && wait_log "snapshot .* has a memory file" && wait_log "$wsnap" &&
	c4=$(new --snapshot tclear --disk "$d3") &&
	grep -q "\[$c4\] created: .*resumed from its memory file" "$T/huskd.log" &&
	h exec "$c4" -- cat /home/agentuity/f && [ "$(cat "$T/o")" = mine ]; then
	pass snapshot_memory_file
else
	fail snapshot_memory_file "exit $cli_s (disk '$d3'): $(cat "$T/e") $(grep -i "memory file" "$T/huskd.log" | tail -n 2) $(grep "\[$c4\]" "$T/huskd.log" | tail -n 4)"
fi
# The next child of tclear takes the warm VMM: its id, the snapshot's disk, a guest of its own.
ws=$(sed -n "s/.*\[\(sbx_[a-z0-9]*\)\] $wsnap.*/\1/p" "$T/huskd.log" | head -n 1)
c6=$(new --snapshot tclear --env FOO=snap)
if [ -n "$ws" ] && [ "$c6" = "$ws" ] &&
	grep -q "\[$c6\] created: .*a warm VMM of its snapshot" "$T/huskd.log" &&
	h exec "$c6" -- sh -c 'cat /home/agentuity/f; echo "$FOO"; hostname' &&
	[ "$(tr '\n' ' ' <"$T/o")" = "mine snap $(echo "$c6" | tr _ -) " ]; then
	pass warm_vmm_of_a_snapshot_taken
else
	fail warm_vmm_of_a_snapshot_taken "created '$c6', warm '$ws': exit $cli_s: $(cat "$T/e" "$T/o") $(grep "\[$c6\]" "$T/huskd.log" | tail -n 4)"
fi
# Crypto-shredding: the org's key deleted, its sealed memory cannot be restored (cold paused
# sealed in the first run; tchild's memory is sealed), nor can a disk sealed in the first
# run (tclear's memory is clear, its disk is a's); what was made without sealing still can.
if h key shred-org local && ! h resume "$cold" && grep -q "has been deleted" "$T/e" &&
	! h create --memory 256Mi --snapshot tchild && grep -q "has been deleted" "$T/e"; then
	pass shredded_org_memory_unreadable
else
	fail shredded_org_memory_unreadable "exit $cli_s: $(cat "$T/e")"
fi
if ! h create --memory 256Mi --snapshot tclear && grep -q "encrypted disk.*has been deleted" "$T/e" &&
	c5=$(new --snapshot tdclear) && h exec "$c5" -- cat /home/agentuity/g &&
	[ "$(cat "$T/o")" = "$dmark2" ]; then
	pass shredded_org_disk_unreadable
else
	fail shredded_org_disk_unreadable "exit $cli_s: $(cat "$T/e" "$T/o")"
fi
stop_huskd templates/huskd_clean_exit_2 || rc=1
# Killed (SIGKILL) as huskd stopped: its exit is the event; the bound is a hang guard.
# (A zombie has an empty command line; the nested host has no pgrep.)
i=0
while live "$w2pid" && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
if [ -n "$w2" ] && [ "$w2" != "$w1" ] && [ ! -e "$T/state/sandboxes/$w2" ] &&
	[ "$w2live" = yes ] && ! live "$w2pid"; then
	pass warm_vmm_gone_at_stop
else
	fail warm_vmm_gone_at_stop "second warm VMM '$w2' (first '$w1', pid '$w2pid', live before the stop: $w2live): $(ls "$T/state/sandboxes/$w2" 2>&1 | head -n 3)"
fi
HUSKD_ARGS="$HUSKD_ARGS --templates off"
start_huskd 3 || fail restart "huskd did not start a third time"
e=$(new)
if h exec "$e" -- true && ! restored "$e"; then pass off_boots; else fail off_boots "exit $cli_s"; fi
stop_huskd templates/huskd_clean_exit_3 || rc=1
exit $rc
