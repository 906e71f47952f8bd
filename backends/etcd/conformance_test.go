package etcd_test

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/backendtest"
	"github.com/tenure-go/tenure/backends/etcd"
)

// TestConformance runs the contract's suite against a real etcd, an etcd
// v3.6 and an etcd v3.7 server process (servers), with a lease per
// entry and with a shared lease. Expiry is judged by the server on
// real time, so the suite waits for it (Elapse is nil). A keep-alive that
// asks for another TTL is refused with ErrInvalid (an etcd lease's TTL is
// fixed at grant, and moving a key to another lease would change its
// revision); the suite accepts that refusal.
func TestConformance(t *testing.T) {
	servers(t, func(t *testing.T, start func(testing.TB) server) {
		srv := start(t)
		for _, mode := range []struct {
			name string
			opts []etcd.Option
		}{
			{"lease=per-entry", nil},
			{"lease=shared", []etcd.Option{etcd.WithSharedLease(100 * time.Millisecond)}},
		} {
			t.Run(mode.name, func(t *testing.T) {
				open := func(t *testing.T, prefix string) backends.Store {
					return openStore(t, newClient(t, srv.Endpoints(), nil), prefix, mode.opts...)
				}
				backendtest.Run(t, backendtest.Harness{
					New: func(t *testing.T) backends.Store { return open(t, newPrefix(t)) },
					// Another process: its own client, the same prefix.
					Peer: func(t *testing.T, s backends.Store) backends.Store {
						return open(t, s.(*etcd.Store).Prefix())
					},
					// A process restart: etcd keeps everything, the store
					// forgets what it knew.
					Reopen: func(t *testing.T, s backends.Store) backends.Store {
						if err := s.Close(); err != nil {
							t.Fatalf("Close: %v", err)
						}
						return open(t, s.(*etcd.Store).Prefix())
					},
					TTL: time.Second,
				})
			})
		}
	})
}
