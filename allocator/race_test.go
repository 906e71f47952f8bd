package allocator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// gcRace sets up the race at the heart of the allocator: a collector g
// (whose store calls pass through f) about to delete an entry it found
// unreferenced, and another member re-allocating the key at that moment.
// It runs one pass of g, holds its first compare-and-delete at a gate,
// runs during while the delete is held, then lets the delete go and returns
// the pass's result and the held key.
func gcRace(t *testing.T, g *Allocator, f *faults.Store, during func()) (GCStats, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gate := f.Pause(faults.OpCompareAndDelete, faults.BeforeCall, 1)
	defer gate.Remove()
	type result struct {
		st  GCStats
		err error
	}
	res := make(chan result, 1)
	go func() {
		st, err := g.RunGC(ctx)
		res <- result{st, err}
	}()
	call, err := gate.Next(ctx)
	if err != nil {
		t.Fatalf("the collector never tried to delete: %v", err)
	}
	during()
	call.Release()
	r := <-res
	if r.err != nil {
		t.Fatalf("RunGC: %v", r.err)
	}
	return r.st, call.Key
}

// gcRaceMembers opens a store with open and starts, with the one ID 1 in
// their range, a collector g (whose store calls pass through f) and members
// b and c; another member allocates K, whose ID is id, and releases it.
func gcRaceMembers(t *testing.T, open func(testing.TB) (backends.Store, *clocktest.Clock)) (s backends.Store, clk *clocktest.Clock, f *faults.Store, g, b, c *Allocator, id uint64) {
	t.Helper()
	s, clk = open(t)
	cfg := func(m string) Config { c := testConfig(m, clk); c.Min, c.Max = 1, 1; return c }
	f = faults.Wrap(s, clk)
	g = newAllocator(t, f, cfg("gc"))
	a := newAllocator(t, s, cfg("a"))
	b = newAllocator(t, s, cfg("b"))
	c = newAllocator(t, s, cfg("c"))
	id = mustAllocate(t, a, "K")
	if _, err := a.Release(context.Background(), "K"); err != nil {
		t.Fatal(err)
	}
	return s, clk, f, g, b, c, id
}

// TestGCRaceIndexSurvives has a member re-allocate a key after the collector
// read its index entry unreferenced and before it deletes it: the member's
// revision bump makes the collector's compare-and-delete fail, and the ID
// stays the key's. Without the bump the index entry would go, and the key's
// ID would be handed to another key while the member uses it.
func TestGCRaceIndexSurvives(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) { gcRaceIndexSurvives(t, k.open) })
	}
}

func gcRaceIndexSurvives(t *testing.T, open func(testing.TB) (backends.Store, *clocktest.Clock)) {
	s, clk, f, g, b, c, id := gcRaceMembers(t, open)
	ctx := context.Background()
	if _, err := g.RunGC(ctx); err != nil { // sees K unreferenced
		t.Fatal(err)
	}
	clk.Add(g.cfg.Grace)

	var got uint64
	st, held := gcRace(t, g, f, func() {
		got = mustAllocate(t, b, "K")
	})
	if held != g.indexKey("K") {
		t.Fatalf("the collector deleted %q first, want the index of K", held)
	}
	if got != id {
		t.Fatalf("b.Allocate(K) = %d, want %d", got, id)
	}
	if st.Deleted != 0 {
		t.Fatalf("the pass deleted %d entries while b re-allocated K", st.Deleted)
	}
	collect(t, g, clk)
	if n, err := c.Get(ctx, "K"); err != nil || n != id {
		t.Fatalf("Get(K) after more passes = %d, %v; want %d", n, err, id)
	}
	if n, _, err := c.Allocate(ctx, "other"); !errors.Is(err, ErrNoIDs) {
		t.Fatalf("Allocate(other) = %d, %v; want ErrNoIDs: K still holds the only ID", n, err)
	}
	checkBijection(t, s)
}

// TestGCRaceMasterSurvives runs the same race one step later: the
// collector deleted K's index and is about to delete its master when a member
// allocates K again and finds the master still naming K. The member's bump of
// the master makes the delete fail. Without it the master would go while K's
// new index points at it, and another key could take the ID.
func TestGCRaceMasterSurvives(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) { gcRaceMasterSurvives(t, k.open) })
	}
}

func gcRaceMasterSurvives(t *testing.T, open func(testing.TB) (backends.Store, *clocktest.Clock)) {
	s, clk, f, g, b, c, id := gcRaceMembers(t, open)
	ctx := context.Background()
	if _, err := g.RunGC(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Add(g.cfg.Grace)
	if st, err := g.RunGC(ctx); err != nil || st.Deleted != 1 {
		t.Fatalf("pass after grace = %+v, %v; want K's index deleted", st, err)
	}
	if _, err := s.Get(ctx, g.indexKey("K")); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("K's index after the pass: %v, want it gone", err)
	}

	var got uint64
	st, held := gcRace(t, g, f, func() {
		got = mustAllocate(t, b, "K")
	})
	if held != g.idKey(id) {
		t.Fatalf("the collector deleted %q, want the master of %d", held, id)
	}
	if got != id {
		t.Fatalf("b.Allocate(K) = %d, want %d (the only ID)", got, id)
	}
	if st.Deleted != 0 {
		t.Fatalf("the pass deleted %d entries while b re-allocated K", st.Deleted)
	}
	if m, err := s.Get(ctx, g.idKey(id)); err != nil || string(m.Value) != "K" {
		t.Fatalf("master of %d = %q, %v; want K", id, m.Value, err)
	}
	collect(t, g, clk)
	if n, _, err := c.Allocate(ctx, "other"); !errors.Is(err, ErrNoIDs) {
		t.Fatalf("Allocate(other) = %d, %v; want ErrNoIDs: K still holds the only ID", n, err)
	}
	checkBijection(t, s)
}

// TestAllocateAdoptsOwnMasterThroughStaleCache checks that a member whose
// watch has not yet delivered the deletion of K's index allocates K again
// while K's old master is still there: it adopts the master (bumping it)
// instead of counting the ID as another key's. Before, with one ID in the
// range, it reported ErrNoIDs.
func TestAllocateAdoptsOwnMasterThroughStaleCache(t *testing.T) {
	s, clk := newMem(t)
	cfg := testConfig("b", clk)
	cfg.Min, cfg.Max = 1, 1
	ctx := context.Background()
	if _, err := s.CreateIfAbsent(ctx, testPrefix+idDir+"1", []byte("K"), 0); err != nil {
		t.Fatal(err)
	}
	// Another key's index, to know when the watch has made its first
	// listing; its ID is outside the range and plays no part.
	for k, v := range map[string]string{keyDir + "Z": "5", idDir + "5": "Z"} {
		if _, err := s.CreateIfAbsent(ctx, testPrefix+k, []byte(v), 0); err != nil {
			t.Fatal(err)
		}
	}
	b := newAllocator(t, s, cfg)
	waitCached(t, b, "Z", 5)
	b.cmu.Lock() // what the watch knew before K's index was deleted
	b.keys["K"] = cached{id: 1, ready: true, rev: 1}
	b.ids[1] = "K"
	b.cmu.Unlock()
	if id, _, err := b.Allocate(ctx, "K"); err != nil || id != 1 {
		t.Fatalf("Allocate(K) = %d, %v; want 1", id, err)
	}
	checkBijection(t, s)
}
