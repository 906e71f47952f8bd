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

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/backends/postgres/pgtest"
)

// TestTxnRaceWithCreate races transactions that require a key absent and
// write it against plain creates of the same key from other stores, over many
// rounds: exactly one of them wins each round. An absent key cannot be
// locked; the transaction's placeholder row is what makes a concurrent create
// wait for it.
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
type wireCount struct {
	stmts  pgtest.Statements
	writes atomic.Int64
}

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
	cfg.ConnConfig.Tracer = &c.stmts
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

// TestRefusedAcquisitionCost checks that a follower's attempt on a claim
// another store holds, the request every follower sends about once a TTL, is
// one statement and one round trip. It was a transaction of five (begin, the
// advisory locks, the placeholder rows, the locking read, rollback), which
// made followers' attempts most of what an election sent the server: 3.5
// statements per renewal with 100 claims instead of 1.5.
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

// TestTxnRoundTrips checks that a transaction that commits is three round
// trips whatever it holds: the conditions checked alone, then (pipelined)
// begin, the advisory locks, the placeholder rows and the locking read, then
// (pipelined) the writes, the placeholders' removal and the commit. One
// without conditions skips the check. Each statement was its own round trip:
// seven for a put under a condition, eight with the check.
func TestTxnRoundTrips(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	s, c := countedStore(t, dsn, tbl)
	put := func(key string) backends.Op {
		return backends.Op{Kind: backends.OpPut, Key: key, Value: []byte("v"), TTL: time.Minute}
	}
	cases := []struct {
		name  string
		conds func(round int) []backends.Cond
		ops   func(round int) []backends.Op
		trips int64
	}{
		{"put if absent", func(r int) []backends.Cond {
			return []backends.Cond{{Key: fmt.Sprint("a", r)}, {Key: fmt.Sprint("a", r, "/size")}}
		},
			func(r int) []backends.Op { return []backends.Op{put(fmt.Sprint("a", r))} }, 3},
		{"two puts, no condition", func(int) []backends.Cond { return nil },
			func(r int) []backends.Op { return []backends.Op{put(fmt.Sprint("b", r)), put(fmt.Sprint("c", r))} }, 2},
		{"delete and put", func(r int) []backends.Cond { return []backends.Cond{{Key: fmt.Sprint("d", r)}} },
			func(r int) []backends.Op {
				return []backends.Op{{Kind: backends.OpDelete, Key: fmt.Sprint("b", r)}, put(fmt.Sprint("d", r))}
			}, 3},
	}
	for round := range 3 { // the first round prepares the statements on the connection
		for _, tc := range cases {
			c.read()
			if _, err := s.Txn(ctx, tc.conds(round), tc.ops(round)); err != nil {
				t.Fatalf("round %d, %s: %v", round, tc.name, err)
			}
			if _, writes := c.read(); round > 0 && writes != tc.trips {
				t.Errorf("round %d, %s: %d round trips, want %d", round, tc.name, writes, tc.trips)
			}
		}
	}
}
