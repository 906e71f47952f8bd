package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/slots"
)

// electionTTL is the claims' TTL in the elector tests.
const electionTTL = time.Second

// startElector runs an elector named who over locker.
func startElector(t *testing.T, locker backends.Locker, key, who string, ts *electortest.Terms) *elector.Elector {
	t.Helper()
	cfg := elector.Config{
		Key:      key,
		Identity: who,
		TTL:      electionTTL,
		Logger:   testLogger(t, who),
	}
	ts.Install(&cfg, who)
	el, err := elector.New(locker, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := el.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopElector(t, el, who) })
	return el
}

func stopElector(t *testing.T, el *elector.Elector, who string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := el.Stop(ctx); err != nil {
		t.Errorf("stop %s: %v", who, err)
	}
}

func newLocker(t *testing.T, s backends.Store) backends.Locker {
	t.Helper()
	l, err := backends.NewLocker(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestElectorHandover runs three electors, each on a store of its own (a
// pool of its own, as three processes would), over one table. Each leader
// in turn stops; the next is elected with a higher token, without waiting
// for the TTL (the watch sees the release), and no two terms overlap. It
// runs with each keep-alive a statement and with keep-alives batched.
func TestElectorHandover(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []postgres.Option
	}{
		{"renew=each", nil},
		{"renew=batched", []postgres.Option{postgres.WithBatchedKeepAlive(0)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			srv := sharedServer(t)
			dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
			wall := clock.New()
			ts := electortest.NewTerms(wall)
			els := map[string]*elector.Elector{}
			for i := range 3 {
				who := fmt.Sprintf("node-%d", i)
				els[who] = startElector(t, newLocker(t, open(t, dsn, tbl, mode.opts...)), "leader", who, ts)
			}
			who := ts.Next(t, within(t, 10*time.Second))
			for round := range 2 {
				stopped := wall.Now()
				stopElector(t, els[who], who)
				next := ts.Next(t, within(t, 10*time.Second))
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

// TestSlotsResize runs three electors over a two-slot group on the store:
// two lead, one waits. A Resize to one slot (a compare-and-set of the size
// entry, which every slot acquisition checks in its transaction) makes the
// holder of slot 1 step down. The two electors that do not lead then keep
// trying, and the test waits until each has been refused twice since the
// step-down, a TTL or so apart: the recorded terms must show no term on
// slot 1 begun after the Resize, and none running.
func TestSlotsResize(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	wall := clock.New()
	ts := electortest.NewTerms(wall)
	group := func() *slots.Group {
		g, err := slots.New(open(t, dsn, tbl), slots.Config{Size: 2})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	var names []string
	for i := range 3 {
		who := fmt.Sprintf("node-%d", i)
		names = append(names, who)
		startElector(t, group(), "grp", who, ts)
	}
	ts.Next(t, within(t, 10*time.Second))
	ts.Next(t, within(t, 10*time.Second))
	if got := ts.Leading(); len(got) != 2 {
		t.Fatalf("leading = %v, want two", got)
	}
	admin := group()
	ctx := within(t, 20*time.Second)
	if err := admin.Resize(ctx, "grp", 1); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	resized := wall.Now()
	// The holder of slot 1 steps down at its next renewal.
	electortest.Await(t, ctx, "one leader after Resize(1)", func() bool { return len(ts.Leading()) == 1 }, ts)
	leader := ts.Leading()[0]
	refused := map[string]int{}
	for _, who := range names {
		if who != leader {
			refused[who] = ts.Lost(who)
		}
	}
	electortest.Await(t, ctx, "each follower refused twice since the step-down, or a second leader", func() bool {
		if len(ts.Leading()) > 1 {
			return true // reported below
		}
		for who, n := range refused {
			if ts.Lost(who) < n+2 {
				return false
			}
		}
		return true
	}, ts)
	for _, tm := range ts.Check(t) {
		if tm.Slot == 1 && (tm.End.IsZero() || tm.Start.After(resized)) {
			t.Errorf("%s took slot 1 (token %d) after the Resize", tm.Who, tm.Token)
		}
	}
	if got := ts.Leading(); len(got) != 1 {
		t.Errorf("leading %v after Resize(1), want one", got)
	}
}

// testLogger sends an elector's logs to t.Log.
func testLogger(t *testing.T, who string) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("elector", who)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
