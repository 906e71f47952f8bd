#!/bin/sh
# Builds the kube-apiserver pinned by this tools module and caches it outside
# the repository. The cache name carries the Kubernetes version and a hash of
# go.mod and go.sum, so a change to either builds a new binary and an
# unchanged module costs nothing. The binary path is printed on stdout as the
# last line; progress goes to stderr.
#
# Cache directory: $TENURE_CACHE, else $XDG_CACHE_HOME/tenure, else
# $HOME/.cache/tenure. A cold build takes several minutes and ~3 GB of memory.
set -eu

version=v1.37.1
major=1
minor=37

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
cache=${TENURE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tenure}
sum=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)
bin="$cache/kube-apiserver-$version-$sum"

if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$cache"
# Build into a private temporary directory beside the cache entry and rename:
# an interrupted build never leaves a partial binary under the final name.
tmpdir=$(mktemp -d "$cache/.kube-apiserver-build.XXXXXX")
trap 'rm -rf "$tmpdir"' EXIT
trap 'exit 1' INT TERM
tmp="$tmpdir/kube-apiserver"

echo "building kube-apiserver $version into $bin (cold builds take minutes)" >&2
pkg=k8s.io/component-base/version
cd "$here"
# go.sum is committed: -mod=readonly fails instead of silently changing the
# pinned versions (and with them the cache key). GOWORK=off keeps an outer
# go.work from pulling this module into a workspace.
GOWORK=off GOFLAGS="${GOFLAGS:-} -mod=readonly" CGO_ENABLED=0 go build \
	-trimpath \
	-ldflags "-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
	-o "$tmp" k8s.io/kubernetes/cmd/kube-apiserver
chmod 0755 "$tmp"
mv -f "$tmp" "$bin"
echo "$bin"
