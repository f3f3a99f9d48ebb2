#!/bin/sh
# Builds the runtime root file systems that sandboxes boot into. For each
# runtime STEM here (STEM.json: its catalog entry; STEM.packages: Debian
# packages on top of base.packages; STEM.build, if there: its suite and its
# steps beyond Debian's packages): a Debian tree made by mmdebstrap, set up
# for a sandbox, smoke-tested in a chroot, made into an ext4 file system and
# converted to husk's copy-on-write format with husk-img.
#
# Outputs, in OUTDIR: NAME.qcow2 (a hard link to the cache, or a symbolic
# link where the cache is on another file system), NAME.json (the catalog
# entry plus an "image" object: file, size, versions inside) and
# catalog.json (every entry, in the shape of the runtime list the API
# returns). NAME is the runtime name with ':' and '/' made '-'
# (python:3.13 -> python-3.13). README.md here describes them.
#
# Images are cached outside the clone ($HUSK_CACHE, default ~/.cache/husk,
# in runtimes/), keyed by a hash of everything that goes into them, so a
# build with nothing changed only links the cached files.
#
# usage: build.sh OUTDIR [RUNTIME...]
#   RUNTIME: a file name stem here (base, python, node, bun, ...) or a
#   runtime name (python:3.13); every runtime when none is given.
#   HUSK_IMG: the husk-img tool (default: build/bin/husk-img of this clone).
#   While it is not built the images stay raw ext4 files (NAME.raw).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out=${1:?usage: build.sh OUTDIR [RUNTIME...]}
shift
husk_img=${HUSK_IMG:-$top/build/bin/husk-img}
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

die() {
	echo "runtimes: $*" >&2
	exit 1
}

if [ "$(id -u)" != 0 ]; then
	die "building root file systems needs root (mmdebstrap, chroot, file owners); run as root or with sudo"
fi
for tool in mmdebstrap mkfs.ext4 e2fsck jq unshare flock sha256sum; do
	command -v "$tool" >/dev/null || die "$tool is missing; run 'make deps'"
done
if [ ! -f /usr/share/keyrings/debian-archive-trixie-stable.gpg ]; then
	die "the Debian trixie archive keys are missing; upgrade debian-archive-keyring" \
		"(apt-get install debian-archive-keyring: bookworm's 2023.3+deb12u1 and later have them)"
fi

cache=${HUSK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/husk}/runtimes
mkdir -p "$cache/logs" "$cache/debs" "$cache/npm" "$cache/tmp" "$out"
cache=$(cd "$cache" && pwd)
case $cache in
*[[:space:]]*) die "the cache path '$cache' has white space, which mmdebstrap's hooks cannot take; set HUSK_CACHE" ;;
esac
mmdebstrap_version=$(dpkg-query -W -f='${Version}' mmdebstrap)

[ -f "$here/base.packages" ] || die "$here/base.packages is missing"
# "STEM<tab>NAME" for each runtime (NAME.json here is STEM.json), read in one
# go: a cached build should take a small fraction of a second.
table=$(cd "$here" && jq -r '"\(input_filename | rtrimstr(".json"))\t\(.name)"' ./*.json |
	sed 's,^\./,,') || die "cannot read the runtime files $here/*.json"
all=$(echo "$table" | cut -f1)
name_of() {
	echo "$table" | awk -F'\t' -v s="$1" '$1 == s { print $2 }'
}

# The names of the runtimes asked for, as file name stems.
selected=""
if [ $# = 0 ]; then
	selected=$all
fi
for arg; do
	found=""
	for s in $all; do
		if [ "$arg" = "$s" ] || [ "$arg" = "$(name_of "$s")" ]; then
			found=$s
		fi
	done
	[ -n "$found" ] || die "no runtime '$arg' in $here; there are: $(echo "$all" | paste -sd' ' -)"
	selected="$selected $found"
done

# One build at a time per cache: they share the work area and the package cache.
exec 9>"$cache/.lock"
if ! flock -n 9; then
	echo "runtimes: waiting for another build using $cache to finish"
	flock 9
fi

# Mounts left under DIR by a build that was killed (mmdebstrap mounts /proc,
# /sys and /dev into the tree while it runs).
unmount_under() {
	awk -v d="$1/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r |
		while read -r m; do umount -l "$m" || true; done
}
unmount_under "$cache/tmp"
rm -rf --one-file-system "$cache/tmp" && mkdir -p "$cache/tmp"

name="" safe="" work="" step="" log=""
on_exit() {
	rc=$?
	if [ -n "$work" ] && [ -d "$work" ]; then
		unmount_under "$work"
		rm -rf --one-file-system "$work"
	fi
	if [ "$rc" = 130 ] || [ "$rc" = 143 ]; then
		[ -z "$step" ] || echo "runtime $name: stopped while $step; nothing was kept" >&2
	elif [ "$rc" != 0 ] && [ -n "$step" ]; then
		echo "runtime $name: failed while $step; the last lines of $log:" >&2
		tail -n 40 "$log" | sed 's/^/  | /' >&2
	fi
	if [ "$rc" != 0 ] && [ -n "$step" ]; then
		rm -f "$out/$safe.qcow2" "$out/$safe.raw" "$out/$safe.json" "$out/catalog.json"
	fi
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The package names in list files (one a line, '#' comments).
packages() {
	sed -e 's/#.*//' "$@" | tr -s ' \t' '\n' | sed '/^$/d' | paste -sd' ' -
}

