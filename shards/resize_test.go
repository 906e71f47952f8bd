package shards_test

import (
	"context"
	"errors"

	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/faults"
	"github.com/tenure-go/tenure/internal/testrig/shardstest"
	"github.com/tenure-go/tenure/shards"
)

// resizeGroup is members of one group over one memstore in real time, each
// through a Link that can cut it off, their terms recorded with their spans.
type resizeGroup struct {
	t     *testing.T
	store *memstore.Store
	*shardstest.Spans
}

type resizeMember struct {
	*shards.Member
	*shardstest.Link
}

var resizeTiming = elector.Config{TTL: time.Second, RenewPeriod: 250 * time.Millisecond, RetryPeriod: 50 * time.Millisecond}

func newResizeGroup(t *testing.T, count int) *resizeGroup {
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	return &resizeGroup{t: t, store: store, Spans: shardstest.NewSpans(t)}
}

func (g *resizeGroup) add(id string, count int) *resizeMember {
	g.t.Helper()
	return g.addOver(g.store, id, count)
}

// addOver starts a member whose store is inner (behind its Link).
func (g *resizeGroup) addOver(inner backends.Store, id string, count int) *resizeMember {
	g.t.Helper()
	m := &resizeMember{Link: shardstest.NewLink(inner, nil)}
	sm, err := shards.New(m.Store, shards.Config{Group: "g", Identity: id, Count: count, Elector: resizeTiming, OnAcquired: g.OnAcquired(id, &m.Member)})
	if err != nil {
		g.t.Fatal(err)
	}
	m.Member = sm
	if err := sm.Start(context.Background()); err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() {
		m.Heal()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sm.Stop(ctx); err != nil {
			g.t.Errorf("stop %s: %v", id, err)
		}
	})
	return m
}

func (g *resizeGroup) await(what string, cond func() bool) {
	g.t.Helper()
	g.Await(what, time.Minute, cond)
}

