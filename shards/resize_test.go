package shards_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
	"github.com/tenure-go/tenure/internal/testrig/shardstest"
	"github.com/tenure-go/tenure/shards"
)

// resizeGroup is members of one group over one memstore in real time, each
// through a Link that can cut it off, recording every term with its span:
// no key may be in the spans of two terms acting at once, whatever their
// counts.
type resizeGroup struct {
	t     *testing.T
	store *memstore.Store
	count int
	sig   electortest.Signal

	mu      sync.Mutex
	members map[string]*resizeMember
	acting  []*spanTerm // guarded by mu
	terms   []*spanTerm // every term begun; guarded by mu
}

type resizeMember struct {
	*shards.Member
	*shardstest.Link
	id string
}

type spanTerm struct {
	id    string
	span  shards.Span
	token int64
	ended bool
}

// overlap reports whether some key lies in both spans: a key of hash h is
// in shard h mod c, so shards a of count p and b of count q share keys
// exactly when a ≡ b (mod gcd(p, q)).
func overlap(a, b shards.Span) bool {
	g := gcdInt(a.Count, b.Count)
	return a.Shard%g == b.Shard%g
}

func gcdInt(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

var resizeTiming = elector.Config{TTL: time.Second, RenewPeriod: 250 * time.Millisecond, RetryPeriod: 50 * time.Millisecond}

func newResizeGroup(t *testing.T, count int) *resizeGroup {
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	return &resizeGroup{t: t, store: store, count: count, members: map[string]*resizeMember{}}
}

func (g *resizeGroup) add(id string, count int) *resizeMember {
	g.t.Helper()
	return g.addOver(g.store, id, count)
}

// addOver starts a member whose store is inner (behind its Link).
func (g *resizeGroup) addOver(inner backends.Store, id string, count int) *resizeMember {
	g.t.Helper()
	m := &resizeMember{id: id, Link: shardstest.NewLink(inner, nil)}
	sm, err := shards.New(m.Store, shards.Config{
		Group: "g", Identity: id, Count: count, Elector: resizeTiming,
		OnAcquired: func(ctx context.Context, shard int, term elector.Term) {
			span, ok := m.SpanOf(term)
			if !ok || span.Shard != shard {
				g.t.Errorf("%s: SpanOf(term of shard %d, key %q) = %+v, %v", id, shard, term.Key, span, ok)
			}
			st := &spanTerm{id: id, span: span, token: term.Token}
			g.mu.Lock()
			for _, o := range g.acting {
				if overlap(o.span, span) {
					g.t.Errorf("%s acts on %+v (token %d) while %s acts on %+v (token %d): keys with two owners", id, span, term.Token, o.id, o.span, o.token)
				}
			}
			g.acting = append(g.acting, st)
			g.terms = append(g.terms, st)
			g.mu.Unlock()
			g.sig.Notify()
			<-ctx.Done()
			g.mu.Lock()
			st.ended = true
			g.acting = slices.DeleteFunc(g.acting, func(o *spanTerm) bool { return o == st })
			g.mu.Unlock()
			g.sig.Notify()
		},
	})
	if err != nil {
		g.t.Fatal(err)
	}
	m.Member = sm
	if err := sm.Start(context.Background()); err != nil {
		g.t.Fatal(err)
	}
	g.mu.Lock()
	g.members[id] = m
	g.mu.Unlock()
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

// settled reports whether the acting terms are exactly the shards of
// count placed on the live members ids, one term each.
func (g *resizeGroup) settled(count int, ids ...string) bool {
	want := shards.Place(count, ids)
	g.mu.Lock()
	defer g.mu.Unlock()
	got := make([]string, count)
	for _, st := range g.acting {
		if st.span.Count != count || got[st.span.Shard] != "" {
			return false
		}
		got[st.span.Shard] = st.id
	}
	return slices.Equal(got, want)
}

func (g *resizeGroup) await(what string, cond func() bool) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := electortest.Until(ctx, what, cond, &g.sig); err != nil {
		g.mu.Lock()
		defer g.mu.Unlock()
		var acting []string
		for _, st := range g.acting {
			acting = append(acting, fmt.Sprintf("%s:%d/%d", st.id, st.span.Shard, st.span.Count))
		}
		g.t.Fatalf("%v; acting %v", err, acting)
	}
}

// begun counts the terms begun of count shards, by shard.
func (g *resizeGroup) begun(count int) map[int]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[int]int{}
	for _, st := range g.terms {
		if st.span.Count == count {
			out[st.span.Shard]++
		}
	}
	return out
}

// TestResizeLive doubles and then halves the count of a running group of
// three members: no key has two owners acting at once (checked at every
// term's start, over the spans of every acting term), each shard of the
// new count is taken once, by the member it is placed on, and the record
// names the new count alone once Resize has returned.
func TestResizeLive(t *testing.T) {
	g := newResizeGroup(t, 8)
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		g.add(id, 8)
	}
	g.await("8 shards settle", func() bool { return g.settled(8, ids...) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, step := range []struct{ from, to int }{{8, 16}, {16, 8}} {
		before := g.begun(step.to)
		if err := shards.Resize(ctx, g.store, "g", step.to); err != nil {
			t.Fatalf("Resize(%d): %v", step.to, err)
		}
		g.await(fmt.Sprintf("%d shards settle", step.to), func() bool { return g.settled(step.to, ids...) })
		after := g.begun(step.to)
		for shard := range step.to {
			if n := after[shard] - before[shard]; n != 1 {
				t.Errorf("%d to %d: shard %d of %d began %d terms, want 1", step.from, step.to, shard, step.to, n)
			}
		}
		for _, id := range ids {
			if got := g.members[id].Count(); got != step.to {
				t.Errorf("%s: Count() = %d after the change to %d", id, got, step.to)
			}
		}
	}
	e, err := g.store.Get(ctx, "g/count")
	if err != nil || string(e.Value) != "8 g2" {
		t.Errorf("record after two changes: %q, %v; want \"8 g2\"", e.Value, err)
	}
	// A second Resize to the count there is has nothing to do.
	if err := shards.Resize(ctx, g.store, "g", 8); err != nil {
		t.Errorf("Resize to the count in force: %v", err)
	}
	// A member configured with the old count is refused; the new one joins.
	m, err := shards.New(g.store, shards.Config{Group: "g", Identity: "d", Count: 16, Elector: resizeTiming})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); !errors.Is(err, shards.ErrCountMismatch) {
		t.Errorf("a member of the old count: Start = %v, want ErrCountMismatch", err)
	}
	g.add("d", 8)
	g.await("a member joins at the new count", func() bool { return g.settled(8, "a", "b", "c", "d") })
}

// TestResizeWaitsForCrashedOwner cuts off a member, as a crash would, just
// before a change of count: the shards of the new count that draw keys
// from its shards are taken only once its claims have expired, and no key
// has two owners meanwhile.
func TestResizeWaitsForCrashedOwner(t *testing.T) {
	g := newResizeGroup(t, 4)
	a := g.add("a", 4)
	g.add("b", 4)
	g.await("4 shards settle", func() bool { return g.settled(4, "a", "b") })
	a.Cut()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := shards.Resize(ctx, g.store, "g", 8); err != nil {
		t.Fatal(err)
	}
	// a's membership expired as well: the 8 shards are b's.
	g.await("8 shards on b", func() bool { return g.settled(8, "b") })
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
	g.await("4 shards settle", func() bool { return g.settled(4, "a", "b", "c") })
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
	g.await("8 shards settle on a and b", func() bool { return g.settled(8, "a", "b") })
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
