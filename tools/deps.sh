#!/bin/sh
# Installs every Debian package that building husk, its images and its tests
# need. Non-interactive and idempotent: does nothing when all are present.
set -eu

packages="
build-essential pkg-config clang clang-format libclang-rt-14-dev
linux-source-6.1 bc bison flex libelf-dev libssl-dev xz-utils lz4 cpio gzip
busybox-static qemu-system-x86 qemu-utils
libjansson-dev libuv1-dev libhttp-parser-dev libsqlite3-dev libyaml-dev liblz4-dev libxxhash-dev libslirp-dev
libnl-route-3-dev libnftables-dev libcap-ng-dev libseccomp-dev acpica-tools
mmdebstrap debian-archive-keyring e2fsprogs jq iproute2 dnsmasq-base
libarchive-dev skopeo umoci openssl
"

# Node.js and npm run the published client in the API tests and fetch bun
# for its runtime; a machine that already has them (from elsewhere) keeps them.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	packages="$packages nodejs npm"
fi

missing=""
for p in $packages; do
	if [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" != installed ]; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "deps: installing:$missing"
if [ "$(id -u)" = 0 ]; then
	sudo=""
elif command -v sudo >/dev/null; then
	sudo="sudo"
else
	echo "deps: not root and no sudo; install these packages as root:$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing
