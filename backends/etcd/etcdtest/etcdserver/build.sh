#!/bin/sh
# Builds the etcd server pinned by this tools module and caches it outside
# the repository. The cache name carries the etcd version and a hash of
# go.mod and go.sum, so a change to either builds a new binary and an
# unchanged module costs nothing. The binary path is printed on stdout as the
# last line; progress goes to stderr.
#
# Cache directory: $TENURE_CACHE, else $XDG_CACHE_HOME/tenure, else
# $HOME/.cache/tenure. A cold build takes a few minutes.
set -eu

version=v3.7.3

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
cache=${TENURE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tenure}
sum=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)
bin="$cache/etcd-$version-$sum"

if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$cache"
# Build into a private temporary directory beside the cache entry and rename:
# an interrupted build never leaves a partial binary under the final name.
tmpdir=$(mktemp -d "$cache/.etcd-build.XXXXXX")
trap 'rm -rf "$tmpdir"' EXIT
trap 'exit 1' INT TERM
tmp="$tmpdir/etcd"

echo "building etcd $version into $bin (cold builds take minutes)" >&2
cd "$here"
# go.sum is committed: -mod=readonly fails instead of silently changing the
# pinned versions (and with them the cache key). GOWORK=off keeps an outer
# go.work from pulling this module into a workspace.
GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=readonly" CGO_ENABLED=0 go build \
	-trimpath -ldflags "-s -w" -o "$tmp" go.etcd.io/etcd/server/v3
chmod 0755 "$tmp"
mv -f "$tmp" "$bin"
echo "$bin"
