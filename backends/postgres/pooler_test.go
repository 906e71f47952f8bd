package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/backendtest"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/storeurl"
)

// pooled opens a store through bouncer dsn in transaction-pooler mode.
func pooled(t testing.TB, dsn, tbl string, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	return open(t, dsn, tbl, append([]postgres.Option{postgres.WithPooler(postgres.PoolerTransaction)}, opts...)...)
}

// TestPoolerConformance runs the contract's suite through a real PgBouncer
// in transaction mode: every statement of every store goes through it.
// Without a direct connection to listen on, the store declares no watch
// (and the suite skips the watch's tests); with one (WithListen), the
// watch listens on the server while its markers and every write go
// through the pooler. It runs with keep-alives batched too, whose one
// statement for many keys passes arrays.
func TestPoolerConformance(t *testing.T) {
	srv := sharedServer(t)
	b := srv.StartBouncer(t, 0)
	db := srv.NewDatabase(t)
	dsn := b.DSN(db)
	table := func(st backends.Store) string { _, tbl := st.(*postgres.Store).Table(); return tbl }
	for _, mode := range []struct {
		name string
		opts []postgres.Option
	}{
		{"watch=none", nil},
		{"watch=direct", []postgres.Option{postgres.WithListen(srv.DSN(db))}},
		{"watch=none,renew=batched", []postgres.Option{postgres.WithBatchedKeepAlive(10 * time.Millisecond)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			backendtest.Run(t, backendtest.Harness{
				New:  func(t *testing.T) backends.Store { return pooled(t, dsn, newTable(), mode.opts...) },
				Peer: func(t *testing.T, st backends.Store) backends.Store { return pooled(t, dsn, table(st), mode.opts...) },
				Reopen: func(t *testing.T, st backends.Store) backends.Store {
					if err := st.Close(); err != nil {
						t.Fatalf("Close: %v", err)
					}
					return pooled(t, dsn, table(st), mode.opts...)
				},
				TTL: 500 * time.Millisecond,
			})
		})
	}
}

// TestPoolerStatementsUnprepared checks that behind a transaction-mode pooler
// a store's statements do not rely on the server connection they last ran on.
// The bouncer hands out its server connections last-used first: the store's
// one client connection runs its statements on server connection A; then a
// raw client holds A in an open transaction, so the store's next statements
// run on a fresh server connection B. A statement prepared on A (pgx's
// statement cache) does not exist on B.
func TestPoolerStatementsUnprepared(t *testing.T) {
	srv := sharedServer(t)
	b := srv.StartBouncer(t, 2)
	dsn := b.DSN(srv.NewDatabase(t))
	st := pooled(t, dsn+"&pool_max_conns=1", newTable())
	ctx := within(t, 30*time.Second)
	e, err := st.CreateIfAbsent(ctx, "k", []byte("v1"), time.Minute)
	if err != nil {
		t.Fatalf("CreateIfAbsent: %v", err)
	}
	if _, err := st.Get(ctx, "k"); err != nil {
		t.Fatalf("Get: %v", err)
	}

	raw, err := pgxConnect(ctx, dsn+"&default_query_exec_mode=simple_protocol")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(context.Background())
	var held int
	tx, err := raw.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if err := tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&held); err != nil {
		t.Fatal(err)
	}

	// Every kind of statement the store sends, on the other server
	// connection.
	if _, err := st.Get(ctx, "k"); err != nil {
		t.Errorf("Get on another server connection: %v", err)
	}
	if _, err := st.List(ctx, ""); err != nil {
		t.Errorf("List on another server connection: %v", err)
	}
	if e, err = st.KeepAlive(ctx, "k", e.Revision, time.Minute); err != nil {
		t.Errorf("KeepAlive on another server connection: %v", err)
	}
	if e, err = st.CompareAndSet(ctx, "k", e.Revision, []byte("v2"), time.Minute); err != nil {
		t.Errorf("CompareAndSet on another server connection: %v", err)
	}
	if _, err := st.Txn(ctx, []backends.Cond{{Key: "k", Revision: e.Revision}}, []backends.Op{{Kind: backends.OpPut, Key: "k2", Value: []byte("t")}}); err != nil {
		t.Errorf("Txn on another server connection: %v", err)
	}
	if _, err := st.CreateIfAbsent(ctx, "k3", nil, 0); err != nil {
		t.Errorf("CreateIfAbsent on another server connection: %v", err)
	}
	// What the held server connection kept of the store's session: no
	// prepared statement (pgx's statement cache would have left its own).
	var prepared int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements").Scan(&prepared); err != nil {
		t.Fatal(err)
	}
	if prepared != 0 {
		t.Errorf("server connection %d holds %d prepared statements the store left", held, prepared)
	}
}

// TestPoolerMisconfigured checks that a store not told of a transaction-mode
// pooler (its pool set not to prepare statements, so that it opens at all)
// does not hang in Watch, whose LISTEN the pooler does not keep: it answers
// within its bound, naming the pooler setting, and a caller without a
// deadline of its own (an elector's watch) is not stuck.
func TestPoolerMisconfigured(t *testing.T) {
	srv := sharedServer(t)
	b := srv.StartBouncer(t, 0)
	st := open(t, b.DSN(srv.NewDatabase(t))+"&default_query_exec_mode=exec", newTable())
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // the test's own bound only
	defer cancel()
	_, err := st.Watch(ctx, "k")
	if err == nil {
		t.Fatal("Watch through a transaction-mode pooler, the store not told: success, want an error")
	}
	if ctx.Err() != nil {
		t.Fatalf("Watch = %v only when the test's bound ended", err)
	}
	if !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("Watch = %v, want ErrUnavailable", err)
	}
	t.Logf("Watch: %v", err)
}

