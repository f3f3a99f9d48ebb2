#!/bin/sh
# Every husk-vmm confined (issue H), on real KVM in the nested host: huskd
# (ASan) starts sandboxes, and this looks at their VMMs from outside, in
# /proc, as the issue's "done when" says - its own uid, no privilege, its
# own namespaces, a root holding only its own files, an empty environment -
# and tries one VMM's uid, in its jail, on another sandbox's files.
# Prints PASS/FAIL jail/NAME lines.
set -u
port=8793
suite=jail
. "$(dirname "$0")/lib.sh"
rc=0

field() { sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status"; }
created() { sed -n 's/.*"sandboxId": *"\([^"]*\)".*/\1/p' "$T/o" | head -n 1; }

# (a resolver for networked sandboxes; a documentation address: nothing is asked here)
# (disk limits: the state folder is on tmpfs here, so huskd says it cannot apply them)
# The nested host's disk is its memory: huskd's reserve stays small here.
# (debug: the VMM start's line says how each VMM joined its cgroup)
HUSKD_ARGS="--dns-upstream 203.0.113.53 --disk-rate 50Mi --min-free-disk 64Mi --log-level debug"
if ! start_huskd 1; then
	echo "FAIL jail/huskd_start: huskd did not start; its log:"
	tail -n 20 "$T/huskd.log"
	exit 1
fi

h create --json --runtime base:latest --idle-timeout 20m
a=$(created)
h create --json --runtime base:latest --network --idle-timeout 20m
b=$(created)
h exec "$a" -- echo up-a
ua=$(cat "$T/o")
h exec "$b" -- echo up-b
if [ "$ua" = up-a ] && [ "$(cat "$T/o")" = up-b ]; then
	pass jailed_sandboxes_run
else
	fail jailed_sandboxes_run "exec in two jailed sandboxes: '$ua', '$(cat "$T/o")' $(cat "$T/e")"
	tail -n 20 "$T/huskd.log"
	for d in "$T"/state/sandboxes/*; do tail -n 5 "$d/vmm.log"; done
fi
pa=$(vmm_pid "$a")
pb=$(vmm_pid "$b")
if [ -z "$pa" ] || [ -z "$pb" ]; then
	fail vmm_found "no husk-vmm process for $a or $b"
	stop_huskd jail/huskd_clean_exit
	exit 1
fi

# Credentials: a uid of its own (not root), no capability in any set, no way to gain one.
uida=$(field "$pa" Uid | awk '{print $1}')
uidb=$(field "$pb" Uid | awk '{print $1}')
if [ "$(field "$pa" Uid)" = "$uida	$uida	$uida	$uida" ] && [ "$uida" != 0 ] && [ "$uidb" != 0 ] &&
	[ "$uida" != "$uidb" ] && [ "$(field "$pa" Gid | awk '{print $1}')" = "$uida" ]; then
	pass own_uid
else
	fail own_uid "uids $uida and $uidb (Uid: $(field "$pa" Uid); Gid: $(field "$pa" Gid))"
fi
ok=1
for p in "$pa" "$pb"; do
	for c in CapInh CapPrm CapEff CapBnd CapAmb; do
		[ "$(field "$p" $c)" = 0000000000000000 ] || ok=0
	done
	[ "$(field "$p" NoNewPrivs)" = 1 ] || ok=0
	[ "$(field "$p" Seccomp)" = 2 ] || ok=0
	[ "$(field "$p" Groups)" = "" ] || ok=0
done
if [ $ok = 1 ]; then pass no_privilege; else
	fail no_privilege "$(grep -E '^(Cap|NoNewPrivs|Groups|Seccomp)' /proc/"$pa"/status | tr '\n' ' ')"
fi

# Every thread under a filter (each its role's, on top of what it inherited).
ok=1
for t in /proc/"$pa"/task/*; do
	[ "$(sed -n 's/^Seccomp:[[:space:]]*//p' "$t/status")" = 2 ] || { ok=0; echo "  $(cat "$t/comm"): $(grep Seccomp "$t/status" | tr '\n' ' ')"; }
done
if [ $ok = 1 ]; then pass every_thread_filtered; else fail every_thread_filtered "a thread of a's VMM runs unfiltered"; fi

# Its cgroup holds its memory: guest RAM and an allowance, no swap, a few hundred tasks.
cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/"$pa"/cgroup)
max=$(cat "$cg/memory.max" 2>/dev/null)
cur=$(cat "$cg/memory.current" 2>/dev/null)
if [ -n "$max" ] && [ "$max" != max ] && [ "$max" -ge $((256 << 20)) ] && [ "$max" -le $((512 << 20)) ] &&
	[ "$cur" -le "$max" ] && [ "$(cat "$cg/pids.max")" = 256 ] && [ "$(cat "$cg/memory.oom.group")" = 1 ]; then
	pass cgroup_holds_memory
