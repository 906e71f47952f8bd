package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/backends/postgres/pgtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }

var tableSeq atomic.Int64

// newTable names a table no other store of the run uses.
func newTable() string { return fmt.Sprintf("t%d", tableSeq.Add(1)) }

// open opens a store over dsn on schema s, table tbl, closed when t ends.
func open(t testing.TB, dsn, tbl string, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), dsn, append([]postgres.Option{postgres.WithTable("public", tbl)}, opts...)...)
	if err != nil {
		t.Fatalf("Open(table %s): %v", tbl, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// within is a context that ends after d, or when t ends: a bound on a
// wait, never a timing assertion.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func sharedServer(t *testing.T) *pgtest.Server { t.Helper(); return pgtest.Shared(t) }

func pgxConnect(ctx context.Context, dsn string) (*pgx.Conn, error) { return pgx.Connect(ctx, dsn) }
