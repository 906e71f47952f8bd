#!/bin/sh
# Builds one command of a pinned tools module and caches the binary outside
# the repository; the test servers' build.sh scripts call it.
#
#   build.sh NAME VERSION MODULE_DIR PACKAGE [LDFLAGS]
#
# The cache entry is NAME-VERSION-HASH, HASH being the start of the sha256 of
# MODULE_DIR's go.mod and go.sum: a change to either builds a new binary, and
# an unchanged module costs nothing. LDFLAGS are added after "-s -w". The
# binary path is printed on stdout as the last line; progress goes to stderr.
#
# Cache directory: $TENURE_CACHE, else $XDG_CACHE_HOME/tenure, else
# $HOME/.cache/tenure.
set -eu

if [ $# -lt 4 ] || [ $# -gt 5 ]; then
	echo "usage: $0 NAME VERSION MODULE_DIR PACKAGE [LDFLAGS]" >&2
	exit 2
fi
name=$1
version=$2
moddir=$(CDPATH= cd -- "$3" && pwd)
pkg=$4
ldflags=${5:-}

cache=${TENURE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tenure}
sum=$(cat "$moddir/go.mod" "$moddir/go.sum" | sha256sum | cut -c1-12)
bin="$cache/$name-$version-$sum"

if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$cache"
# Test binaries run in parallel may ask for the same tool at once: one
# builds while the others wait for it, then find the binary cached.
if command -v flock >/dev/null 2>&1; then
	exec 9>"$cache/.$name.lock"
	flock 9
	if [ -x "$bin" ]; then
		echo "$bin"
		exit 0
	fi
fi
# Build into a private temporary directory beside the cache entry and rename:
# an interrupted build never leaves a partial binary under the final name.
tmpdir=$(mktemp -d "$cache/.$name-build.XXXXXX")
trap 'rm -rf "$tmpdir"' EXIT
trap 'exit 1' INT TERM
tmp="$tmpdir/$name"

echo "building $name $version into $bin (cold builds take minutes)" >&2
cd "$moddir"
# go.sum is committed: -mod=readonly fails instead of silently changing the
# pinned versions (and with them the cache key). GOWORK=off keeps an outer
# go.work from pulling the module into a workspace.
GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=readonly" CGO_ENABLED=0 go build \
	-trimpath -ldflags "-s -w${ldflags:+ $ldflags}" -o "$tmp" "$pkg"
chmod 0755 "$tmp"
mv -f "$tmp" "$bin"
echo "$bin"