else
	fail cgroup_holds_memory "$cg: memory.max '$max', current '$cur', pids.max '$(cat "$cg/pids.max" 2>&1)'"
fi
# It started there (clone3's CLONE_INTO_CGROUP), not moved in after: the kernel here has it,
# and a move waits on the cgroup lock on every start.
if grep -q "\[$a\] VMM start took .*(cloned into its cgroup)" "$T/huskd.log"; then
	pass vmm_cloned_into_cgroup
else
	fail vmm_cloned_into_cgroup "huskd's line: $(grep "\[$a\] VMM start took" "$T/huskd.log")"
fi
echo "  (measured) a's VMM: memory.current $((cur >> 20)) MiB of memory.max $((max >> 20)) MiB"

# Its disk share in proportion to its vCPUs (the kernel here weighs I/O:
# iocost); a disk limit where the state folder has no disk is refused aloud.
weight=$(cat "$cg/io.weight" 2>&1)
h exec "$a" -- nproc
if [ "$weight" = "default $(($(cat "$T/o") * 100))" ] &&
	grep -q 'is on no disk huskd can limit' "$T/huskd.log"; then
	pass cgroup_io_weight
else
	fail cgroup_io_weight "io.weight '$weight'; huskd's log: $(grep -c 'no disk huskd' "$T/huskd.log") warnings"
fi

# Namespaces: mount, pid, net, ipc, uts, cgroup of its own.
ok=1
for ns in mnt pid net ipc uts cgroup; do
	s=$(readlink /proc/self/ns/$ns)
	x=$(readlink /proc/"$pa"/ns/$ns)
	y=$(readlink /proc/"$pb"/ns/$ns)
	if [ -z "$x" ] || [ "$x" = "$s" ] || [ "$y" = "$s" ] || [ "$x" = "$y" ]; then
		ok=0
		echo "  $ns: huskd's $s, a's $x, b's $y"
	fi
done
if [ $ok = 1 ]; then pass own_namespaces; else fail own_namespaces "a namespace is shared"; fi
if [ "$(field "$pa" NSpid | awk '{print $NF}')" = 1 ]; then pass first_of_its_pids; else
	fail first_of_its_pids "NSpid: $(field "$pa" NSpid)"
fi

# Its environment is empty: no API key, nothing of huskd's.
if [ ! -s /proc/"$pa"/environ ] && [ ! -s /proc/"$pb"/environ ]; then pass empty_environment; else
	fail empty_environment "$(tr '\0' ' ' </proc/"$pa"/environ | head -c 200)"
fi

# Its root: the system's folders, its own folder, its images; not huskd's
# state, keys or database, not another sandbox.
r=/proc/$pa/root
extra=$(ls -A "$r" | grep -v -x -e bin -e sbin -e lib -e lib32 -e lib64 -e libx32 -e usr -e dev -e etc \
	-e "$(echo "$T" | cut -d/ -f2)" -e "$(echo "$top" | cut -d/ -f2)" | tr '\n' ' ')
if [ -d "$r$T/state/sandboxes/$a" ] && [ "$(ls -A "$r$T/state/sandboxes")" = "$a" ] &&
	[ "$(ls -A "$r$T/state")" = sandboxes ] && [ -z "$extra" ] && [ "$(ls -A "$r/dev" | tr '\n' ' ')" = "kvm null " ] &&
	[ ! -e "$r/proc/self" ] && [ -z "$(ls -A "$r/etc" 2>/dev/null | grep -v -x ld.so.cache)" ]; then
	pass root_holds_its_own_files
else
	fail root_holds_its_own_files "/: $(ls -A "$r" | tr '\n' ' '); state: $(ls -A "$r$T/state" 2>&1 | tr '\n' ' '); sandboxes: $(ls -A "$r$T/state/sandboxes" 2>&1 | tr '\n' ' '); dev: $(ls -A "$r/dev" | tr '\n' ' '); etc: $(ls -A "$r/etc" 2>&1 | tr '\n' ' ')"
fi
if [ -z "$(ls -A "/proc/$pb/root/etc" | grep -v -x -e ld.so.cache -e resolv.conf)" ] &&
	[ -s "/proc/$pb/root/etc/resolv.conf" ]; then
	pass networked_root_has_resolver
else
	fail networked_root_has_resolver "etc: $(ls -A "/proc/$pb/root/etc" | tr '\n' ' ')"
fi

# As a's VMM (its uid, its mount namespace): its own layer is there to
# write; b's layer, b's sockets and huskd's keys are not there at all, and
# b's files, seen through the host's tree, are closed to a's uid.
la=$T/state/sandboxes/$a
lb=$T/state/sandboxes/$b
as_a() { nsenter -t "$pa" -m -S "$uida" -G "$uida" "$@"; }
layer_a=$(ls "$la" | grep -m1 '\.qcow2$')
layer_b=$(ls "$lb" | grep -m1 '\.qcow2$')
if as_a sh -c "test -w '$la/$layer_a'" && ! as_a sh -c "test -e '$lb/$layer_b' || test -e '$lb/control.sock' || test -e '$T/state/api-keys' || test -e '$T/state/huskd.db'" &&
	! nsenter -S "$uida" -G "$uida" sh -c "cat '$lb/$layer_b' >/dev/null 2>&1 || test -w '$lb/control.sock'" &&
	sh -c "cat '$lb/$layer_b' >/dev/null"; then
	pass other_sandbox_closed
