package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres/pgtest"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/toxiproc"
)

// Fault tests: electors over a private server that is killed, paused, or
// cut off from one of them. Each checks what the safety model promises:
// the leader's term ends by its own deadline, no two terms overlap, and
// tokens strictly increase across the fault.

// faultLimit bounds each wait of a fault test.
const faultLimit = 20 * time.Second

// waitNotLeading waits until who no longer leads, bounded by faultLimit.
func waitNotLeading(t *testing.T, ts *electortest.Terms, who string) {
	t.Helper()
	electortest.Await(t, within(t, faultLimit), who+" stops leading after the fault", func() bool { return !slices.Contains(ts.Leading(), who) }, ts)
}

// TestFaultServerKilled kills the server with SIGKILL while a leader holds
// the claim, and restarts it a TTL later. The leader steps down by its
// deadline; after the restart (and the recovery of its log) an elector is
// elected with a higher token.
func TestFaultServerKilled(t *testing.T) {
	srv := pgtest.Start(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ts := electortest.NewTerms(clock.New())
	startElector(t, newLocker(t, open(t, dsn, tbl)), "leader", "a", ts)
	startElector(t, newLocker(t, open(t, dsn, tbl)), "leader", "b", ts)
	leader := ts.Next(t, within(t, faultLimit))
	srv.Kill(t)
	waitNotLeading(t, ts, leader)
	srv.Restart(t)
	next := ts.Next(t, within(t, faultLimit))
	all := ts.Check(t)
	electortest.EndsByDeadline(t, all)
	t.Logf("%s led, the server was killed; after the restart %s was elected; terms %v", leader, next, tokensOf(all))
}

// TestFaultServerPaused stops the server and its backends with SIGSTOP for
// two TTLs, with connections open, then continues them. The leader steps down
// by its deadline while nothing answers; once the server runs again, requests
// it had queued complete, and an elector leads again with a higher token,
// never beside another.
func TestFaultServerPaused(t *testing.T) {
	srv := pgtest.Start(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	wall := clock.New()
	ts := electortest.NewTerms(wall)
	startElector(t, newLocker(t, open(t, dsn, tbl)), "leader", "a", ts)
	startElector(t, newLocker(t, open(t, dsn, tbl)), "leader", "b", ts)
	leader := ts.Next(t, within(t, faultLimit))
	srv.Pause(t)
	waitNotLeading(t, ts, leader)
	// The fault's length: the server stays paused a TTL past the leader's
	// step-down, on the real clock the electors and the recorded terms
	// both run on, so that the claim is expired for every store when the
	// server answers again. Nothing is asserted about when things happen.
	<-wall.After(electionTTL)
	srv.Resume(t)
	next := ts.Next(t, within(t, faultLimit))
	all := ts.Check(t)
	electortest.EndsByDeadline(t, all)
	t.Logf("%s led, the server was paused; after it continued %s was elected; terms %v", leader, next, tokensOf(all))
}

// TestFaultConnectionCut has the leader reach the server through a TCP proxy
// that starts dropping everything (connections stay open). The leader steps
// down by its deadline; the other elector, connected directly, sees the claim
// unchanged for a TTL and takes it over with a higher token.
func TestFaultConnectionCut(t *testing.T) {
	srv := sharedServer(t)
	db := srv.NewDatabase(t)
	tbl := newTable()
	px := toxiproc.StartTest(t).Proxy(t, "pg", srv.Addr())
	ts := electortest.NewTerms(clock.New())
	startElector(t, newLocker(t, open(t, srv.DSNVia(px.Listen, db), tbl)), "leader", "proxied", ts)
	if who := ts.Next(t, within(t, faultLimit)); who != "proxied" {
		t.Fatalf("first leader = %s, want proxied", who)
	}
	startElector(t, newLocker(t, open(t, srv.DSN(db), tbl)), "leader", "direct", ts)
	if err := px.Blackhole("cut"); err != nil {
		t.Fatal(err)
	}
	waitNotLeading(t, ts, "proxied")
	if who := ts.Next(t, within(t, faultLimit)); who != "direct" {
		t.Fatalf("leader after the cut = %s, want direct", who)
	}
	// The cut is never healed. Disabling the proxy ends its connections,
	// and the proxied store's calls fail at once from then on.
	if err := px.Disable(); err != nil {
		t.Fatal(err)
	}
	all := ts.Check(t)
	electortest.EndsByDeadline(t, all)
	t.Logf("terms %v", tokensOf(all))
}

// TestFaultWatchDropped has the server end the watch's connection
// (pg_terminate_backend) while another store changes the claims. The stream
// ends rather than skip what it missed: every event it delivered before
// closing is in order, and after the close a read shows the changes and a new
// watch sees the next one.
func TestFaultWatchDropped(t *testing.T) {
	srv := sharedServer(t)
	db := srv.NewDatabase(t)
	dsn, tbl := srv.DSN(db), newTable()
	ctx := testCtx(t)
	watcher, writer := open(t, dsn, tbl), open(t, dsn, tbl)
	ch, err := watcher.Watch(ctx, "w/")
	if err != nil {
		t.Fatal(err)
	}
	e1, err := writer.CreateIfAbsent(ctx, "w/a", []byte("1"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.Entry.Revision != e1.Revision {
		t.Fatalf("first event = %+v, want rev %d", ev, e1.Revision)
	}
	terminateListeners(t, ctx, dsn)
	var last int64
	for i := range 5 {
		e, err := writer.CompareAndSet(ctx, "w/a", max(e1.Revision, last), []byte{byte('2' + i)}, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		last = e.Revision
	}
	prev := e1.Revision
	for ev := range ch { // it must close; what it delivers must be in order
		if ev.Entry.Revision <= prev {
			t.Errorf("event rev %d after %d", ev.Entry.Revision, prev)
		}
		prev = ev.Entry.Revision
	}
	got, err := watcher.Get(ctx, "w/a")
	if err != nil || got.Revision != last {
		t.Fatalf("Get after the watch ended = rev %d, %v; want %d", got.Revision, err, last)
	}
	ch, err = watcher.Watch(ctx, "w/")
	if err != nil {
		t.Fatal(err)
	}
	if err := writer.CompareAndDelete(ctx, "w/a", last); err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.Kind != backends.EventDelete || ev.Entry.Revision != last {
		t.Fatalf("event on the new watch = %v rev %d, want delete rev %d", ev.Kind, ev.Entry.Revision, last)
	}
}

// terminateListeners ends every connection of the database that listens.
func terminateListeners(t *testing.T, ctx context.Context, dsn string) {
	t.Helper()
	c, err := pgxConnect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var n int
	if err := c.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND datname = current_database()`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminated %d listening connections, %v; want 1", n, err)
	}
}

func tokensOf(all []electortest.Term) []int64 {
	var out []int64
	for _, tm := range all {
		out = append(out, tm.Token)
	}
	return out
}

// TestConnectErrorsOneLine checks that, with its server killed, a store whose URL
// lists two hosts fails to connect to either; the error it returns is one
// line (pgx lists each attempt on a line of its own), still unavailable,
// still telling a connect error by errors.As.
func TestConnectErrorsOneLine(t *testing.T) {
	srv := pgtest.Start(t)
	db := srv.NewDatabase(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // a port nothing listens on
	dsn := fmt.Sprintf("postgres://postgres@%s,%s/%s?sslmode=disable&connect_timeout=5", srv.Addr(), dead, db)
	s := open(t, dsn, newTable())
	ctx := within(t, time.Minute)
	srv.Kill(t)
	connectErrs := 0
	for i := range 5 {
		_, err := s.CreateIfAbsent(ctx, fmt.Sprintf("k%d", i), []byte("v"), 0)
		if err == nil {
			t.Fatal("CreateIfAbsent with the server killed: success")
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("CreateIfAbsent with the server killed = %q, want one line", err)
		}
		if !errors.Is(err, backends.ErrUnavailable) {
			t.Errorf("CreateIfAbsent with the server killed = %v, want ErrUnavailable", err)
		}
		var ce *pgconn.ConnectError
		if errors.As(err, &ce) {
			connectErrs++
		}
	}
	if connectErrs == 0 {
		t.Fatal("no write with the server killed failed to connect")
	}
}
