//go:build tools

// Package etcdserver36 pins go.etcd.io/etcd/server/v3, whose root package is
// the etcd command, in this tools module's go.mod and go.sum. It is never
// compiled: build.sh builds the command directly.
package etcdserver36

import _ "go.etcd.io/etcd/server/v3"
