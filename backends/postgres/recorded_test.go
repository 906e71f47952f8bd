package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/clocktest"
)

// serverClock reads the server's clock_timestamp() on a connection of its
// own, to bound the time a statement in between recorded.
type serverClock struct {
	t    *testing.T
	conn *pgx.Conn
}

func newServerClock(t *testing.T, ctx context.Context, dsn string) serverClock {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return serverClock{t: t, conn: conn}
}

func (c serverClock) now(ctx context.Context) time.Time {
	c.t.Helper()
	var ts time.Time
	if err := c.conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&ts); err != nil {
		c.t.Fatal(err)
	}
	return ts
}

// between checks that got, the Recorded of what op returned, lies within
// the server's clock readings before and after op.
func between(t *testing.T, op string, got, before, after time.Time) {
	t.Helper()
	if got.IsZero() || got.Before(before) || got.After(after) {
		t.Errorf("%s: Recorded %v, want the server's time of the write, within [%v, %v]", op, got, before, after)
	}
}

// hasRecorded reports whether table tbl has the recorded column.
func hasRecorded(t *testing.T, ctx context.Context, dsn, tbl string) bool {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1 AND column_name = 'recorded'`, tbl).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// TestRecordedByServerClock checks that every statement that writes a row or
// bumps its beat (create, keep-alive, a batched keep-alive, compare-and-set,
// a Txn put, a takeover) records the server's clock_timestamp() at that
// statement, which the write's answer and later reads (Get, List) return as
// Entry.Recorded: each lies between readings of the server's clock taken
// before and after the statement, and a keep-alive moves it forward. The
// recorded time is never judged: a row whose recorded time an operator set
// far in the past, or to infinity, stays live for a store that saw it
// renewed, with the Remaining it observed.
func TestRecordedByServerClock(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	clk := clocktest.New(time.Time{})
	s := open(t, dsn, tbl, postgres.WithClock(clk))
	batched := open(t, dsn, tbl, postgres.WithBatchedKeepAlive(0))
	sc := newServerClock(t, ctx, dsn)
	const ttl = time.Hour

	before := sc.now(ctx)
	e, err := s.CreateIfAbsent(ctx, "k", []byte("v"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	between(t, "CreateIfAbsent", e.Recorded, before, sc.now(ctx))
	if got, err := s.Get(ctx, "k"); err != nil || !got.Recorded.Equal(e.Recorded) {
		t.Errorf("Get after the create = (Recorded %v, %v), want %v", got.Recorded, err, e.Recorded)
	}

	before = sc.now(ctx)
	k, err := s.KeepAlive(ctx, "k", e.Revision, ttl)
	if err != nil {
		t.Fatal(err)
	}
	between(t, "KeepAlive", k.Recorded, before, sc.now(ctx))
	if !k.Recorded.After(e.Recorded) {
		t.Errorf("KeepAlive: Recorded %v, want after the create's %v", k.Recorded, e.Recorded)
	}
	if l, err := s.List(ctx, ""); err != nil || len(l) != 1 || !l[0].Recorded.Equal(k.Recorded) {
		t.Errorf("List after the keep-alive = %+v, %v, want k recorded at %v", l, err, k.Recorded)
	}

	before = sc.now(ctx)
	b, err := batched.KeepAlive(ctx, "k", e.Revision, ttl)
	if err != nil {
		t.Fatal(err)
	}
	between(t, "batched KeepAlive", b.Recorded, before, sc.now(ctx))

	before = sc.now(ctx)
	c, err := s.CompareAndSet(ctx, "k", e.Revision, []byte("w"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	between(t, "CompareAndSet", c.Recorded, before, sc.now(ctx))

	before = sc.now(ctx)
	res, err := s.Txn(ctx, []backends.Cond{{Key: "k", Revision: c.Revision}}, []backends.Op{{Kind: backends.OpPut, Key: "k", Value: []byte("x"), TTL: ttl}})
	if err != nil {
		t.Fatal(err)
	}
	after := sc.now(ctx)
	between(t, "Txn put", res.Entries[0].Recorded, before, after)
	got, err := s.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	between(t, "Get after the Txn", got.Recorded, before, after)

	// A takeover, once this store saw the entry unchanged for its TTL.
	clk.Add(ttl)
	before = sc.now(ctx)
	taken, err := s.CreateIfAbsent(ctx, "k", []byte("taker"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	between(t, "takeover", taken.Recorded, before, sc.now(ctx))

	// Never judged: the time is shown as stored, and the store's own
	// observation alone decides.
	clk.Add(ttl / 2)
	long := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	rawExec(t, ctx, dsn, `UPDATE public.`+tbl+` SET recorded = '2000-01-01 00:00:00+00' WHERE key = 'k'`)
	got, err = s.Get(ctx, "k")
	if err != nil || got.Remaining != ttl/2 || !got.Recorded.Equal(long) {
		t.Errorf("Get with recorded set long ago = (Remaining %v, Recorded %v, %v), want live with %v left, recorded %v", got.Remaining, got.Recorded, err, ttl/2, long)
	}
	rawExec(t, ctx, dsn, `UPDATE public.`+tbl+` SET recorded = 'infinity' WHERE key = 'k'`)
	got, err = s.Get(ctx, "k")
	if err != nil || got.Remaining != ttl/2 || !got.Recorded.IsZero() {
		t.Errorf("Get with recorded infinity = (Remaining %v, Recorded %v, %v), want live with %v left, no recorded time", got.Remaining, got.Recorded, err, ttl/2)
	}
}

// TestRecordedLegacyTable checks tables made by the version before the
// recorded column: a store that may not change them (WithoutSetup, or a role
// that may not alter the table) opens and works, with Recorded zero; Setup
// (New without WithoutSetup, or SetupSQL's statements) adds the column, after
// which writes record their time. A store opened before the column was added
// goes on working beside it, and its keep-alives leave the recorded time as
// it was.
func TestRecordedLegacyTable(t *testing.T) {
	srv := sharedServer(t)
	dsn := srv.DSN(srv.NewDatabase(t))
	ctx := testCtx(t)
	// legacy makes a table as the version before did: everything but the
	// recorded column.
	legacy := func() string {
		tbl := newTable()
		open(t, dsn, tbl).Close()
		rawExec(t, ctx, dsn, `ALTER TABLE public.`+tbl+` DROP COLUMN recorded`)
		return tbl
	}
	const ttl = time.Hour

	tbl := legacy()
	old := open(t, dsn, tbl, postgres.WithoutSetup())
	a, err := old.CreateIfAbsent(ctx, "a", []byte("v"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Recorded.IsZero() {
		t.Errorf("create over a table without the column: Recorded %v, want zero", a.Recorded)
	}
	if k, err := old.KeepAlive(ctx, "a", a.Revision, ttl); err != nil || !k.Recorded.IsZero() {
		t.Errorf("KeepAlive over a table without the column = (Recorded %v, %v), want zero", k.Recorded, err)
	}
	if l, err := old.List(ctx, ""); err != nil || len(l) != 1 || !l[0].Recorded.IsZero() {
		t.Errorf("List over a table without the column = %+v, %v, want a, Recorded zero", l, err)
	}
	res, err := old.Txn(ctx, nil, []backends.Op{{Kind: backends.OpPut, Key: "b", Value: []byte("v"), TTL: ttl}})
	if err != nil || !res.Entries[0].Recorded.IsZero() {
		t.Errorf("Txn over a table without the column = %+v, %v, want Recorded zero", res, err)
	}
	if hasRecorded(t, ctx, dsn, tbl) {
		t.Fatal("WithoutSetup added the column")
	}

	// A role that may use the table but not alter it opens without
	// WithoutSetup, as before the column existed.
	role := "limited_" + tbl
	rawExec(t, ctx, dsn,
		`CREATE ROLE `+role+` LOGIN`,
		`GRANT USAGE ON SCHEMA public TO `+role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON public.`+tbl+` TO `+role,
		`GRANT USAGE, UPDATE ON SEQUENCE `+seqOf(t, ctx, dsn, tbl)+` TO `+role)
	limited := open(t, strings.Replace(dsn, "postgres@", role+"@", 1), tbl)
	if k, err := limited.KeepAlive(ctx, "a", a.Revision, ttl); err != nil || !k.Recorded.IsZero() {
		t.Errorf("KeepAlive by a role that may not alter the table = (Recorded %v, %v), want zero", k.Recorded, err)
	}
	if hasRecorded(t, ctx, dsn, tbl) {
		t.Fatal("a role that may not alter the table added the column")
	}

	// Setup adds it; the store opened before goes on beside the new one.
	sc := newServerClock(t, ctx, dsn)
	s := open(t, dsn, tbl)
	if !hasRecorded(t, ctx, dsn, tbl) {
		t.Fatal("Setup did not add the recorded column to a table without it")
	}
	if g, err := s.Get(ctx, "a"); err != nil || !g.Recorded.IsZero() {
		t.Errorf("Get of a row written before the column = (Recorded %v, %v), want zero", g.Recorded, err)
	}
	before := sc.now(ctx)
	k, err := s.KeepAlive(ctx, "a", a.Revision, ttl)
	if err != nil {
		t.Fatal(err)
	}
	between(t, "KeepAlive after Setup", k.Recorded, before, sc.now(ctx))
	if _, err := old.KeepAlive(ctx, "a", a.Revision, ttl); err != nil {
		t.Fatalf("KeepAlive by the store opened before the column: %v", err)
	}
	if g, err := s.Get(ctx, "a"); err != nil || !g.Recorded.Equal(k.Recorded) {
		t.Errorf("Get after an older store's keep-alive = (Recorded %v, %v), want %v, left as it was", g.Recorded, err, k.Recorded)
	}

	// SetupSQL's statements, as a migration tool runs them, add it too.
	tbl = legacy()
	sql, err := postgres.SetupSQL(postgres.WithTable("public", tbl))
	if err != nil || !strings.Contains(sql, `ADD COLUMN IF NOT EXISTS recorded timestamptz`) {
		t.Fatalf("SetupSQL = %q, %v, want it to add the recorded column", sql, err)
	}
	rawExec(t, ctx, dsn, sql)
	m := open(t, dsn, tbl, postgres.WithoutSetup())
	before = sc.now(ctx)
	e, err := m.CreateIfAbsent(ctx, "a", nil, ttl)
	if err != nil {
		t.Fatal(err)
	}
	between(t, "create after SetupSQL", e.Recorded, before, sc.now(ctx))
}