# Checks a catalog entry has what the API's runtime list needs.
check_meta() {
	jq -e '(.id | type == "string" and startswith("srt_"))
		and (.name | type == "string" and test("^[a-z0-9][a-z0-9._-]*(:[a-z0-9._-]+)?$"))
		and (.description | type == "string")
		and (.tags | type == "array" and all(type == "string"))
		and (.requirements | type == "object")
		and (.requirements.networkEnabled | type == "boolean")
		and ([.requirements.memory, .requirements.cpu, .requirements.disk] | all(type == "string"))' \
		"$1" >/dev/null ||
		die "$1: needs id (srt_...), name, description, tags and requirements" \
			"(memory, cpu, disk strings and networkEnabled true/false)"
}

# A Kubernetes-style size (512Mi, 2Gi) in MiB.
mib() {
	case $1 in
	*Mi) echo "${1%Mi}" ;;
	*Gi) echo $((${1%Gi} * 1024)) ;;
	*) die "$name: cannot read the size '$1' (want NNNMi or NGi)" ;;
	esac
}

elapsed() {
	echo $(($(date +%s) - start))
}

# Starts a step: one progress line; the exit trap names the step on failure.
begin() {
	step=$1
	echo "runtime $name: $1 [$(elapsed) s]"
}

# Runs a command inside the tree with its own /proc, which goes away with it.
inroot() {
	unshare --mount --pid --fork --mount-proc="$root/proc" \
		chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/tmp/smoke-home LANG=C.UTF-8 TERM=dumb PYTHONDONTWRITEBYTECODE=1 "$@"
}

# check WANT COMMAND...: runs COMMAND in the tree; it must succeed and, when
# WANT is not empty, print WANT as its last line. Prints that last line.
check() {
	want=$1
	shift
	echo "smoke: $*" >>"$log"
	if ! inroot "$@" >"$work/smoke.out" 2>>"$log"; then
		cat "$work/smoke.out" >>"$log"
		echo "smoke test failed: '$*' exited with an error" >>"$log"
		return 1
	fi
	cat "$work/smoke.out" >>"$log"
	got=$(tail -n 1 "$work/smoke.out")
	if [ -n "$want" ] && [ "$got" != "$want" ]; then
		echo "smoke test failed: '$*' printed '$got', not '$want'" >>"$log"
		return 1
	fi
	printf '%s\n' "$got"
}

# version KEY VALUE: recorded in the image's catalog entry.
version() {
	printf '%s\t%s\n' "$1" "$2" >>"$work/versions"
}

# shellcheck source=images/runtimes/npm.sh
. "$here/npm.sh"

# python_smoke VERSION: python3 is that version (any with ""), pip and venv work.
python_smoke() {
	check 6 python3 -c 'print(sum([1,2,3]))' >/dev/null
	v=$(check "" python3 -c 'import platform; print(platform.python_version())')
	case $v in "$1"*) ;; *) echo "smoke test failed: python3 is $v, not $1" >>"$log" && return 1 ;; esac
	version python "$v"
	v=$(check "" pip3 --version)
	version pip "$(echo "$v" | cut -d' ' -f2)"
	check ok sh -c 'python3 -m venv /tmp/v && /tmp/v/bin/pip --version >/dev/null &&
		/tmp/v/bin/python -c "import sys; print(\"ok\" if sys.prefix == \"/tmp/v\" else sys.prefix)"' >/dev/null
}

node_smoke() {
	check 2 node -e 'console.log(1+1)' >/dev/null
	v=$(check "" node --version)
	version node "${v#v}"
	version npm "$(check "" npm --version)"
}

