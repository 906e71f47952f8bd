package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/backends/postgres/pgtest"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/storeurl"
)

// Failover tests: a primary and a streaming standby started by the test
// (pg_basebackup -R), stores that list both hosts and connect only to the
// one that accepts writes.

// pair starts a primary with a database and a streaming standby of it,
// synchronous if sync is set, and returns them with the database's name.
func pair(t *testing.T, sync bool) (primary, standby *pgtest.Server, db string) {
	t.Helper()
	primary = pgtest.Start(t)
	db = primary.NewDatabase(t)
	standby = primary.StartStandby(t)
	if sync {
		primary.SetSynchronous(t, true)
	}
	primary.WaitStandbys(t, 1, sync)
	return primary, standby, db
}

// bothHosts is the connection URL of db that lists both servers, first
// first, and connects only to one that accepts writes.
func bothHosts(first, second *pgtest.Server, db string) string {
	return fmt.Sprintf("postgres://postgres@%s,%s/%s?sslmode=disable&target_session_attrs=read-write", first.Addr(), second.Addr(), db)
}

// TestPromotionSynchronous runs three electors over stores that list the
// primary and its synchronous standby. The primary is killed (SIGKILL) while
// one leads, and the standby promoted: the electors reconnect to it without
// being reopened, one leads again, no two terms overlap and the tokens
// strictly increase across the failover: every keep-alive the holder was told
// had committed reached the standby first.
func TestPromotionSynchronous(t *testing.T) {
	primary, standby, db := pair(t, true)
	dsn, tbl := bothHosts(primary, standby, db), newTable()
	ts := electortest.NewTerms(clock.New())
	for _, who := range []string{"a", "b", "c"} {
		startElector(t, newLocker(t, open(t, dsn, tbl)), "leader", who, ts)
	}
	leader := ts.Next(t, within(t, faultLimit))
	primary.Kill(t)
	waitNotLeading(t, ts, leader)
	standby.Promote(t)
	next := ts.Next(t, within(t, faultLimit))
	all := ts.Check(t)
	electortest.EndsByDeadline(t, all)
	t.Logf("%s led; the primary was killed and the standby promoted; %s was elected; terms %v", leader, next, tokensOf(all))
}

// TestOpenRefusesAsyncStandbys checks that a primary that streams to a
// standby it does not wait for is refused, by name, unless the caller accepts
// it.
func TestOpenRefusesAsyncStandbys(t *testing.T) {
	primary, standby, db := pair(t, false)
	dsn := primary.DSN(db)
	ctx := within(t, faultLimit)
	// The standby itself: Open connects only to a server that accepts
	// writes; a pool of the caller's that reached it is refused by New.
	if _, err := postgres.Open(ctx, standby.DSN(db), postgres.WithTable("public", newTable())); !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("Open on a standby: %v, want ErrUnavailable", err)
	}
	pool, err := pgxpool.New(ctx, standby.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := postgres.New(ctx, pool, postgres.WithTable("public", newTable())); !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "standby") {
		t.Errorf("New over a pool on a standby: %v, want ErrUnavailable saying it is a standby", err)
	}
	_, err = postgres.Open(ctx, dsn, postgres.WithTable("public", newTable()))
	if !errors.Is(err, backends.ErrUnsupported) || !strings.Contains(err.Error(), "synchronous_standby_names") || backends.Classify(err) != backends.ClassFatal {
		t.Fatalf("Open on a primary with an asynchronous standby: %v, want a fatal error naming synchronous_standby_names", err)
	}
	s, err := postgres.Open(ctx, dsn, postgres.WithTable("public", newTable()), postgres.WithAsyncStandbys())
	if err != nil {
		t.Fatalf("Open with WithAsyncStandbys: %v", err)
	}
	s.Close()
	u, err := storeurl.Open(ctx, dsn+"&create=true&async_standbys=accept")
	if err != nil {
		t.Fatalf("storeurl.Open with async_standbys=accept: %v", err)
	}
	u.Close()
	_, err = storeurl.Open(ctx, dsn+"&create=true")
	if !errors.Is(err, backends.ErrUnsupported) {
		t.Fatalf("storeurl.Open without async_standbys: %v, want ErrUnsupported", err)
	}
	// One line that says open once and counts in English.
	if msg := err.Error(); strings.Count(msg, "open") != 2 || !strings.Contains(msg, "streams to 1 standby and") {
		t.Errorf("storeurl.Open without async_standbys: %q, want storeurl's open, the store's open database, and \"streams to 1 standby and\"", msg)
	}
	// Synchronous_commit = local does not wait for the standby either.
	primary.SetSynchronous(t, true)
	primary.Exec(t, "ALTER DATABASE "+db+" SET synchronous_commit = local")
	_, err = postgres.Open(ctx, dsn, postgres.WithTable("public", newTable()))
	if !errors.Is(err, backends.ErrUnsupported) || !strings.Contains(err.Error(), "synchronous_commit") {
		t.Fatalf("Open with synchronous_commit = local: %v, want ErrUnsupported naming synchronous_commit", err)
	}
}