// TestResizeLive doubles and then halves the count of a running group of
// three members (shardstest.ResizeScenario: no key has two owners acting at
// once, each shard of the new count is taken once, by the member it is
// placed on); then the record names the new count alone, a Resize to it
// does nothing, and a member configured with the old count is refused
// while one with the new count starts.
func TestResizeLive(t *testing.T) {
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	shardstest.ResizeScenario(t, resizeTiming, func(int) backends.Store { return unclosed{store} }, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := store.Get(ctx, "g/count")
	if err != nil || string(e.Value) != "8 g2" {
		t.Errorf("record after two changes: %q, %v; want \"8 g2\"", e.Value, err)
	}
	if err := shards.Resize(ctx, store, "g", 8); err != nil {
		t.Errorf("Resize to the count in force: %v", err)
	}
	for _, c := range []struct {
		count int
		want  error
	}{{16, shards.ErrCountMismatch}, {8, nil}} {
		m, err := shards.New(store, shards.Config{Group: "g", Identity: "d", Count: c.count, Elector: resizeTiming})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(ctx); !errors.Is(err, c.want) {
			t.Errorf("a member of count %d: Start = %v, want %v", c.count, err, c.want)
		}
		if err := m.Stop(ctx); err != nil {
			t.Error(err)
		}
	}
}

// unclosed is a store shared by members whose Close leaves it open.
type unclosed struct{ *memstore.Store }

func (unclosed) Close() error { return nil }

// TestResizeWaitsForCrashedOwner cuts off a member, as a crash would, just
// before a change of count: the shards of the new count that draw keys
// from its shards are taken only once its claims have expired, and no key
// has two owners meanwhile.
func TestResizeWaitsForCrashedOwner(t *testing.T) {
	g := newResizeGroup(t, 4)
	a := g.add("a", 4)
	g.add("b", 4)
	g.await("4 shards settle", func() bool { return g.Settled(4, "a", "b") })
	a.Cut()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := shards.Resize(ctx, g.store, "g", 8); err != nil {
		t.Fatal(err)
	}
	// a's membership expired as well: the 8 shards are b's.
	g.await("8 shards on b", func() bool { return g.Settled(8, "b") })
}

// TestResizeRefusals checks Resize's errors: a group no member started,
// a count out of range, and another change in flight.
func TestResizeRefusals(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	if err := shards.Resize(ctx, store, "g", 8); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Resize of a group without a count = %v, want ErrNotFound", err)
	}
	for _, n := range []int{0, -1, shards.MaxCount + 1} {
		if err := shards.Resize(ctx, store, "g", n); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("Resize(%d) = %v, want ErrInvalid", n, err)
		}
	}
	if _, err := store.CreateIfAbsent(ctx, "g/count", []byte("8"), 0); err != nil {
		t.Fatal(err)
	}
	// A shard of the old count stays held: the change stays in flight.
	if _, err := store.CreateIfAbsent(ctx, "g/shard/3", []byte(`{"v":1,"id":"x"}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := shards.Resize(short, store, "g", 16); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Resize with a shard held = %v, want the context's end", err)
	}
	if err := shards.Resize(ctx, store, "g", 4); !errors.Is(err, shards.ErrResizing) {
		t.Errorf("Resize to another count during a change = %v, want ErrResizing", err)
	}
	e, _ := store.Get(ctx, "g/shard/2")
	if string(e.Value) != "sealed by g1" {
		t.Errorf("a free shard of the old count holds %q, want its seal", e.Value)
	}
	// A member of the old release's kind campaigning for a sealed shard
	// finds no claim there: the create fails, and the seal stays.
	if _, err := store.CreateIfAbsent(ctx, "g/shard/2", []byte(`{"v":1,"id":"y"}`), time.Hour); !errors.Is(err, backends.ErrExists) {
		t.Errorf("create over a seal = %v, want ErrExists", err)
	}
}

// countBlind is a memory store whose watch never reports the group's
// count record: a member over it learns of a change of count only at its
// next full read of the group (every ten TTLs), as one whose watch missed
// the event would.
type countBlind struct{ *memstore.Store }

func (c countBlind) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	return filterWatch(ctx, c.Store, prefix, func(ev backends.Event) bool { return ev.Entry.Key != "g/count" })
}

// TestResizeMemberThatMissedIt runs a change of count with a member, b,
// that does not see it begin. b keeps its shards of the old count, so the
// new shards drawing on them wait; when c leaves, b campaigns for c's old
// shards, which are sealed: its electors find no claim there and end, and
// b tries them again only at its next full read (it tried them in a loop
// before), which also shows it the change. No key has two owners
// throughout, and the change completes with b's switch.
func TestResizeMemberThatMissedIt(t *testing.T) {
	g := newResizeGroup(t, 4)
	a := g.add("a", 4)
	b := g.addOver(countBlind{g.store}, "b", 4)
	c := g.add("c", 4)
	g.await("4 shards settle", func() bool { return g.Settled(4, "a", "b", "c") })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resized := make(chan error, 1)
	go func() { resized <- shards.Resize(ctx, g.store, "g", 8) }()
	g.await("a and c see the change", func() bool { return a.Count() == 8 && c.Count() == 8 })
	if b.Count() != 4 {
		t.Fatalf("b saw the change: its watch was to hide it")
	}
	const claimOps = faults.OpCreate | faults.OpGet | faults.OpTxn // what a campaign for a claim sends
	before := b.Store.Calls(claimOps)
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	g.await("8 shards settle on a and b", func() bool { return g.Settled(8, "a", "b") })
	if err := <-resized; err != nil {
		t.Fatalf("Resize: %v", err)
	}
	// b campaigned for c's old shards (at most four) once when c left,
	// then for its new shards, and sealed the old shards they draw on:
	// 123 requests before, 13 after, in one run each.
	if n := b.Store.Calls(claimOps) - before; n > 2*4+8 {
		t.Errorf("b sent %d campaign requests between c's leave and the end of the change, want at most %d", n, 2*4+8)
	}
}

// TestResizeBenchBriefly runs BenchResize's measurement on a small group,
// so that the benchmark cannot rot: it completes, finds each old shard
// ended once per change and no overlap.
func TestResizeBenchBriefly(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	r := testing.Benchmark(func(b *testing.B) {
		shardstest.BenchResize(b, 8, 2, resizeTiming, func(int) backends.Store { return unclosed{store} })
	})
	if r.N == 0 {
		t.Fatal("BenchResize failed")
	}
	if r.Extra["overlaps"] != 0 || r.Extra["ends/old-shard"] != 1 {
		t.Errorf("BenchResize: %v, want 0 overlaps and 1 end per old shard", r.Extra)
	}
}