# agent_runtime PKG CMD BINPKG (for STEM.build): a coding agent's CLI, the
# npm package PKG giving the command CMD, over agent.packages. PKG brings its
# native binary in the package BINPKG of the same version: the newest
# version both have (a registry may have one before the other).
agent_runtime() {
	packages_also=agent
	agent_pkg=$1
	agent_cmd=$2
	agent_bin=$3
	rt_resolve() {
		agent_version=$({
			npm_latest "$agent_pkg" '*'
			npm_latest "$agent_bin" '*'
		} | sort -V | head -n 1)
		extra="$agent_pkg@$agent_version"
	}
	rt_install() {
		begin "$agent_pkg $agent_version from the npm registry"
		npm_global "$agent_pkg@$agent_version"
	}
	rt_smoke() {
		node_smoke
		python_smoke ""
		check ok sh -c 'git --version && rg --version && curl --version && cc --version &&
			make --version && echo ok' >/dev/null
		v=$(check "" "$agent_cmd" --version)
		case $v in *"$agent_version"*) ;; *)
			echo "smoke test failed: $agent_cmd --version says '$v', not $agent_version" >>"$log"
			return 1
			;;
		esac
		version "$agent_cmd" "$agent_version"
		version package "$agent_pkg@$agent_version"
	}
}

# What every sandbox expects of its root.
configure() {
	echo sandbox >"$root/etc/hostname"
	cat >"$root/etc/hosts" <<-'EOF'
		127.0.0.1	localhost
		127.0.1.1	sandbox
		::1		localhost ip6-localhost ip6-loopback
		ff02::1		ip6-allnodes
		ff02::2		ip6-allrouters
	EOF
	# mmdebstrap leaves the build host's resolver here.
	cat >"$root/etc/resolv.conf" <<-'EOF'
		# No resolver: the sandbox's network is off. husk writes this file
		# when it starts a sandbox with its network on.
	EOF
	echo LANG=C.UTF-8 >"$root/etc/default/locale"
	if [ -e "$root/usr/bin/pip3" ]; then
		# The sandbox is the user's own machine: pip installs into the
		# system Python (PEP 668 would refuse), as root, without warnings.
		cat >"$root/etc/pip.conf" <<-'EOF'
			[global]
			break-system-packages = true
			root-user-action = ignore
		EOF
	fi
	mkdir -p "$root/tmp" "$root/var/tmp" "$root/run/lock" "$root/root"
	chmod 1777 "$root/tmp" "$root/var/tmp"
	chmod 0755 "$root/run"
	chmod 0700 "$root/root"
	# Caches and logs of the build: apt-get update fetches the lists again.
	rm -rf "$root/var/lib/apt/lists/"* "$root/var/log/apt/"*
	rm -f "$root/var/cache/apt/"*.bin "$root/var/cache/apt/archives/"*.deb \
		"$root/var/cache/debconf/"*-old "$root/var/lib/dpkg/"*-old \
		"$root/var/log/dpkg.log" "$root/var/log/alternatives.log"
	mkdir -p "$root/var/lib/apt/lists/partial" "$root/var/cache/apt/archives/partial"
}

# A quick test of what the runtime is for; a failure fails the build.
smoke() {
	mkdir -p "$root/tmp/smoke-home"
	# shellcheck disable=SC2016
	check "bash 5" bash -c 'echo bash ${BASH_VERSINFO[0]}' >/dev/null
	check ok sh -c 'test -s /etc/ssl/certs/ca-certificates.crt && echo ok' >/dev/null
	check ok sh -c 'apt-get --version >/dev/null && ps -p 1 -o pid= >/dev/null && echo ok' >/dev/null
	version debian "$(cat "$root/etc/debian_version")"
	if command -v rt_smoke >/dev/null; then
		rt_smoke
	fi
	find "$root/tmp" "$root/var/tmp" -mindepth 1 -delete
}

# The tree as an ext4 file system: content plus 30% and 128 MiB, in 64 MiB
# steps. 4 KiB blocks whatever the size (mke2fs would pick 1 KiB for a small
# one), an inode per 8 KiB (node_modules trees are many small files), no
# blocks reserved for root (it is the only user). resize_inode and flex_bg
# (defaults) let the guest grow it online to the sandbox's disk size.
make_fs() {
	used=$(du -s -x -B1M "$root" | cut -f1)
	size=$(((used * 13 / 10 + 128 + 63) / 64 * 64))
	want=$(mib "$(jq -r .requirements.disk "$meta")")
	if [ "$size" -gt "$want" ]; then
		die "$name: the file system needs $size MiB but $meta asks for a ${want} MiB disk; raise requirements.disk"
	fi
	raw=$work/$safe.raw
	truncate -s "${size}M" "$raw"
	uuid=$(echo "$name $key" | sha256sum | sed -E 's/^(.{8})(.{4})(.{4})(.{4})(.{12}).*/\1-\2-\3-\4-\5/')
	# Inode tables and journal zeroed now (sparse, so free): otherwise every
	# sandbox would zero them into its own layer at first mount.
	mkfs.ext4 -F -b 4096 -I 256 -i 8192 -m 0 -L "$(echo "$safe" | cut -c1-16)" -U "$uuid" \
		-E hash_seed="$uuid",lazy_itable_init=0,lazy_journal_init=0 -d "$root" "$raw" >>"$log" 2>&1
	e2fsck -fn "$raw" >>"$log" 2>&1
	echo "runtime $name: ext4 file system of $size MiB, $used MiB used [$(elapsed) s]"
}