// TestRecordedSetupBounded checks that adding the recorded column to a table
// whose writer holds it in an open transaction waits a bounded time: Setup
// then fails as unavailable, and New, for which the column is all that is
// missing, opens without it. The writer's transaction is held open on a
// connection of the test's own.
func TestRecordedSetupBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a lock timeout")
	}
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	open(t, dsn, tbl).Close()
	rawExec(t, ctx, dsn, `ALTER TABLE public.`+tbl+` DROP COLUMN recorded`)

	writer, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(context.Background())
	tx, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `INSERT INTO public.`+tbl+` (key, value, rev, create_rev, ttl_ms, beat) VALUES ('held', '', 1, 1, 0, 0)`); err != nil {
		t.Fatal(err)
	}

	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	err = postgres.Setup(ctx, pool, postgres.WithTable("public", tbl))
	if !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("Setup while a writer holds the table = %v, want it to give up as unavailable", err)
	}
	s, err := postgres.New(ctx, pool, postgres.WithTable("public", tbl))
	if err != nil {
		t.Fatalf("New while a writer holds a table that lacks only the recorded column: %v, want it open without the column", err)
	}
	defer s.Close()
	if _, err := s.CreateIfAbsent(ctx, "k", nil, 0); err != nil {
		t.Errorf("create by the store opened without the column: %v", err)
	}
	if hasRecorded(t, ctx, dsn, tbl) {
		t.Error("the column was added while the writer held the table")
	}
}
