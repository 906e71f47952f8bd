package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
)

// renewCounter counts the keep-alive statements a pool sends.
type renewCounter struct{ n atomic.Int64 }

func (c *renewCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "beat = beat + 1") || strings.Contains(d.SQL, "unnest($1::text[], $2::bigint[], $3::bigint[])") {
		c.n.Add(1)
	}
	return ctx
}
func (c *renewCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestBatchedKeepAlive checks that 100 keep-alives called at once on one
// store with batching take a handful of statements, not 100; each is answered
// as if alone (the revision unchanged, a stale revision refused, a missing
// key absent); without batching each is exactly one statement.
func TestBatchedKeepAlive(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		opts []postgres.Option
		min  int64 // keep-alive statements for the 102 calls
		max  int64
	}{
		{"each", nil, 102, 102},
		{"batched", []postgres.Option{postgres.WithBatchedKeepAlive(50 * time.Millisecond)}, 1, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c renewCounter
			cfg, err := pgxpool.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ConnConfig.Tracer = &c
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			s, err := postgres.New(ctx, pool, append([]postgres.Option{postgres.WithTable("public", tbl)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var es []backends.Entry
			for i := range 100 {
				e, err := s.CreateIfAbsent(ctx, fmt.Sprintf("%s/%03d", tc.name, i), []byte("v"), time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				es = append(es, e)
			}
			before := c.n.Load()
			var wg sync.WaitGroup
			errs := make([]error, len(es)+2)
			for i, e := range es {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got, err := s.KeepAlive(ctx, e.Key, e.Revision, 2*time.Minute)
					if err == nil && (got.Revision != e.Revision || got.TTL != 2*time.Minute) {
						err = fmt.Errorf("renewed to rev %d ttl %v, want rev %d ttl 2m", got.Revision, got.TTL, e.Revision)
					}
					errs[i] = err
				}()
			}
			wg.Add(2)
			go func() {
				defer wg.Done()
				_, errs[len(es)] = s.KeepAlive(ctx, es[0].Key, es[0].Revision+1000, time.Minute)
			}()
			go func() { defer wg.Done(); _, errs[len(es)+1] = s.KeepAlive(ctx, tc.name+"/missing", 1, time.Minute) }()
			wg.Wait()
			for i, err := range errs[:len(es)] {
				if err != nil {
					t.Errorf("KeepAlive %d: %v", i, err)
				}
			}
			var ce *backends.ConflictError
			if err := errs[len(es)]; !errors.As(err, &ce) || !ce.Found {
				t.Errorf("KeepAlive with a stale revision = %v, want a conflict with the current entry", err)
			}
			if err := errs[len(es)+1]; !errors.Is(err, backends.ErrNotFound) {
				t.Errorf("KeepAlive of a missing key = %v, want ErrNotFound", err)
			}
			if n := c.n.Load() - before; n < tc.min || n > tc.max {
				t.Errorf("%d keep-alive statements for 102 keep-alives, want %d to %d", n, tc.min, tc.max)
			} else {
				t.Logf("%d keep-alive statements for 102 keep-alives", n)
			}
		})
	}
}