# Links the cached image (format $fmt) and its entry into OUTDIR.
install_outputs() {
	dst=$out/$safe.$fmt
	if [ "$(stat -L -c %d:%i "$dst" 2>/dev/null)" != "$(stat -c %d:%i "$entry.$fmt")" ]; then
		rm -f "$dst.tmp"
		ln "$entry.$fmt" "$dst.tmp" 2>/dev/null || ln -s "$entry.$fmt" "$dst.tmp"
		mv -f "$dst.tmp" "$dst"
	fi
	for f in qcow2 raw; do
		[ "$f" = "$fmt" ] || rm -f "$out/$safe.$f"
	done
	cp "$entry.json" "$out/$safe.json.tmp"
	mv -f "$out/$safe.json.tmp" "$out/$safe.json"
	touch "$entry.json"
}

# The catalog entry of a cache entry: NAME.json plus the image's facts.
write_entry() {
	fmt=$1
	jq --arg file "$safe.$fmt" --arg fmt "$fmt" --arg key "$key" \
		--argjson size "$(stat -c %s "$entry.$fmt")" \
		--argjson vsize "$2" --argjson packages "$3" --argjson versions "$4" \
		--arg built "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
		'. + {image: {file: $file, format: $fmt, size: $size, virtualSize: $vsize,
			filesystem: "ext4", key: $key, built: $built, debianPackages: $packages,
			versions: $versions}}' "$meta" >"$entry.json.tmp"
	mv "$entry.json.tmp" "$entry.json"
}

# A cached raw image, once husk-img exists: converted, no rebuild.
convert_cached() {
	step="converting the cached raw image"
	log=$cache/logs/$safe.log
	start=$(date +%s)
	echo "runtime $name: converting the cached raw image to qcow2 with husk-img"
	"$husk_img" convert -f raw -O qcow2 "$entry.raw" "$entry.qcow2.tmp" >>"$log" 2>&1
	mv "$entry.qcow2.tmp" "$entry.qcow2"
	jq --arg file "$safe.qcow2" --argjson size "$(stat -c %s "$entry.qcow2")" \
		'.image.file = $file | .image.format = "qcow2" | .image.size = $size' \
		"$entry.json" >"$entry.json.tmp"
	mv "$entry.json.tmp" "$entry.json"
	rm -f "$entry.raw"
	step=""
}

