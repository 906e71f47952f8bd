package nats

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/nats/natstest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/slots"
)

// Elector-level tests: electors over this store on real servers and the
// real clock, each on a connection of its own, as separate processes would
// be.

const electTTL = time.Second

// candidate is one elector over a store of its own.
type candidate struct {
	who   string
	store *Store
	el    *elector.Elector
}

// startElector runs an elector named who over a Store on bucket, reached
// at urls, with locker built over the store (a single claim when nil).
func startElector(t *testing.T, urls, bucket, who string, ts *electortest.Terms, locker func(*Store) backends.Locker) *candidate {
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
	cfg := elector.Config{
		Key:      "leader",
		Identity: who,
		TTL:      electTTL,
	}
	ts.Install(&cfg, who)
	el, err := elector.New(l, cfg)
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

// TestElector runs three electors over one server. A graceful stop hands over
// at once (the followers watch the claim); a leader whose connection dies (as
// its process would) loses the claim to a follower about a TTL after the
// follower last saw it renewed. Terms never overlap and tokens strictly
// increase.
func TestElector(t *testing.T) {
	srv := natstest.Start(t)
	bucket := newBucketName()
	wall := clock.New()
	ts := electortest.NewTerms(wall)
	cs := map[string]*candidate{}
	for _, who := range []string{"a", "b", "c"} {
		cs[who] = startElector(t, srv.URL(), bucket, who, ts, nil)
	}
	first := ts.Next(t, within(t, 10*time.Second))

	start := wall.Now()
	stopElector(t, cs[first].el)
	second := ts.Next(t, within(t, 10*time.Second))
	if second == first {
		t.Fatalf("%s elected again after it stopped", first)
	}
	t.Logf("graceful handover %s -> %s in %v", first, second, wall.Since(start))

	// A crash: the leader's connection closes under it; its claim is
	// left behind, unreleased.
	start = wall.Now()
	cs[second].store.nc.Close()
	third := ts.Next(t, within(t, 10*time.Second))
	if third == first || third == second {
		t.Fatalf("%s elected after the crash of %s, want the third candidate", third, second)
	}
	if d := wall.Since(start); d < electTTL/2 {
		t.Errorf("the crashed holder's claim was taken after %v, before the holder's deadline could have passed", d)
	}
	all := ts.Check(t)
	if len(all) != 3 {
		t.Errorf("terms = %+v, want 3", all)
	}
}

// TestSlots runs a two-slot group over the store with three candidates: two
// lead at once, in different slots; Resize to one makes one of them step
// down, and Resize works without transactions (the store has none).
func TestSlots(t *testing.T) {
	srv := natstest.Start(t)
	bucket := newBucketName()
	wall := clock.New()
	ts := electortest.NewTerms(wall)
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
	ts.Next(t, within(t, 10*time.Second))
	ts.Next(t, within(t, 10*time.Second))
	if n := len(ts.Leading()); n != 2 {
		t.Fatalf("%d leaders of a two-slot group, want 2", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := groups[0].Resize(ctx, "leader", 1); err != nil {
		t.Fatalf("Resize: %v", err)
	}
	electortest.Await(t, within(t, 10*time.Second), "one leader after Resize(1)", func() bool { return len(ts.Leading()) == 1 }, ts)
	for _, tm := range ts.Check(t) {
		if tm.End.IsZero() && tm.Slot != 0 {
			t.Errorf("%s leads slot %d after Resize(1)", tm.Who, tm.Slot)
		}
	}
}
