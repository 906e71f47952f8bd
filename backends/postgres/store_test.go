package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/clocktest"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestExpiryByLocalObservation checks that expiry follows the observing
// store's own clock and nothing else. A contender whose clock has run an hour
// ahead still sees a claim it reads for the first time as live; a keep-alive
// restarts its count; only a TTL of its own clock with the claim unchanged
// lets it take over, with a higher token, after which the old holder's
// keep-alive is refused. The TTL is an hour: the server's clock (and the real
// time the test takes) could not have expired anything.
func TestExpiryByLocalObservation(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	holder := open(t, dsn, tbl)
	clk := clocktest.New(time.Time{})
	contender := open(t, dsn, tbl, postgres.WithClock(clk))
	const ttl = time.Hour

	e, err := holder.CreateIfAbsent(ctx, "k", []byte("holder"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(10 * ttl) // a step of the contender's clock before it ever looked
	if _, err := contender.CreateIfAbsent(ctx, "k", []byte("contender"), ttl); !errors.Is(err, backends.ErrExists) {
		t.Fatalf("contender's first CreateIfAbsent = %v, want ErrExists: a claim first seen now is live", err)
	}
	clk.Add(ttl / 2)
	if _, err := holder.KeepAlive(ctx, "k", e.Revision, ttl); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl/2 + time.Second) // a TTL after the first look, half a TTL after the keep-alive
	got, err := contender.Get(ctx, "k")
	if err != nil {
		t.Fatalf("Get after a keep-alive: %v, want live", err)
	}
	if got.Revision != e.Revision {
		t.Errorf("keep-alive changed the revision: %d, want %d", got.Revision, e.Revision)
	}
	if got.Remaining != ttl {
		t.Errorf("Remaining right after the keep-alive was first seen = %v, want %v", got.Remaining, ttl)
	}
	clk.Add(ttl)
	taken, err := contender.CreateIfAbsent(ctx, "k", []byte("contender"), ttl)
	if err != nil {
		t.Fatalf("CreateIfAbsent a TTL after the claim was last seen changing: %v", err)
	}
	if taken.CreateRevision <= e.CreateRevision {
		t.Errorf("token after takeover = %d, want above %d", taken.CreateRevision, e.CreateRevision)
	}
	if _, err := holder.KeepAlive(ctx, "k", e.Revision, ttl); !errors.Is(err, backends.ErrConflict) {
		t.Errorf("old holder's KeepAlive after the takeover = %v, want a conflict", err)
	}
}

// TestTakeoverLosesToKeepAlive checks that a keep-alive that commits between
// the contender's read (which judged the claim expired) and its takeover
// makes the takeover match nothing: the contender reads again and finds the
// claim live. A transaction locks the row, the contender's takeover is seen
// waiting on that lock, and only then does the transaction keep the claim
// alive and commit.
func TestTakeoverLosesToKeepAlive(t *testing.T) {
	srv := sharedServer(t)
	db := srv.NewDatabase(t)
	dsn, tbl := srv.DSN(db), newTable()
	ctx := testCtx(t)
	holder := open(t, dsn, tbl)
	clk := clocktest.New(time.Time{})
	contender := open(t, dsn, tbl, postgres.WithClock(clk))
	const ttl = time.Hour
	e, err := holder.CreateIfAbsent(ctx, "k", []byte("holder"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := contender.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl + time.Second) // expired for the contender, unless it changes

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	// The row is locked (as a keep-alive in flight locks it) before the
	// contender starts, so its insert and read pass and its takeover waits.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM public.`+tbl+` WHERE key = $1 FOR UPDATE`, "k"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var takeErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, takeErr = contender.CreateIfAbsent(ctx, "k", []byte("contender"), ttl)
	}()
	waitLockWait(t, ctx, conn, tbl)
	// What KeepAlive runs, then committed while the takeover waits.
	if _, err := tx.Exec(ctx, `UPDATE public.`+tbl+` SET beat = beat + 1, ttl_ms = $2 WHERE key = $1`, "k", ttl.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !errors.Is(takeErr, backends.ErrExists) {
		t.Fatalf("takeover racing a keep-alive = %v, want ErrExists (the claim is live)", takeErr)
	}
	if got, err := holder.Get(ctx, "k"); err != nil || got.CreateRevision != e.CreateRevision || string(got.Value) != "holder" {
		t.Errorf("after the race Get = %+v, %v; want the holder's entry, token %d", got, err, e.CreateRevision)
	}
}

// waitLockWait polls until a query on tbl waits for a row lock.
func waitLockWait(t *testing.T, ctx context.Context, conn *pgx.Conn, tbl string) {
	t.Helper()
	for {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`, tbl).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("no query waited for the row lock")
		case <-time.After(5 * time.Millisecond): // polling the server, not timing
		}
	}
}

// TestSetupConcurrent checks that many stores opening one new table at once
// all succeed (the setup is serialized), and WithoutSetup over a missing
// table fails with ErrMissingResource.
func TestSetupConcurrent(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	if _, err := postgres.Open(ctx, dsn, postgres.WithTable("public", tbl), postgres.WithoutSetup()); !errors.Is(err, backends.ErrMissingResource) {
		t.Errorf("Open WithoutSetup of a missing table = %v, want ErrMissingResource", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := postgres.Open(ctx, dsn, postgres.WithTable("other", tbl))
			if err == nil {
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent Open %d: %v", i, err)
		}
	}
	sql, err := postgres.SetupSQL(postgres.WithTable("other", tbl))
	if err != nil || !strings.Contains(sql, `CREATE TABLE IF NOT EXISTS "other"."`+tbl+`"`) {
		t.Errorf("SetupSQL = %q, %v", sql, err)
	}
	for _, bad := range [][2]string{{"Public", "t"}, {"s", "t;drop"}, {"s", ""}, {"s", strings.Repeat("a", 49)}} {
		if _, err := postgres.Open(ctx, dsn, postgres.WithTable(bad[0], bad[1])); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("WithTable(%q, %q) = %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
}

// TestWatchLargeValue checks that a value too large for a NOTIFY payload
// still comes through the watch, read from the table.
func TestWatchLargeValue(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	s := open(t, dsn, tbl)
	ch, err := s.Watch(ctx, "big/")
	if err != nil {
		t.Fatal(err)
	}
	v := []byte(strings.Repeat("x", backends.MaxValueBytes))
	e, err := s.CreateIfAbsent(ctx, "big/k", v, 0)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev, ok := <-ch:
		if !ok || ev.Kind != backends.EventPut || ev.Entry.Revision != e.Revision || string(ev.Entry.Value) != string(v) {
			t.Fatalf("event = %v %q@%d (%d bytes), %v; want put big/k@%d with the value", ev.Kind, ev.Entry.Key, ev.Entry.Revision, len(ev.Entry.Value), ok, e.Revision)
		}
	case <-ctx.Done():
		t.Fatal("no event")
	}
}

// TestWatchesShareConnection checks that the watches of one store share one
// listening connection (an elector per claim watches its claim: a connection
// each would be a server backend per claim and candidate), and each still
// gets only its own prefix, from the moment it was opened.
func TestWatchesShareConnection(t *testing.T) {
	srv := sharedServer(t)
	db := srv.NewDatabase(t)
	dsn, tbl := srv.DSN(db), newTable()
	ctx := testCtx(t)
	s := open(t, dsn, tbl)
	var chs []<-chan backends.Event
	for i := range 10 {
		if _, err := s.CreateIfAbsent(ctx, fmt.Sprintf("p%d/before", i), nil, 0); err != nil {
			t.Fatal(err)
		}
		ch, err := s.Watch(ctx, fmt.Sprintf("p%d/", i))
		if err != nil {
			t.Fatal(err)
		}
		chs = append(chs, ch)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND datname = current_database()`).Scan(&n); err != nil || n != 1 {
		t.Errorf("listening connections for 10 watches = %d, %v; want 1", n, err)
	}
	for i := range 10 {
		if _, err := s.CreateIfAbsent(ctx, fmt.Sprintf("p%d/after", i), nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i, ch := range chs {
		ev := <-ch
		if want := fmt.Sprintf("p%d/after", i); ev.Entry.Key != want {
			t.Errorf("watch %d: first event %v %q, want put %q", i, ev.Kind, ev.Entry.Key, want)
		}
	}
}
