#!/bin/sh
# Builds the etcd server pinned by this tools module and caches it outside
# the repository, under a name that carries the etcd version and a hash of
# go.mod and go.sum (internal/tools/toolbuild/build.sh does the work). The binary
# path is printed on stdout as the last line; progress goes to stderr.
#
# Cache directory: $TENURE_CACHE, else $XDG_CACHE_HOME/tenure, else
# $HOME/.cache/tenure. A cold build takes a few minutes.
set -eu

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
exec "$here/../../../../internal/tools/toolbuild/build.sh" etcd v3.7.3 "$here" go.etcd.io/etcd/server/v3
