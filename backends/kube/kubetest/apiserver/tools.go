//go:build tools

// Package apiserver pins k8s.io/kubernetes/cmd/kube-apiserver in this tools
// module's go.mod and go.sum. It is never compiled: build.sh builds the
// command directly.
package apiserver

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