else
	fail other_sandbox_closed "a's uid in a's jail: own layer $layer_a writable? other's $layer_b seen?"
fi
# A syscall in a's jail that needs a capability fails.
if ! as_a sh -c 'hostname x 2>/dev/null || mount -t tmpfs t /tmp 2>/dev/null'; then pass no_admin_in_jail; else
	fail no_admin_in_jail "a's uid could change the hostname or mount"
fi

# Paused to disk and resumed: a new VMM in a new jail, the sandbox as it was.
h exec "$a" -- sh -c 'echo kept >/root/mark'
h pause "$a"
h exec "$a" -- cat /root/mark
if [ "$(cat "$T/o")" = kept ]; then pass resumed_in_a_new_jail; else
	fail resumed_in_a_new_jail "after pause and resume: '$(cat "$T/o")' $(cat "$T/e")"
fi
pa2=$(vmm_pid "$a")
if [ -n "$pa2" ] && [ "$(field "$pa2" NoNewPrivs)" = 1 ] && [ "$(field "$pa2" Uid | awk '{print $1}')" != 0 ]; then
	pass resumed_vmm_jailed
else
	fail resumed_vmm_jailed "pid '$pa2': $(grep -E '^(Uid|NoNewPrivs)' /proc/"$pa2"/status 2>&1 | tr '\n' ' ')"
fi

# huskd restarts: it adopts the jailed VMMs, which go on serving.
kill -KILL "$pid"
wait "$pid" 2>/dev/null
pid=
start_huskd 2
h exec "$b" -- echo again
if [ "$(cat "$T/o")" = again ]; then pass adopted_after_restart; else
	fail adopted_after_restart "exec after huskd's restart: '$(cat "$T/o")' $(cat "$T/e")"
fi

h destroy "$b"
# Children of one snapshot are machines of their own: a machine-id, host
# name and boot id each, not the parent's. The parent's host name is its id.
# (fields: machine-id, host name, boot id, /etc/hostname, /etc/hosts' 127.0.1.1 name)
ident='echo $(cat /etc/machine-id 2>/dev/null || echo none) $(cat /proc/sys/kernel/hostname) $(cat /proc/sys/kernel/random/boot_id) $(cat /etc/hostname) $(sed -n "s/^127.0.1.1[[:space:]]*//p" /etc/hosts)'
h exec "$a" -- sh -c "$ident"
id_a=$(cat "$T/o")
h snapshot create "$a" --name jail-snap --json
if [ "$cli_s" != 0 ]; then
	fail snapshot_children_own_identity "snapshot create: status $cli_s"
else
	id_1= id_2=
	h run --snapshot jail-snap -- sh -c "$ident" && id_1=$(cat "$T/o")
	h run --snapshot jail-snap -- sh -c "$ident" && id_2=$(cat "$T/o")
	# distinct N: field N differs in all three machines.
	distinct() {
		x=$(echo "$id_a" | cut -d' ' -f"$1") y=$(echo "$id_1" | cut -d' ' -f"$1")
		z=$(echo "$id_2" | cut -d' ' -f"$1")
		[ -n "$x" ] && [ -n "$y" ] && [ -n "$z" ] && [ "$x" != "$y" ] && [ "$x" != "$z" ] &&
			[ "$y" != "$z" ]
	}
	# etc_named: /etc/hostname and /etc/hosts say the host name too.
	etc_named() {
		n=$(echo "$1" | cut -d' ' -f2)
		[ "$(echo "$1" | cut -d' ' -f4-)" = "$n $n" ]
	}
	hex='[0-9a-f]\{32\} sbx-[a-z2-7]* [0-9a-f]\{8\}-[0-9a-f-]\{27\} .*'
	if echo "$id_1" | grep -qx "$hex" && echo "$id_2" | grep -qx "$hex" &&
		[ "$(echo "$id_a" | cut -d' ' -f2)" = "sbx-${a#sbx_}" ] &&
		distinct 1 && distinct 2 && distinct 3 && etc_named "$id_a" && etc_named "$id_1" &&
		etc_named "$id_2"; then
		pass snapshot_children_own_identity
	else
		fail snapshot_children_own_identity "parent '$id_a', children '$id_1' '$id_2' (last status $cli_s)"
	fi
fi
h destroy "$a"
[ $rc = 0 ] || { echo "--- huskd's log"; tail -n 30 "$T/huskd.log"; }
stop_huskd jail/huskd_clean_exit || rc=1
exit $rc
