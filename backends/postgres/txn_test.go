package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
)

// TestTxnRaceWithCreate: transactions that require a key absent and write
// it, racing plain creates of the same key from other stores, over many
// rounds: exactly one of them wins each round. An absent key cannot be
// locked; the transaction's placeholder row is what makes a concurrent
// create wait for it.
func TestTxnRaceWithCreate(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	const racers = 8
	var stores []*postgres.Store
	for range racers {
		stores = append(stores, open(t, dsn, tbl))
	}
	for round := range 20 {
		key := fmt.Sprintf("race/%d", round)
		var wg sync.WaitGroup
		errs := make([]error, racers)
		for i, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					_, errs[i] = s.Txn(ctx, []backends.Cond{{Key: key}, {Key: key + "/other"}},
						[]backends.Op{{Kind: backends.OpPut, Key: key, Value: []byte{byte(i)}, TTL: time.Minute}})
				} else {
					_, errs[i] = s.CreateIfAbsent(ctx, key, []byte{byte(i)}, time.Minute)
				}
			}()
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, backends.ErrConflict):
				t.Errorf("round %d racer %d: %v, want success or a conflict", round, i, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d winners, want 1 (errors %v)", round, won, errs)
		}
	}
}

// wireCount counts what a pool sends: statements (each query, and each
// query of a batch) and writes to the server's socket, one per round trip
// (a batch is sent as one write, and its answers read together).
type wireCount struct{ stmts, writes atomic.Int64 }

func (c *wireCount) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.stmts.Add(1)
	return ctx
}
func (c *wireCount) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *wireCount) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *wireCount) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.stmts.Add(1)
}
func (c *wireCount) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *wireCount) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return countingConn{conn, c}, nil
}

type countingConn struct {
	net.Conn
	c *wireCount
}

func (cc countingConn) Write(p []byte) (int, error) {
	cc.c.writes.Add(1)
	return cc.Conn.Write(p)
}

// read returns the statements and writes counted since the last call.
func (c *wireCount) read() (stmts, writes int64) {
	return c.stmts.Swap(0), c.writes.Swap(0)
}

// countedStore opens a store on a pool of one connection whose statements
// and round trips c counts. With one connection, the statements pgx
// prepares and caches on first use are prepared once: after a first run
// of an operation, its later runs count only its own round trips.
func countedStore(t *testing.T, dsn, tbl string) (*postgres.Store, *wireCount) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c := &wireCount{}
	cfg.ConnConfig.Tracer = c
	cfg.ConnConfig.DialFunc = c.dial
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := postgres.New(context.Background(), pool, postgres.WithTable("public", tbl))
	if err != nil {
		pool.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); pool.Close() })
	return s, c
}

// TestRefusedAcquisitionCost: a follower's attempt on a claim another
// store holds, the request every follower sends about once a TTL, is one
// statement and one round trip. It was a transaction of five (begin, the
// advisory locks, the placeholder rows, the locking read, rollback), which
// made followers' attempts most of what an election sent the server:
// 3.5 statements per renewal with 100 claims instead of 1.5.
func TestRefusedAcquisitionCost(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	holder, err := backends.NewLocker(open(t, dsn, tbl))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.TryAcquire(ctx, "claim", backends.Holder{ID: "a", Nonce: "1"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	s, c := countedStore(t, dsn, tbl)
	follower, err := backends.NewLocker(s)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 { // the first run prepares the statements
		c.read()
		_, err := follower.TryAcquire(ctx, "claim", backends.Holder{ID: "b", Nonce: "2"}, time.Minute)
		var held *backends.HeldError
		if !errors.As(err, &held) {
			t.Fatalf("round %d: TryAcquire of a held claim: %v, want a *HeldError", round, err)
		}
		stmts, writes := c.read()
		if stmts != 1 {
			t.Errorf("round %d: a refused acquisition sent %d statements, want 1", round, stmts)
		}
		if round > 0 && writes != 1 {
			t.Errorf("round %d: a refused acquisition took %d round trips, want 1", round, writes)
		}
	}
}
