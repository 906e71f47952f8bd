#!/bin/sh
# Builds the kube-apiserver pinned by this tools module and caches it outside
# the repository, under a name that carries the Kubernetes version and a hash
# of go.mod and go.sum (internal/tools/toolbuild/build.sh does the work). The
# binary path is printed on stdout as the last line; progress goes to stderr.
#
# Cache directory: $TENURE_CACHE, else $XDG_CACHE_HOME/tenure, else
# $HOME/.cache/tenure. A cold build takes several minutes and ~3 GB of memory.
set -eu

version=v1.37.1
major=1
minor=37
# Without these, kube-apiserver --version prints a placeholder.
pkg=k8s.io/component-base/version

here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
exec "$here/../../../../internal/tools/toolbuild/build.sh" kube-apiserver "$version" "$here" k8s.io/kubernetes/cmd/kube-apiserver \
	"-X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