# Keeps the two most recently used cache entries of the runtime.
prune() {
	# shellcheck disable=SC2012
	ls -t "$cache/$safe"-*.json 2>/dev/null | while read -r j; do
		k=${j#"$cache/$safe-"}
		k=${k%.json}
		case $k in
		*[!0-9a-f]*) continue ;;
		esac
		[ ${#k} = 16 ] && echo "$j"
	done | tail -n +3 | while read -r j; do
		rm -f "${j%.json}.json" "${j%.json}.qcow2" "${j%.json}.raw"
	done
}

build_one() {
	stem=$1
	meta=$here/$stem.json
	name=$(name_of "$stem")
	safe=$(echo "$name" | tr ':/' '--')
	# STEM.build: its suite, packages_also, build_aptopt (an apt option for
	# the build only), rt_resolve (sets extra, what else goes into the
	# cache key), rt_install and rt_smoke.
	suite=trixie packages_also="" extra="" recipe="" build_aptopt=""
	unset -f rt_resolve rt_install rt_smoke
	if [ -f "$here/$stem.build" ]; then
		recipe=$here/$stem.build
		# shellcheck disable=SC1090
		. "$recipe"
	fi
	lists="$here/base.packages"
	[ "$stem" = base ] || lists="$lists $here/$stem.packages"
	[ -z "$packages_also" ] || lists="$lists $here/$packages_also.packages"
	for l in $lists; do
		[ -f "$l" ] || die "$l is missing (every runtime has a package list, possibly empty)"
	done
	if command -v rt_resolve >/dev/null; then
		rt_resolve
	fi
	# shellcheck disable=SC2086
	key=$({
		cat "$here/build.sh" "$here/npm.sh" "$meta" $lists $recipe
		echo "suite=$suite mmdebstrap=$mmdebstrap_version extra=$extra"
	} | sha256sum | cut -c1-16)
	entry=$cache/$safe-$key

	# The entry is written last; its image is qcow2, or raw from a build
	# made before husk-img existed.
	if [ -f "$entry.json" ]; then
		fmt=qcow2
		if [ -f "$entry.raw" ]; then
			fmt=raw
			if [ -x "$husk_img" ]; then
				convert_cached
				fmt=qcow2
			fi
		fi
		install_outputs
		echo "runtime $name: cached ($key, $fmt)"
		return
	fi
	check_meta "$meta"

	start=$(date +%s)
	log=$cache/logs/$safe.log
	: >"$log"
	work=$(mktemp -d "$cache/tmp/$safe.XXXXXX")
	root=$work/root
	: >"$work/versions"
	# shellcheck disable=SC2086
	pkgs=$(packages $lists)
	echo "runtime $name: building $key (log: $log)"

	begin "mmdebstrap $suite minbase + $pkgs"
	# Downloaded packages are kept in $cache/debs for the next build. The
	# dpkg excludes stay in the image, so packages installed later leave
	# out documentation, manuals and translations too.
	# shellcheck disable=SC2016,SC2086
	mmdebstrap --mode=root --variant=minbase --format=directory \
		--include="$(echo "$pkgs" | tr ' ' ',')" \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-include=/usr/share/doc/*/copyright' \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--aptopt='Acquire::Retries "3"' ${build_aptopt:+"--aptopt=$build_aptopt"} \
		--skip=download/empty --skip=essential/unlink \
		--setup-hook='mkdir -p "$1"/var/cache/apt/archives/' \
		--setup-hook="sync-in $cache/debs /var/cache/apt/archives/" \
		--customize-hook="sync-out /var/cache/apt/archives $cache/debs" \
		"$suite" "$root" >>"$log" 2>&1
	find "$cache/debs" -name '*.deb' -mtime +30 -delete
	dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Package} ${Version}\n' >>"$log"
	npkgs=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Package}\n' | wc -l)

	if command -v rt_install >/dev/null; then
		rt_install
	fi
	# An option for the build alone stays out of the sandbox's apt.
	if [ -n "$build_aptopt" ]; then
		grep -vF "$build_aptopt" "$root/etc/apt/apt.conf.d/99mmdebstrap" >"$work/apt.conf" || true
		cat "$work/apt.conf" >"$root/etc/apt/apt.conf.d/99mmdebstrap"
	fi

	begin "setting up the tree for a sandbox"
	configure

	begin "smoke test in a chroot"
	smoke

	begin "making the ext4 file system"
	make_fs

	if [ -x "$husk_img" ]; then
		begin "converting to qcow2 with husk-img"
		"$husk_img" convert -f raw -O qcow2 "$raw" "$work/$safe.qcow2" >>"$log" 2>&1
		rm -f "$raw"
		fmt=qcow2
	else
		echo "runtime $name: $husk_img is not built; keeping the raw ext4 file" \
			"(converted once husk-img exists, without a rebuild)"
		fmt=raw
	fi

	begin "storing in the cache"
	versions=$(jq -R 'split("\t") | {(.[0]): .[1]}' "$work/versions" | jq -s 'add // {}')
	# Image first, entry last: an entry names a complete image.
	mv "$work/$safe.$fmt" "$entry.$fmt"
	write_entry "$fmt" $((size * 1024 * 1024)) "$npkgs" "$versions"
	rm -rf --one-file-system "$work"
	work=""
	install_outputs
	prune
	step=""
	echo "runtime $name: done in $(elapsed) s ($fmt, $(($(stat -c %s "$entry.$fmt") >> 20)) MiB;" \
		"ext4 of $size MiB; $(jq -r '.image.versions | to_entries | map("\(.key) \(.value)") | join(", ")' "$entry.json"))"
}

for s in $selected; do
	build_one "$s"
done

# The catalog: every runtime built here, as the API lists them.
entries=""
for s in $all; do
	f=$out/$(name_of "$s" | tr ':/' '--').json
	[ -f "$f" ] && entries="$entries $f"
done
if [ -n "$entries" ]; then
	# shellcheck disable=SC2086
	jq -s '{runtimes: ., total: length}' $entries >"$out/catalog.json.tmp"
	mv "$out/catalog.json.tmp" "$out/catalog.json"
fi
