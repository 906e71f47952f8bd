#!/bin/sh
# Builds the toxiproxy server pinned by this tools module and caches it
# outside the repository, under a name that carries the toxiproxy version
# and a hash of go.mod and go.sum (internal/tools/toolbuild/build.sh does the
# work). The binary path is printed on stdout as the last line; progress
# goes to stderr.
#
# Cache directory: $TENURE_CACHE, else $XDG_CACHE_HOME/tenure, else
# $HOME/.cache/tenure. A cold build takes under a minute.
set -eu

version=v2.12.0
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
exec "$here/../../../tools/toolbuild/build.sh" toxiproxy-server "$version" "$here" github.com/Shopify/toxiproxy/v2/cmd/server \
	"-X github.com/Shopify/toxiproxy/v2.Version=$version"
