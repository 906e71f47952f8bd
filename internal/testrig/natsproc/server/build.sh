#!/bin/sh
# Builds the nats-server pinned by this tools module and caches it outside
# the repository, under a name that carries the nats-server version and a
# hash of go.mod and go.sum (internal/tools/toolbuild/build.sh does the work).
# The binary path is printed on stdout as the last line; progress goes to
# stderr.
#
# Cache directory: $TENURE_CACHE, else $XDG_CACHE_HOME/tenure, else
# $HOME/.cache/tenure. A cold build takes a minute or two.
set -eu

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
exec "$here/../../../tools/toolbuild/build.sh" nats-server v2.15.2 "$here" github.com/nats-io/nats-server/v2
