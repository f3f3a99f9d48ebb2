# Helpers for runtimes that take programs from the npm registry (sourced by
# build.sh; a runtime's STEM.build calls them). Downloads are kept in
# $cache/npm for the next build.

# npm_need WHAT: npm must be there to fetch WHAT.
npm_need() {
	command -v npm >/dev/null ||
		die "$name needs npm to fetch $1 from the npm registry; install Node.js with npm ('make deps')"
}

# npm_latest PKG RANGE: the newest version of PKG in RANGE (a semver range,
# '*' for any), asked of the registry at most once a day; the last answer
# when the registry cannot be reached.
npm_latest() {
	vfile=$cache/npm/$(echo "$1-$2" | tr '/@*^~ <>=' '_________').version
	if [ -s "$vfile" ] && [ -n "$(find "$vfile" -mmin -1440)" ]; then
		cat "$vfile"
		return
	fi
	v=""
	if command -v npm >/dev/null; then
		v=$(npm view "$1@$2" version --json --fetch-retries=1 --fetch-timeout=30000 \
			2>>"$cache/logs/npm.log" | jq -r 'if type == "array" then .[] else . end' |
			grep -E '^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$' | sort -V | tail -n 1) || v=""
	fi
	if [ -n "$v" ]; then
		echo "$v" >"$vfile.tmp" && mv "$vfile.tmp" "$vfile"
	elif [ -s "$vfile" ]; then
		echo "runtime $name: cannot ask the npm registry for $1@$2; using $(cat "$vfile") as last time" >&2
	else
		npm_need "$1"
		die "$name: npm finds no $1@$2 on the registry; see $cache/logs/npm.log"
	fi
	cat "$vfile"
}

# npm_unpack PKG VERSION: its tarball (kept in $cache/npm) unpacked; prints
# the folder holding package.json. The version inside must be VERSION.
npm_unpack() {
	tgz=$cache/npm/$(echo "$1" | tr '/@' '__')-$2.tgz
	if [ ! -s "$tgz" ]; then
		npm_need "$1"
		rm -rf "$work/pack" && mkdir "$work/pack"
		npm pack "$1@$2" --pack-destination "$work/pack" >>"$log" 2>&1
		mv "$work/pack/"*.tgz "$tgz.tmp"
		mv "$tgz.tmp" "$tgz"
		rm -rf "$work/pack"
	fi
	dir=$work/unpack-$(echo "$1" | tr '/@' '__')
	rm -rf "$dir" && mkdir -p "$dir"
	tar -xzf "$tgz" -C "$dir"
	got=$(jq -r .version "$dir/package/package.json")
	[ "$got" = "$2" ] || die "$tgz holds $1 $got, not $2; delete it and build again"
	echo "$dir/package"
}

# npm_global PKG@VERSION: installed into the tree as npm install -g would
# (/usr/local/lib/node_modules, commands in /usr/local/bin), by the build
# host's npm; its install script (allowed by name: npm 11 asks) puts the
# linux-x64 binary of its platform package in place.
npm_global() {
	npm_need "$1"
	mkdir -p "$cache/npm/cache"
	npm install --global --prefix "$root/usr/local" --cache "$cache/npm/cache" \
		--no-fund --no-audit --no-update-notifier --fetch-retries=3 \
		--allow-scripts="${1%@*}" "$1" >>"$log" 2>&1
}
