package postgres_test

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/backendtest"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/backends/postgres/pgtest"
)

// TestConformance runs the contract's suite against a real PostgreSQL
// server, each store on a table of its own in one fresh database. Expiry
// is judged by local observation on real time, so the suite waits for it
// (Elapse is nil) and each store counts from its own first read. Peer and
// Reopen open another pool over the same table, as another process would;
// a reopened store has forgotten what it saw. It runs with each
// keep-alive a statement of its own, and with keep-alives batched.
func TestConformance(t *testing.T) {
	srv := pgtest.Shared(t)
	dsn := srv.DSN(srv.NewDatabase(t))
	table := func(st backends.Store) string { _, tbl := st.(*postgres.Store).Table(); return tbl }
	for _, mode := range []struct {
		name string
		opts []postgres.Option
	}{
		{"renew=each", nil},
		{"renew=batched", []postgres.Option{postgres.WithBatchedKeepAlive(10 * time.Millisecond)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			backendtest.Run(t, backendtest.Harness{
				New:  func(t *testing.T) backends.Store { return open(t, dsn, newTable(), mode.opts...) },
				Peer: func(t *testing.T, st backends.Store) backends.Store { return open(t, dsn, table(st), mode.opts...) },
				Reopen: func(t *testing.T, st backends.Store) backends.Store {
					if err := st.Close(); err != nil {
						t.Fatalf("Close: %v", err)
					}
					return open(t, dsn, table(st), mode.opts...)
				},
				TTL: 500 * time.Millisecond,
			})
		})
	}
}
