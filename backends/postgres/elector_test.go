package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/slots"
)

// electionTTL is the claims' TTL in the elector tests.
const electionTTL = time.Second

// term is one leadership as the test saw it, on one wall clock.
type term struct {
	who        string
	token      int64
	slot       int
	start, end time.Time
	deadline   time.Time // the leadership context's deadline
}

// terms records the terms of several electors.
type terms struct {
	wall clock.Clock

	mu   sync.Mutex
	all  []term          // guarded by mu; ended terms
	open map[string]term // guarded by mu; running terms by elector
	won  chan string     // who was elected, in order
	// ended is closed, and replaced, each time a term ends: a barrier for
	// waiting on the end of a term.
	ended chan struct{} // guarded by mu
}

func newTerms() *terms {
	return &terms{wall: clock.New(), open: make(map[string]term), won: make(chan string, 64), ended: make(chan struct{})}
}

// onElected records the term of elector who and holds it until the
// leadership context ends.
func (ts *terms) onElected(who string) func(context.Context, elector.Term) {
	return func(ctx context.Context, t elector.Term) {
		ts.mu.Lock()
		ts.open[who] = term{who: who, token: t.Token, slot: t.Slot, start: ts.wall.Now()}
		ts.mu.Unlock()
		ts.won <- who
		<-ctx.Done()
		now := ts.wall.Now()
		deadline, _ := ctx.Deadline()
		ts.mu.Lock()
		tm := ts.open[who]
		delete(ts.open, who)
		tm.end, tm.deadline = now, deadline
		ts.all = append(ts.all, tm)
		close(ts.ended)
		ts.ended = make(chan struct{})
		ts.mu.Unlock()
	}
}

// next waits for the next election.
func (ts *terms) next(t *testing.T, limit time.Duration) string {
	t.Helper()
	select {
	case who := <-ts.won:
		return who
	case <-time.After(limit): // a bound on waiting, not a timing assertion
		t.Fatalf("no election within %v", limit)
		return ""
	}
}

// leading returns who leads now.
func (ts *terms) leading() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []string
	for who := range ts.open {
		out = append(out, who)
	}
	slices.Sort(out)
	return out
}

// check fails t if more than n terms overlap on one slot, or if the tokens
// of a slot do not strictly increase in the order its terms began.
func (ts *terms) check(t *testing.T) []term {
	t.Helper()
	ts.mu.Lock()
	all := slices.Clone(ts.all)
	for _, tm := range ts.open {
		tm.end = ts.wall.Now()
		all = append(all, tm)
	}
	ts.mu.Unlock()
	slices.SortFunc(all, func(a, b term) int { return a.start.Compare(b.start) })
	bySlot := map[int][]term{}
	for _, tm := range all {
		bySlot[tm.slot] = append(bySlot[tm.slot], tm)
	}
	for slot, ts := range bySlot {
		for i := 1; i < len(ts); i++ {
			prev, cur := ts[i-1], ts[i]
			if cur.start.Before(prev.end) {
				t.Errorf("slot %d: %s's term (token %d) began %v before %s's (token %d) ended: two holders", slot, cur.who, cur.token, prev.end.Sub(cur.start), prev.who, prev.token)
			}
			if cur.token <= prev.token {
				t.Errorf("slot %d: %s's token %d after %s's %d: not increasing", slot, cur.who, cur.token, prev.who, prev.token)
			}
		}
	}
	return all
}

// startElector runs an elector named who over locker.
func startElector(t *testing.T, locker backends.Locker, key, who string, ts *terms) *elector.Elector {
	t.Helper()
	el, err := elector.New(locker, elector.Config{
		Key:       key,
		Identity:  who,
		TTL:       electionTTL,
		OnElected: ts.onElected(who),
		Logger:    testLogger(t, who),
	})
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
			ts := newTerms()
			els := map[string]*elector.Elector{}
			for i := range 3 {
				who := fmt.Sprintf("node-%d", i)
				els[who] = startElector(t, newLocker(t, open(t, dsn, tbl, mode.opts...)), "leader", who, ts)
			}
			who := ts.next(t, 10*time.Second)
			for round := range 2 {
				stopped := ts.wall.Now()
				stopElector(t, els[who], who)
				next := ts.next(t, 10*time.Second)
				t.Logf("round %d: %s stepped down, %s elected %v later", round, who, next, ts.wall.Now().Sub(stopped))
				delete(els, who)
				who = next
			}
			all := ts.check(t)
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
	ts := newTerms()
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
	ts.next(t, 10*time.Second)
	ts.next(t, 10*time.Second)
	if got := ts.leading(); len(got) != 2 {
		t.Fatalf("leading = %v, want two", got)
	}
	admin := group()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.Resize(ctx, "grp", 1); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	for len(ts.leading()) != 1 { // the holder of slot 1 steps down at its next renewal
		select {
		case <-ctx.Done():
			t.Fatalf("leading after Resize to 1 = %v, want one", ts.leading())
		case <-time.After(20 * time.Millisecond): // polling the recorder, not timing
		}
	}
	// A TTL and more later, slot 1 is still free: no elector took it.
	waitUntil := ts.wall.Now().Add(2 * electionTTL)
	for ts.wall.Now().Before(waitUntil) {
		if got := ts.leading(); len(got) != 1 {
			t.Fatalf("leading %v after Resize to 1", got)
		}
		time.Sleep(50 * time.Millisecond) // sampling who leads for two TTLs, not timing
	}
	ts.check(t)
	for _, tm := range ts.check(t) {
		if tm.slot == 1 && tm.start.After(waitUntil.Add(-2*electionTTL)) {
			t.Errorf("%s took slot 1 (token %d) after the Resize", tm.who, tm.token)
		}
	}
}

// testLogger sends an elector's logs to t.Log.
func testLogger(t *testing.T, who string) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("elector", who)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
