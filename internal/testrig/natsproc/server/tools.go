//go:build tools

// Package server pins github.com/nats-io/nats-server/v2, whose root
// package is the nats-server command, in this tools module's go.mod and
// go.sum. It is never compiled: build.sh builds the command directly.
package server

import _ "github.com/nats-io/nats-server/v2"