// TestReadOnlyConnectionsDiscarded covers a store whose pool holds
// connections to the primary when the primary is fenced read-only
// (default_transaction_read_only, as failover tools fence an old primary) and
// the standby promoted. A write on such a connection fails with 25006,
// transient; the connection is closed, so a later write connects again,
// passes over the read-only server and reaches the new primary, without
// reopening the store. Before, the pool handed the same connections out again
// and every write failed for good.
func TestReadOnlyConnectionsDiscarded(t *testing.T) {
	primary, standby, db := pair(t, true)
	tbl := newTable()
	s := open(t, bothHosts(primary, standby, db), tbl)
	ctx := within(t, faultLimit)
	if _, err := s.CreateIfAbsent(ctx, "before", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	primary.SetSynchronous(t, false)
	primary.Exec(t, "ALTER SYSTEM SET default_transaction_read_only = on")
	primary.Exec(t, "SELECT pg_reload_conf()")
	standby.Promote(t)
	var errs []string
	for i := range 20 {
		key := fmt.Sprintf("after-%d", i)
		_, err := s.CreateIfAbsent(ctx, key, []byte("x"), 0)
		if err == nil {
			// Written on the new primary, the one that accepts writes.
			probe := open(t, standby.DSN(db), tbl, postgres.WithoutSetup())
			if _, err := probe.Get(ctx, key); err != nil {
				t.Fatalf("write %d succeeded but the new primary has no %q: %v", i, key, err)
			}
			t.Logf("write %d reached the new primary; before it: %v", i, errs)
			return
		}
		if backends.Classify(err) != backends.ClassTransient {
			t.Fatalf("write %d: %v, want a transient error", i, err)
		}
		errs = append(errs, err.Error())
	}
	t.Fatalf("20 writes after the failover failed, the last: %s", errs[len(errs)-1])
}

// TestOpenRefusesUnseenStandbys checks that a role that may not read
// sync_state in pg_stat_replication cannot tell a synchronous standby from an
// asynchronous one, so Open refuses it, naming the role to grant, unless the
// caller accepts asynchronous standbys; granted pg_read_all_stats, it opens.
func TestOpenRefusesUnseenStandbys(t *testing.T) {
	primary, _, db := pair(t, true)
	tbl := newTable()
	open(t, primary.DSN(db), tbl)                   // the objects, made by the superuser
	primary.Exec(t, "CREATE ROLE tenure_app LOGIN") // on a server of this test's own
	super, err := pgxConnect(within(t, faultLimit), primary.DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close(context.Background())
	if _, err := super.Exec(within(t, faultLimit), "GRANT SELECT, INSERT, UPDATE, DELETE ON "+tbl+" TO tenure_app; GRANT USAGE ON SEQUENCE \""+tbl+"$rev\" TO tenure_app"); err != nil {
		t.Fatal(err)
	}
	dsn := strings.Replace(primary.DSN(db), "postgres@", "tenure_app@", 1)
	ctx := within(t, faultLimit)
	_, err = postgres.Open(ctx, dsn, postgres.WithTable("public", tbl), postgres.WithoutSetup())
	if !errors.Is(err, backends.ErrUnsupported) || !strings.Contains(err.Error(), "pg_read_all_stats") {
		t.Fatalf("Open as a role without pg_read_all_stats: %v, want ErrUnsupported naming pg_read_all_stats", err)
	}
	s, err := postgres.Open(ctx, dsn, postgres.WithTable("public", tbl), postgres.WithoutSetup(), postgres.WithAsyncStandbys())
	if err != nil {
		t.Fatalf("Open with WithAsyncStandbys: %v", err)
	}
	s.Close()
	primary.Exec(t, "GRANT pg_read_all_stats TO tenure_app")
	s, err = postgres.Open(ctx, dsn, postgres.WithTable("public", tbl), postgres.WithoutSetup())
	if err != nil {
		t.Fatalf("Open once granted pg_read_all_stats: %v", err)
	}
	s.Close()
}

// TestWatchFollowsNewPrimary covers a watch listening on the primary when it
// is fenced read-only and the standby promoted. Once a write is refused as
// read-only, the store ends the listening connection and every stream with
// it; a new Watch listens on the new primary and sees its writes. Before, the
// stream stayed open on the old primary, which saw no write again, and a new
// Watch waited for its start marker, sent to the new primary, for ever.
func TestWatchFollowsNewPrimary(t *testing.T) {
	primary, standby, db := pair(t, true)
	s := open(t, bothHosts(primary, standby, db), newTable())
	ctx := within(t, faultLimit)
	old, err := s.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	primary.SetSynchronous(t, false)
	primary.Exec(t, "ALTER SYSTEM SET default_transaction_read_only = on")
	primary.Exec(t, "SELECT pg_reload_conf()")
	standby.Promote(t)
	for i := 0; ; i++ {
		if i == 20 {
			t.Fatal("20 writes after the failover failed")
		}
		if _, err := s.CreateIfAbsent(ctx, fmt.Sprintf("after-%d", i), []byte("x"), 0); err == nil {
			break
		}
	}
	for open := true; open; {
		select {
		case _, open = <-old:
		case <-ctx.Done():
			t.Fatal("the watch on the fenced primary is still open after a write was refused there")
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ch, err := s.Watch(wctx, "")
	if err != nil {
		t.Fatalf("Watch after the failover: %v", err)
	}
	if _, err := s.CreateIfAbsent(ctx, "seen", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("the new watch ended before the write")
			}
			if ev.Entry.Key == "seen" {
				return
			}
		case <-wctx.Done():
			t.Fatal("the new watch did not see a write on the new primary")
		}
	}
}

// TestOpenWaitsForSyncStandby checks that a primary that waits at every commit for
// a synchronous standby and has none (a promoted standby that kept the old
// primary's synchronous_standby_names, or one whose standby is being
// rebuilt) holds an open until one streams; when the caller's ctx ends
// first, the open fails as unavailable, naming the setting, instead of
// giving a store whose every write times out. An open that waits
// completes once a standby streams.
func TestOpenWaitsForSyncStandby(t *testing.T) {
	srv := pgtest.Start(t)
	db := srv.NewDatabase(t)
	dsn := srv.DSN(db)
	tbl := newTable()
	open(t, dsn, tbl).Close()
	srv.SetSynchronous(t, true)
	for _, opts := range [][]postgres.Option{{postgres.WithoutSetup()}, {postgres.WithoutSetup(), postgres.WithAsyncStandbys()}} {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		s, err := postgres.Open(ctx, dsn, append([]postgres.Option{postgres.WithTable("public", tbl)}, opts...)...)
		cancel()
		if err == nil {
			s.Close()
		}
		if !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "synchronous_standby_names") {
			t.Errorf("Open (options %d) on a primary waiting for a synchronous standby it lacks = %v, want ErrUnavailable naming synchronous_standby_names", len(opts), err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	_, err := storeurl.Open(ctx, dsn+"&create=true&table=public."+newTable())
	cancel()
	if !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "synchronous_standby_names") {
		t.Errorf("storeurl.Open with create=true on that primary = %v, want ErrUnavailable naming synchronous_standby_names", err)
	}

	opened := make(chan error, 1)
	go func() {
		s, err := postgres.Open(within(t, faultLimit), dsn, postgres.WithTable("public", tbl))
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	srv.StartStandby(t)
	srv.WaitStandbys(t, 1, true)
	if err := <-opened; err != nil {
		t.Errorf("Open that waited while a synchronous standby started = %v, want a store", err)
	}
}

// TestOpenReadOnlyOnAsyncPrimary checks that a store opened read-only opens
// on a primary with an asynchronous standby, which a store that writes is
// refused, reads as usual, and refuses every write before it reaches the
// server, so that it can never make a holder.
func TestOpenReadOnlyOnAsyncPrimary(t *testing.T) {
	primary, _, db := pair(t, false)
	dsn, tbl := primary.DSN(db), newTable()
	ctx := within(t, faultLimit)
	w := open(t, dsn, tbl, postgres.WithAsyncStandbys())
	held, err := w.CreateIfAbsent(ctx, "held", []byte("v"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	r, err := postgres.Open(ctx, dsn, postgres.WithTable("public", tbl), postgres.WithReadOnly())
	if err != nil {
		t.Fatalf("Open read-only on a primary with an asynchronous standby: %v", err)
	}
	defer r.Close()
	if e, err := r.Get(ctx, "held"); err != nil || e.Revision != held.Revision {
		t.Fatalf("Get on the read-only store = %+v, %v, want revision %d", e, err, held.Revision)
	}
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"create", func() error { _, err := r.CreateIfAbsent(ctx, "new", []byte("v"), time.Minute); return err }},
		{"cas", func() error {
			_, err := r.CompareAndSet(ctx, "held", held.Revision, []byte("w"), time.Minute)
			return err
		}},
		{"delete", func() error { return r.CompareAndDelete(ctx, "held", held.Revision) }},
		{"keepalive", func() error { _, err := r.KeepAlive(ctx, "held", held.Revision, time.Minute); return err }},
		{"txn", func() error {
			_, err := r.Txn(ctx, nil, []backends.Op{{Kind: backends.OpDelete, Key: "held"}})
			return err
		}},
	} {
		if err := op.do(); !errors.Is(err, backends.ErrPermission) || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("%s on the read-only store: %v, want ErrPermission saying it is read-only", op.name, err)
		}
	}
	if e, err := w.Get(ctx, "held"); err != nil || e.Revision != held.Revision {
		t.Errorf("after the refused writes Get = %+v, %v, want revision %d unchanged", e, err, held.Revision)
	}
	if _, err := w.Get(ctx, "new"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("after the refused create Get(new) = %v, want ErrNotFound", err)
	}
	// By URL, as tenure holders opens it: read-only is enough, without
	// async_standbys=accept; a missing table is refused, never made.
	for _, c := range []struct {
		table    string
		readOnly bool
		want     error
	}{
		{tbl, true, nil},
		{tbl, false, backends.ErrUnsupported},
		{newTable(), true, backends.ErrMissingResource},
	} {
		loc, err := storeurl.Parse(dsn + "&table=public." + c.table)
		if err != nil {
			t.Fatal(err)
		}
		loc.ReadOnly = c.readOnly
		s, err := loc.Open(ctx)
		if c.want == nil {
			if err != nil {
				t.Errorf("Open(%s, read-only %v) = %v, want success", loc, c.readOnly, err)
				continue
			}
			if _, err := s.Get(ctx, "held"); err != nil {
				t.Errorf("Get by URL read-only: %v", err)
			}
			s.Close()
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("Open(%s, read-only %v) = %v, want %v", loc, c.readOnly, err, c.want)
		}
		if s != nil {
			s.Close()
		}
	}
}

// TestWriteTimeoutNamesMissingSyncStandby checks that a store already open
// when its primary begins to wait at every commit for a synchronous standby
// that is not there (synchronous_standby_names set, no standby: a promoted
// standby that kept the setting) says so in its timed-out writes, still
// transient and still the context's error, not only that the deadline
// passed. The store looks on a connection of its own and at most every few
// seconds, so the first timeout may come back before the answer.
func TestWriteTimeoutNamesMissingSyncStandby(t *testing.T) {
	srv := pgtest.Start(t)
	db := srv.NewDatabase(t)
	s := open(t, srv.DSN(db), newTable())
	ctx := within(t, faultLimit)
	if _, err := s.CreateIfAbsent(ctx, "before", []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	srv.SetSynchronous(t, true) // '*' with no standby: every commit waits
	var err error
	for i := range 20 {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err = s.CreateIfAbsent(wctx, fmt.Sprintf("k%d", i), []byte("v"), time.Minute)
		cancel()
		if err == nil {
			continue // before the server's backends reloaded the setting
		}
		if !errors.Is(err, context.DeadlineExceeded) || backends.Classify(err) != backends.ClassTransient {
			t.Fatalf("write %d: %v, want a transient error wrapping the deadline", i, err)
		}
		if strings.Contains(err.Error(), "synchronous_standby_names") {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), `synchronous_standby_names is "*"`) || !strings.Contains(err.Error(), "no synchronous standby streams") {
		t.Errorf("timed-out write: %v, want it to name synchronous_standby_names and the missing standby", err)
	}
	t.Logf("timed-out write: %v", err)
}
