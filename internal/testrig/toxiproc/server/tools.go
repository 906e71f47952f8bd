//go:build tools

// Package server pins github.com/Shopify/toxiproxy/v2, whose cmd/server
// package is the toxiproxy-server command, in this tools module's go.mod
// and go.sum. It is never compiled: build.sh builds the command directly.
package server

import _ "github.com/Shopify/toxiproxy/v2/cmd/server"