// TestPoolerURL opens stores through the bouncer by URL:
// pooler=transaction alone gives a store with no watch, and listen= a
// watch that listens on the server directly and sees a write made through
// the bouncer.
func TestPoolerURL(t *testing.T) {
	srv := sharedServer(t)
	b := srv.StartBouncer(t, 0)
	db := srv.NewDatabase(t)
	base := fmt.Sprintf("postgresql://postgres:%s@%s/%s?sslmode=disable&table=pooled&pooler=transaction&create=true", secret, b.Addr(), db)
	ctx := within(t, time.Minute)

	st, err := storeurl.Open(ctx, base)
	if err != nil {
		t.Fatalf("Open(%s): %v", base, err)
	}
	defer st.Close()
	if got := st.(*postgres.Store).Pooler(); got != postgres.PoolerTransaction {
		t.Errorf("Pooler() = %q, want %q", got, postgres.PoolerTransaction)
	}
	if err := backends.Require(st, backends.CapWatch); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("Require(watch) behind a transaction pooler without listen= = %v, want ErrUnsupported", err)
	}
	if _, err := st.(backends.Watcher).Watch(ctx, "w/"); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("Watch without listen= = %v, want ErrUnsupported", err)
	}

	withListen := base + "&listen=" + url.QueryEscape(srv.Addr())
	lst, err := storeurl.Open(ctx, withListen)
	if err != nil {
		t.Fatalf("Open(%s): %v", withListen, err)
	}
	defer lst.Close()
	ch, err := lst.(backends.Watcher).Watch(ctx, "w/")
	if err != nil {
		t.Fatalf("Watch with listen=: %v", err)
	}
	e, err := st.CreateIfAbsent(ctx, "w/a", []byte("through the bouncer"), 0)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Kind != backends.EventPut || ev.Entry.Key != "w/a" || ev.Entry.Revision != e.Revision {
			t.Errorf("event = %v %q@%d, want put w/a@%d", ev.Kind, ev.Entry.Key, ev.Entry.Revision, e.Revision)
		}
	case <-ctx.Done():
		t.Fatal("no event for a write through the bouncer")
	}
}

// TestPoolerElectorHandover runs three electors through the bouncer, each
// on a store of its own, and stops each leader in turn: the next is
// elected with a higher token and no two terms overlap. With a watch that
// listens on the server directly, the next leader follows a release at
// once; with no watch (all a transaction-mode pooler allows), followers
// time their attempts to the claim's observed expiry, so a handover waits
// for that, up to about a TTL after the release.
func TestPoolerElectorHandover(t *testing.T) {
	srv := sharedServer(t)
	b := srv.StartBouncer(t, 0)
	for _, mode := range []struct {
		name   string
		listen bool
	}{
		{"watch=direct", true},
		{"watch=none", false},
	} {
		t.Run(mode.name, func(t *testing.T) {
			db := srv.NewDatabase(t)
			dsn, tbl := b.DSN(db), newTable()
			var opts []postgres.Option
			if mode.listen {
				opts = append(opts, postgres.WithListen(srv.DSN(db)))
			}
			wall := clock.New()
			ts := electortest.NewTerms(wall)
			els := map[string]*elector.Elector{}
			for i := range 3 {
				who := fmt.Sprintf("node-%d", i)
				els[who] = startElector(t, newLocker(t, pooled(t, dsn, tbl, opts...)), "leader", who, ts)
			}
			who := ts.Next(t, within(t, 20*time.Second))
			for round := range 2 {
				stopped := wall.Now()
				stopElector(t, els[who], who)
				next := ts.Next(t, within(t, 20*time.Second))
				t.Logf("round %d: %s stepped down, %s elected %v later", round, who, next, wall.Now().Sub(stopped))
				delete(els, who)
				who = next
			}
			all := ts.Check(t)
			if len(all) != 3 {
				t.Errorf("terms = %+v, want 3", all)
			}
		})
	}
}

// TestPoolerNotToldURL opens stores by URL through a transaction-mode
// bouncer with one server connection, the URL not saying so: the
// statements the first open prepared stay on that server connection, so
// the next open's meet them. Each open that fails says in its one line
// what to do (pooler=transaction), as a fatal error, and at least one
// fails.
func TestPoolerNotToldURL(t *testing.T) {
	srv := sharedServer(t)
	b := srv.StartBouncer(t, 1)
	db := srv.NewDatabase(t)
	raw := fmt.Sprintf("postgres://postgres:%s@%s/%s?sslmode=disable&table=untold&create=true", secret, b.Addr(), db)
	ctx := within(t, time.Minute)
	failed := 0
	for range 3 {
		st, err := storeurl.Open(ctx, raw)
		if err == nil {
			st.Close()
			continue
		}
		failed++
		if !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("Open through an untold pooler = %v, want ErrInvalid", err)
		}
		if !strings.Contains(err.Error(), "pooler=transaction") {
			t.Errorf("Open through an untold pooler = %q, want it to name pooler=transaction", err)
		}
		if testing.Verbose() {
			t.Logf("Open: %v", err)
		}
	}
	if failed == 0 {
		t.Fatal("three opens through a transaction-mode bouncer with one server connection, the store not told: all succeeded")
	}
}
