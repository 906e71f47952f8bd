package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/storeurl"
)

// openURL opens table tbl of dsn by URL, as a program's --store flag
// does, creating objects if create, and returns the error.
func openURL(ctx context.Context, dsn, tbl string, create bool) error {
	raw := dsn + "&table=public." + tbl
	if create {
		raw += "&create=true"
	}
	s, err := storeurl.Open(ctx, raw)
	if err == nil {
		s.Close()
	}
	return err
}

// rawExec runs statements on a connection of its own, as an operator or a
// migration would.
func rawExec(t *testing.T, ctx context.Context, dsn string, qs ...string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, q := range qs {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// seqOf returns the sequence the table's rev column owns, or else the one
// named as earlier versions named it.
func seqOf(t *testing.T, ctx context.Context, dsn, tbl string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var seq *string
	if err := conn.QueryRow(ctx, `SELECT pg_get_serial_sequence($1, 'rev')`, "public."+tbl).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if seq == nil {
		return "public." + tbl + "_rev"
	}
	return *seq
}

// tokensUpTo leaves key k deleted after its token reached some value, and
// key x live with the highest revision in the table; it returns k's last
// revision and x's entry.
func tokensUpTo(t *testing.T, ctx context.Context, s *postgres.Store) (int64, backends.Entry) {
	t.Helper()
	e, err := s.CreateIfAbsent(ctx, "k", []byte("v"), 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if e, err = s.CompareAndSet(ctx, "k", e.Revision, []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
	}
	x, err := s.CreateIfAbsent(ctx, "x", []byte("x"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompareAndDelete(ctx, "k", e.Revision); err != nil {
		t.Fatal(err)
	}
	return e.Revision, x
}

// TestSequenceRecreatedBehindTable covers a migration that drops the table's
// sequence (or the table is restored without it); the rows keep revisions up
// to R. The next store to open moves the new sequence past R, so a key
// deleted before, created again, gets a token above every token of the table.
func TestSequenceRecreatedBehindTable(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	s := open(t, dsn, tbl)
	kRev, x := tokensUpTo(t, ctx, s)
	s.Close()

	rawExec(t, ctx, dsn, `DROP SEQUENCE `+seqOf(t, ctx, dsn, tbl))
	s = open(t, dsn, tbl)
	e, err := s.CreateIfAbsent(ctx, "k", []byte("again"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if e.CreateRevision <= x.Revision || e.CreateRevision <= kRev {
		t.Errorf("token of k created again after the sequence was recreated = %d, want above %d (x, the highest revision in the table) and %d (k's last)", e.CreateRevision, x.Revision, kRev)
	}
}

// TestSequenceResetWhileRunning resets the sequence under a running store
// (setval, RESTART). The store's next write draws a revision below what it
// has seen: the statement refuses it, nothing is written, and the store moves
// the sequence forward before it answers; the write then succeeds, with a
// token above every one before. A store whose role may not move the sequence
// refuses with a fatal error instead.
func TestSequenceResetWhileRunning(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	s := open(t, dsn, tbl)
	kRev, x := tokensUpTo(t, ctx, s)
	seq := seqOf(t, ctx, dsn, tbl)

	rawExec(t, ctx, dsn, `ALTER SEQUENCE `+seq+` RESTART WITH 1`)
	_, err := s.CreateIfAbsent(ctx, "k", []byte("again"), 0)
	if !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("create after the reset = %v, want a refusal wrapping ErrUnavailable (nothing written, sequence moved)", err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get(k) after the refused create = %v, want ErrNotFound", err)
	}
	e, err := s.CreateIfAbsent(ctx, "k", []byte("again"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if e.CreateRevision <= kRev || e.CreateRevision <= x.Revision {
		t.Errorf("token of k after the reset = %d, want above %d and %d", e.CreateRevision, kRev, x.Revision)
	}

	// An update is refused the same way by a store that opened before the
	// reset and had seen nothing.
	fresh := open(t, dsn, tbl)
	rawExec(t, ctx, dsn, `ALTER SEQUENCE `+seq+` RESTART WITH 1`)
	if _, err := fresh.CompareAndSet(ctx, "x", x.Revision, []byte("y"), 0); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("CAS after a reset = %v, want ErrUnavailable", err)
	}
	u, err := fresh.CompareAndSet(ctx, "x", x.Revision, []byte("y"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if u.Revision <= e.Revision {
		t.Errorf("revision after the reset = %d, want above %d", u.Revision, e.Revision)
	}

	// A role that may draw from the sequence but not move it.
	role := "limited_" + tbl
	rawExec(t, ctx, dsn,
		`CREATE ROLE `+role+` LOGIN`,
		`GRANT USAGE ON SCHEMA public TO `+role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON public.`+tbl+` TO `+role,
		`GRANT USAGE ON SEQUENCE `+seq+` TO `+role)
	limited := open(t, strings.Replace(dsn, "postgres@", role+"@", 1), tbl, postgres.WithoutSetup())
	if _, err := limited.Get(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	rawExec(t, ctx, dsn, `ALTER SEQUENCE `+seq+` RESTART WITH 1`)
	_, err = limited.CompareAndSet(ctx, "x", u.Revision, []byte("z"), 0)
	if c := backends.Classify(err); c != backends.ClassFatal || !errors.Is(err, backends.ErrPermission) {
		t.Fatalf("CAS by a role that may not move the sequence = %v (class %v), want fatal, wrapping ErrPermission", err, c)
	}
	if got, err := limited.Get(ctx, "x"); err != nil || got.Revision != u.Revision {
		t.Fatalf("Get(x) after the refused CAS = (rev %d, %v), want rev %d: nothing written", got.Revision, err, u.Revision)
	}
	// Opening refuses too, naming the sequence.
	_, err = postgres.Open(ctx, strings.Replace(dsn, "postgres@", role+"@", 1), postgres.WithTable("public", tbl), postgres.WithoutSetup())
	if c := backends.Classify(err); c != backends.ClassFatal || err == nil || !strings.Contains(err.Error(), "setval") {
		t.Fatalf("Open by a role that may not move a sequence behind the table = %v (class %v), want a fatal error saying what to run", err, c)
	}
}

// TestSequenceSettingsRefused covers sequences whose revisions break: one
// with a cache lets two sessions hand out revisions out of order, one that
// cycles or counts down repeats them. A store refuses to open over one,
// naming the setting.
func TestSequenceSettingsRefused(t *testing.T) {
	srv := sharedServer(t)
	dsn := srv.DSN(srv.NewDatabase(t))
	ctx := testCtx(t)
	for _, tc := range []struct{ alter, want string }{
		{"CACHE 32", "cache 32"},
		{"CYCLE", "CYCLE"},
		{"INCREMENT BY -1", "increment -1"},
	} {
		t.Run(tc.alter, func(t *testing.T) {
			tbl := newTable()
			open(t, dsn, tbl).Close()
			rawExec(t, ctx, dsn, `ALTER SEQUENCE `+seqOf(t, ctx, dsn, tbl)+` `+tc.alter)
			for _, opts := range [][]postgres.Option{nil, {postgres.WithoutSetup()}} {
				s, err := postgres.Open(ctx, dsn, append([]postgres.Option{postgres.WithTable("public", tbl)}, opts...)...)
				if err == nil {
					s.Close()
				}
				if !errors.Is(err, postgres.ErrSchema) || backends.Classify(err) != backends.ClassFatal || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Open over a sequence with %s (options %d) = %v, want a fatal ErrSchema naming %q", tc.alter, len(opts), err, tc.want)
				}
			}
			for _, create := range []bool{true, false} {
				// A URL's open says it in one line, naming the setting too.
				err := openURL(ctx, dsn, tbl, create)
				if !errors.Is(err, postgres.ErrSchema) || backends.Classify(err) != backends.ClassFatal || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("open by URL over a sequence with %s (create %v) = %v, want a fatal ErrSchema naming %q", tc.alter, create, err, tc.want)
				}
			}
		})
	}
}

// TestNamesDoNotCollide checks that a table called T_rev and a table T each
// get a sequence of their own, whichever is made first (the sequence of T
// used to be called T_rev).
func TestNamesDoNotCollide(t *testing.T) {
	srv := sharedServer(t)
	dsn := srv.DSN(srv.NewDatabase(t))
	ctx := testCtx(t)
	for _, order := range [][]string{{"", "_rev"}, {"_rev", ""}} {
		base := newTable()
		t.Run(fmt.Sprintf("%q first", base+order[0]), func(t *testing.T) {
			for _, suffix := range order {
				s := open(t, dsn, base+suffix)
				e, err := s.CreateIfAbsent(ctx, "k", []byte(suffix), 0)
				if err != nil {
					t.Fatalf("table %s: CreateIfAbsent: %v", base+suffix, err)
				}
				if _, err := s.CompareAndSet(ctx, "k", e.Revision, []byte("2"), 0); err != nil {
					t.Fatalf("table %s: CompareAndSet: %v", base+suffix, err)
				}
			}
		})
	}
}

// TestWrongObjectsRefused checks that objects that are not what the store
// needs are refused when it opens, fatally and by name, instead of failing
// every write with an error asked again for ever.
func TestWrongObjectsRefused(t *testing.T) {
	srv := sharedServer(t)
	dsn := srv.DSN(srv.NewDatabase(t))
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		make func(tbl string) []string
		want string
	}{
		{"view", func(tbl string) []string { return []string{`CREATE VIEW public.` + tbl + ` AS SELECT 1 AS key`} }, "is a view"},
		{"column type", func(tbl string) []string {
			return []string{`CREATE TABLE public.` + tbl + ` (key text COLLATE "C" PRIMARY KEY, value text NOT NULL, rev bigint NOT NULL, create_rev bigint NOT NULL, ttl_ms bigint NOT NULL, beat bigint NOT NULL)`}
		}, `column value`},
		{"recorded type", func(tbl string) []string {
			return []string{`CREATE TABLE public.` + tbl + ` (key text COLLATE "C" PRIMARY KEY, value bytea NOT NULL, rev bigint NOT NULL, create_rev bigint NOT NULL, ttl_ms bigint NOT NULL, beat bigint NOT NULL, recorded timestamp)`}
		}, `column recorded`},
		{"missing column", func(tbl string) []string {
			return []string{`CREATE TABLE public.` + tbl + ` (key text COLLATE "C" PRIMARY KEY, value bytea NOT NULL, rev bigint NOT NULL, create_rev bigint NOT NULL, ttl_ms bigint NOT NULL)`}
		}, "no column beat"},
		{"key collation", func(tbl string) []string {
			return []string{`CREATE TABLE public.` + tbl + ` (key text COLLATE "POSIX" PRIMARY KEY, value bytea NOT NULL, rev bigint NOT NULL, create_rev bigint NOT NULL, ttl_ms bigint NOT NULL, beat bigint NOT NULL)`}
		}, "column key"},
		{"no unique key", func(tbl string) []string {
			return []string{`CREATE TABLE public.` + tbl + ` (key text COLLATE "C", value bytea NOT NULL, rev bigint NOT NULL, create_rev bigint NOT NULL, ttl_ms bigint NOT NULL, beat bigint NOT NULL)`}
		}, "unique index"},
		{"sequence name taken by a view", func(tbl string) []string {
			return []string{
				`CREATE TABLE public.` + tbl + ` (key text COLLATE "C" PRIMARY KEY, value bytea NOT NULL, rev bigint NOT NULL, create_rev bigint NOT NULL, ttl_ms bigint NOT NULL, beat bigint NOT NULL)`,
				`CREATE VIEW public.` + tbl + `_rev AS SELECT 1 AS x`,
			}
		}, "is not one it can use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tbl := newTable()
			rawExec(t, ctx, dsn, tc.make(tbl)...)
			opts := []postgres.Option{postgres.WithTable("public", tbl)}
			if tc.name == "sequence name taken by a view" {
				opts = append(opts, postgres.WithoutSetup())
			}
			s, err := postgres.Open(ctx, dsn, opts...)
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, postgres.ErrSchema) || backends.Classify(err) != backends.ClassFatal || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open over %s = %v, want a fatal ErrSchema saying %q", tc.name, err, tc.want)
			}
			err = openURL(ctx, dsn, tbl, tc.name != "sequence name taken by a view")
			if !errors.Is(err, postgres.ErrSchema) || backends.Classify(err) != backends.ClassFatal || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("open by URL over %s = %v, want a fatal ErrSchema saying %q", tc.name, err, tc.want)
			}
		})
	}
}

// legacyDDL is what earlier versions made: a sequence TABLE_rev the table
// does not own.
func legacyDDL(tbl string) []string {
	return []string{
		`CREATE SEQUENCE public.` + tbl + `_rev AS bigint`,
		`CREATE TABLE public.` + tbl + ` (key text COLLATE "C" PRIMARY KEY, value bytea NOT NULL, rev bigint NOT NULL, create_rev bigint NOT NULL, ttl_ms bigint NOT NULL, beat bigint NOT NULL)`,
		`CREATE FUNCTION public.` + tbl + `_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$`,
		`CREATE TRIGGER ` + tbl + `_notify AFTER INSERT OR UPDATE OR DELETE ON public.` + tbl + ` FOR EACH ROW EXECUTE FUNCTION public.` + tbl + `_notify()`,
		`SELECT setval('public.` + tbl + `_rev', 100)`,
		`INSERT INTO public.` + tbl + ` VALUES ('old', 'v', 90, 90, 0, 0)`,
	}
}

// TestLegacyTable checks that a table made by an earlier version keeps its
// sequence. A store that may not change objects uses it as it is; Setup makes
// the table own it. Tokens continue from it either way.
func TestLegacyTable(t *testing.T) {
	srv := sharedServer(t)
	dsn := srv.DSN(srv.NewDatabase(t))
	ctx := testCtx(t)
	tbl := newTable()
	rawExec(t, ctx, dsn, legacyDDL(tbl)...)

	s := open(t, dsn, tbl, postgres.WithoutSetup())
	e, err := s.CreateIfAbsent(ctx, "a", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if e.CreateRevision != 101 {
		t.Errorf("token over a table of an earlier version = %d, want 101, from its sequence", e.CreateRevision)
	}
	s = open(t, dsn, tbl)
	if got := seqOf(t, ctx, dsn, tbl); got != `public.`+tbl+`_rev` {
		t.Errorf("after Setup the table owns %s, want its own sequence public.%s_rev", got, tbl)
	}
	if e, err = s.CreateIfAbsent(ctx, "b", nil, 0); err != nil || e.CreateRevision != 102 {
		t.Errorf("create after Setup adopted the sequence = (token %d, %v), want 102", e.CreateRevision, err)
	}
}

// TestMissingObjectNamed checks that a table restored into another database without
// its trigger (pg_dump -t carries neither the trigger's function nor,
// then, the trigger) is refused by a store that may not create objects,
// naming the trigger as what is missing and not the table or sequence
// that are there; one open that may create objects makes it.
func TestMissingObjectNamed(t *testing.T) {
	srv := sharedServer(t)
	dsn := srv.DSN(srv.NewDatabase(t))
	ctx := testCtx(t)
	tbl := newTable()
	open(t, dsn, tbl).Close()
	rawExec(t, ctx, dsn, `DROP TRIGGER `+tbl+`_notify ON public.`+tbl)
	err := openURL(ctx, dsn, tbl, false)
	if !errors.Is(err, backends.ErrMissingResource) || !strings.Contains(err.Error(), "trigger is missing") || strings.Contains(err.Error(), "sequence") {
		t.Errorf("open by URL of a table without its trigger = %v, want ErrMissingResource saying the trigger is missing, and only it", err)
	}
	if err := openURL(ctx, dsn, tbl, true); err != nil {
		t.Errorf("open by URL with create=true of a table without its trigger = %v, want a store", err)
	}
	if err := openURL(ctx, dsn, tbl, false); err != nil {
		t.Errorf("open by URL once the trigger is made = %v, want a store", err)
	}
}

// TestReadOnlyLeavesSequence checks that a store opened read-only neither
// needs nor moves the revision sequence: a role that may only SELECT from
// the table opens it and reads, with the sequence reset behind the table,
// which a store that writes would move forward (or, without the privilege,
// refuse), and the sequence is left where it was.
func TestReadOnlyLeavesSequence(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	s := open(t, dsn, tbl)
	e, err := s.CreateIfAbsent(ctx, "k", []byte("v"), 0)
	if err != nil {
		t.Fatal(err)
	}
	seq := seqOf(t, ctx, dsn, tbl)
	role := "reader_" + tbl
	rawExec(t, ctx, dsn,
		`ALTER SEQUENCE `+seq+` RESTART WITH 1`,
		`CREATE ROLE `+role+` LOGIN`,
		`GRANT USAGE ON SCHEMA public TO `+role,
		`GRANT SELECT ON public.`+tbl+` TO `+role)
	r, err := postgres.Open(ctx, strings.Replace(dsn, "postgres@", role+"@", 1), postgres.WithTable("public", tbl), postgres.WithReadOnly())
	if err != nil {
		t.Fatalf("Open read-only by a role that may only SELECT, the sequence behind the table: %v", err)
	}
	defer r.Close()
	if got, err := r.Get(ctx, "k"); err != nil || got.Revision != e.Revision {
		t.Fatalf("Get(k) read-only = (rev %d, %v), want rev %d", got.Revision, err, e.Revision)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var called bool
	if err := conn.QueryRow(ctx, `SELECT is_called FROM `+seq).Scan(&called); err != nil {
		t.Fatal(err)
	}
	if called {
		t.Errorf("after a read-only open, sequence %s was drawn from or moved; want it left as the reset left it", seq)
	}
}
