package nats

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/nats/natstest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/slots"
)

// Elector-level tests: electors over this store on real servers and the
// real clock, each on a connection of its own, as separate processes would
// be.

const electTTL = time.Second

// term is one leadership as the test saw it, on one wall clock.
type term struct {
	who        string
	slot       int
	token      int64
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
}

func newTerms() *terms {
	return &terms{wall: clock.New(), open: map[string]term{}, won: make(chan string, 64)}
}

// onElected records the term of who and holds it until its context ends.
func (ts *terms) onElected(who string) func(context.Context, elector.Term) {
	return func(ctx context.Context, t elector.Term) {
		ts.mu.Lock()
		ts.open[who] = term{who: who, slot: t.Slot, token: t.Token, start: ts.wall.Now()}
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
		ts.mu.Unlock()
	}
}

// next waits for the next election.
func (ts *terms) next(t *testing.T, limit time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	select {
	case who := <-ts.won:
		return who
	case <-ctx.Done():
		t.Fatalf("no election within %v", limit)
		return ""
	}
}

// leaders is how many terms are running now.
func (ts *terms) leaders() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.open)
}

// check fails t if two terms of the same slot overlap or their tokens do not
// strictly increase in the order they began.
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
	last := map[int]term{}
	for _, cur := range all {
		prev, ok := last[cur.slot]
		last[cur.slot] = cur
		if !ok {
			continue
		}
		if cur.start.Before(prev.end) {
			t.Errorf("slot %d: %s's term (token %d) began %v before %s's (token %d) ended: two leaders", cur.slot, cur.who, cur.token, prev.end.Sub(cur.start), prev.who, prev.token)
		}
		if cur.token <= prev.token {
			t.Errorf("slot %d: %s's token %d after %s's %d: not increasing", cur.slot, cur.who, cur.token, prev.who, prev.token)
		}
	}
	return all
}

// candidate is one elector over a store of its own.
type candidate struct {
	who   string
	store *Store
	el    *elector.Elector
}

// startElector runs an elector named who over a Store on bucket, reached
// at urls, with locker built over the store (a single claim when nil).
func startElector(t *testing.T, urls, bucket, who string, ts *terms, locker func(*Store) backends.Locker) *candidate {
	t.Helper()
	s := open(t, urls, bucket, 1)
	var l backends.Locker
	if locker != nil {
		l = locker(s)
	} else {
		sl, err := backends.NewLocker(s)
		if err != nil {
			t.Fatal(err)
		}
		l = sl
	}
	el, err := elector.New(l, elector.Config{
		Key:       "leader",
		Identity:  who,
		TTL:       electTTL,
		OnElected: ts.onElected(who),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := el.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopElector(t, el) })
	return &candidate{who: who, store: s, el: el}
}

func stopElector(t *testing.T, el *elector.Elector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := el.Stop(ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
}

// TestElector: three electors over one server. A graceful stop hands over
// at once (the followers watch the claim); a leader whose connection dies
// (as its process would) loses the claim to a follower about a TTL after
// the follower last saw it renewed. Terms never overlap and tokens
// strictly increase.
func TestElector(t *testing.T) {
	srv := natstest.Start(t)
	bucket := newBucketName()
	ts := newTerms()
	cs := map[string]*candidate{}
	for _, who := range []string{"a", "b", "c"} {
		cs[who] = startElector(t, srv.URL(), bucket, who, ts, nil)
	}
	first := ts.next(t, 10*time.Second)

	start := ts.wall.Now()
	stopElector(t, cs[first].el)
	second := ts.next(t, 10*time.Second)
	if second == first {
		t.Fatalf("%s elected again after it stopped", first)
	}
	t.Logf("graceful handover %s -> %s in %v", first, second, ts.wall.Since(start))

	// A crash: the leader's connection closes under it; its claim is
	// left behind, unreleased.
	start = ts.wall.Now()
	cs[second].store.nc.Close()
	third := ts.next(t, 10*time.Second)
	if third == first || third == second {
		t.Fatalf("%s elected after the crash of %s, want the third candidate", third, second)
	}
	if d := ts.wall.Since(start); d < electTTL/2 {
		t.Errorf("the crashed holder's claim was taken after %v, before the holder's deadline could have passed", d)
	}
	all := ts.check(t)
	if len(all) != 3 {
		t.Errorf("terms = %+v, want 3", all)
	}
}

// TestSlots: a two-slot group over the store, three candidates: two lead
// at once, in different slots; Resize to one makes one of them step down,
// and Resize works without transactions (the store has none).
func TestSlots(t *testing.T) {
	srv := natstest.Start(t)
	bucket := newBucketName()
	ts := newTerms()
	var groups []*slots.Group
	group := func(s *Store) backends.Locker {
		g, err := slots.New(s, slots.Config{Size: 2})
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, g)
		return g
	}
	for _, who := range []string{"a", "b", "c"} {
		startElector(t, srv.URL(), bucket, who, ts, group)
	}
	ts.next(t, 10*time.Second)
	ts.next(t, 10*time.Second)
	if n := ts.leaders(); n != 2 {
		t.Fatalf("%d leaders of a two-slot group, want 2", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := groups[0].Resize(ctx, "leader", 1); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	waitUntil(t, 10*time.Second, "one leader after Resize(1)", func() bool { return ts.leaders() == 1 })
	for _, tm := range ts.check(t) {
		if tm.end.IsZero() && tm.slot != 0 {
			t.Errorf("%s leads slot %d after Resize(1)", tm.who, tm.slot)
		}
	}
}
