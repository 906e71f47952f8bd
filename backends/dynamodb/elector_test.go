package dynamodb_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/dynamodb/dynamotest"
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

// testLogger sends an elector's logs to t.Log.
func testLogger(t *testing.T, who string) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("elector", who)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// TestElectorHandover runs three electors, each on a store of its own (a
// client of its own, as three processes would), over one table. Each
// leader in turn stops; the next is elected with a higher token, and no
// two terms overlap. Without a watch, a follower learns of the release at
// its next attempt, at most a renew period later.
func TestElectorHandover(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	wall := clock.New()
	ts := electortest.NewTerms(wall)
	els := map[string]*elector.Elector{}
	for i := range 3 {
		who := fmt.Sprintf("node-%d", i)
		els[who] = startElector(t, newLocker(t, open(t, srv.Endpoint(), tbl)), "leader", who, ts)
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
	if all := ts.Check(t); len(all) != 3 {
		t.Errorf("terms = %+v, want 3", all)
	}
}

// TestElectorFailover crashes the leader: every call of its locker blocks,
// as in a process that stopped. It ends its term by its own deadline,
// and another elector takes the claim once its store has seen the claim
// unchanged for a TTL, with a higher token; no two terms overlap.
func TestElectorFailover(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	wall := clock.New()
	ts := electortest.NewTerms(wall)
	lockers := map[string]*electortest.Locker{}
	for _, who := range []string{"a", "b"} {
		l := electortest.Wrap(newLocker(t, open(t, srv.Endpoint(), tbl)))
		lockers[who] = l
		startElector(t, l, "leader", who, ts)
		t.Cleanup(l.Uncrash) // before the elector's Stop
	}
	leader := ts.Next(t, within(t, 20*time.Second))
	crashed := wall.Now()
	lockers[leader].Crash()
	electortest.Await(t, within(t, 20*time.Second), leader+" stops leading after the crash", func() bool { return !slices.Contains(ts.Leading(), leader) }, ts)
	next := ts.Next(t, within(t, 20*time.Second))
	t.Logf("%s crashed; %s elected %v later (TTL %v)", leader, next, wall.Now().Sub(crashed), electionTTL)
	all := ts.Check(t)
	electortest.EndsByDeadline(t, all)
	if len(all) != 2 || all[1].Token <= all[0].Token {
		t.Errorf("terms = %+v, want two with increasing tokens", all)
	}
}

// TestSlotsResize runs three electors over a two-slot group on the store:
// two lead, one waits. A Resize to one slot (a compare-and-set of the size
// entry; without transactions every acquisition reads the size again
// after its write) makes the holder of slot 1 step down; the followers
// keep trying, and no term on slot 1 begins after the Resize.
func TestSlotsResize(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	wall := clock.New()
	ts := electortest.NewTerms(wall)
	group := func() *slots.Group {
		g, err := slots.New(open(t, srv.Endpoint(), tbl), slots.Config{Size: 2})
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
	ts.Next(t, within(t, 20*time.Second))
	ts.Next(t, within(t, 20*time.Second))
	if got := ts.Leading(); len(got) != 2 {
		t.Fatalf("leading = %v, want two", got)
	}
	admin := group()
	ctx := within(t, 30*time.Second)
	if err := admin.Resize(ctx, "grp", 1); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	resized := wall.Now()
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
