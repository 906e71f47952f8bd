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
	"github.com/tenure-go/tenure/internal/electortest"
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
// holder of slot 1 step down, and no elector takes slot 1 again.
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
	for i := range 3 {
		startElector(t, group(), "grp", fmt.Sprintf("node-%d", i), ts)
	}
	ts.Next(t, within(t, 10*time.Second))
	ts.Next(t, within(t, 10*time.Second))
	if got := ts.Leading(); len(got) != 2 {
		t.Fatalf("leading = %v, want two", got)
	}
	admin := group()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.Resize(ctx, "grp", 1); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	for len(ts.Leading()) != 1 { // the holder of slot 1 steps down at its next renewal
		select {
		case <-ctx.Done():
			t.Fatalf("leading after Resize to 1 = %v, want one", ts.Leading())
		case <-time.After(20 * time.Millisecond): // polling the recorder, not timing
		}
	}
	// A TTL and more later, slot 1 is still free: no elector took it.
	waitUntil := wall.Now().Add(2 * electionTTL)
	for wall.Now().Before(waitUntil) {
		if got := ts.Leading(); len(got) != 1 {
			t.Fatalf("leading %v after Resize to 1", got)
		}
		time.Sleep(50 * time.Millisecond) // sampling who leads for two TTLs, not timing
	}
	ts.Check(t)
	for _, tm := range ts.Check(t) {
		if tm.Slot == 1 && tm.Start.After(waitUntil.Add(-2*electionTTL)) {
			t.Errorf("%s took slot 1 (token %d) after the Resize", tm.Who, tm.Token)
		}
	}
}

// testLogger sends an elector's logs to t.Log.
func testLogger(t *testing.T, who string) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("elector", who)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
