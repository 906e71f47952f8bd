package shards_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
	"github.com/tenure-go/tenure/shards"
)

// checkBalanced fails the test unless the members in ids own between
// ⌊S/M⌋ and ⌈S/M⌉ shards each, and every member observes each shard's owner
// as the current term of the member the placement names.
func (c *cluster) checkBalanced(ids ...string) {
	c.t.Helper()
	lo, hi := c.count/len(ids), (c.count+len(ids)-1)/len(ids)
	place := shards.Place(c.count, ids)
	for _, n := range c.nodes() {
		if !slices.Contains(ids, n.id) {
			continue
		}
		if got := len(n.m.Owned()); got < lo || got > hi {
			c.t.Errorf("%s owns %d shards, want %d..%d", n.id, got, lo, hi)
		}
		for s := range c.count {
			o, ok := n.m.Owner(s)
			term, owns := c.node(place[s]).m.Term(s)
			if !ok || !owns || o.Holder != term.Holder || o.Token != term.Token {
				c.t.Errorf("%s observes shard %d owned by %v (ok %v), want %s's term %v (owns %v)", n.id, s, o, ok, place[s], term, owns)
			}
		}
	}
}

func TestSettleJoinAndLeave(t *testing.T) {
	c := newCluster(t, 16)
	c.add("a")
	c.add("b")
	took := c.stepUntil("two members settle", 2*testTTL, func() bool { return c.settled("a", "b") })
	t.Logf("two members settled in %v", took)
	c.quiesce()
	c.checkBalanced("a", "b")

	c.add("c")
	// A join needs no time to pass: the newcomer's membership shows
	// through the watch, the others release what moves, and it takes it.
	c.await("a join settles", func() bool { return c.settled("a", "b", "c") })
	c.quiesce()
	c.checkBalanced("a", "b", "c")

	// A graceful leave needs no time to pass either: the leaver releases,
	// the others take its shards as their watches report the release.
	b := c.node("b")
	stopped := make(chan error, 1)
	go func() { stopped <- b.m.Stop(context.Background()) }()
	c.await("a leave settles", func() bool { return c.settled("a", "c") })
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	c.quiesce()
	c.checkBalanced("a", "c")
	if got := b.m.Owned(); len(got) != 0 {
		t.Errorf("stopped member owns %v", got)
	}
	c.checkPaired()
}

// checkPaired fails the test unless every OnAcquired of a stopped member
// instance was followed by its OnReleased.
func (c *cluster) checkPaired() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	open := map[string]int{}
	for _, e := range c.events {
		select {
		case <-e.m.Done():
		default:
			continue
		}
		k := fmt.Sprintf("%p/%d", e.m, e.shard)
		if e.acquired {
			open[k]++
		} else {
			open[k]--
		}
	}
	for k, n := range open {
		if n != 0 {
			c.t.Errorf("%s: %d OnAcquired without OnReleased", k, n)
		}
	}
}

// TestCutMemberTakenOver checks that a member cut off from the store
// (crashed, stopped or partitioned: to the others it is all one) loses its
// shards to the others within a TTL and a read, and gets its share back when
// it returns.
func TestCutMemberTakenOver(t *testing.T) {
	c := newCluster(t, 24)
	for _, id := range []string{"a", "b", "c"} {
		c.add(id)
	}
	c.stepUntil("settle", 2*testTTL, func() bool { return c.settled("a", "b", "c") })
	b := c.node("b")
	b.Cut()
	took := c.stepUntil("takeover", testTTL+2*testStep, func() bool { return c.settled("a", "c") })
	t.Logf("cut member's shards owned elsewhere after %v (TTL %v)", took, testTTL)
	c.quiesce()
	c.checkBalanced("a", "c")

	b.Heal()
	took = c.stepUntil("return", 2*testTTL, func() bool { return c.settled("a", "b", "c") })
	t.Logf("returned member settled after %v", took)
	c.quiesce()
	c.checkBalanced("a", "b", "c")
}

// TestRestartWarmsUp checks that a member restarted with the same identity
// while its previous instance's claims are live acts on no shard before those
// claims have ended: each first OnAcquired of the new instance comes after
// the old instance's deadline on that shard, with a greater token.
func TestRestartWarmsUp(t *testing.T) {
	c := newCluster(t, 12)
	old := c.add("a")
	c.add("b")
	c.stepUntil("settle", 2*testTTL, func() bool { return c.settled("a", "b") })
	deadlines := map[int]elector.Term{}
	for _, s := range old.m.Owned() {
		term, ok := old.m.Term(s)
		if !ok {
			t.Fatalf("old instance owns shard %d but has no term", s)
		}
		deadlines[s] = term
	}
	if len(deadlines) == 0 {
		t.Fatal("old instance owns nothing")
	}
	old.Cut() // as if the process died now
	restarted := c.add("a")
	c.stepUntil("restart settles", 2*testTTL, func() bool { return c.settled("a", "b") })
	// A shard shows in Owned as its term begins, just before OnAcquired.
	c.await("the restarted instance's OnAcquired", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for s := range deadlines {
			if last := c.lastLocked(restarted.m, s); last == nil || !last.acquired {
				return false
			}
		}
		return true
	})

	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[int]bool{}
	for _, e := range c.events {
		if e.m != restarted.m || !e.acquired || seen[e.shard] {
			continue
		}
		seen[e.shard] = true
		prev, ok := deadlines[e.shard]
		if !ok {
			continue
		}
		if !e.at.After(prev.Deadline) {
			t.Errorf("shard %d: restarted instance acquired at %v, before the old instance's deadline %v", e.shard, e.at.Sub(t0), prev.Deadline.Sub(t0))
		}
		if e.term.Token <= prev.Token {
			t.Errorf("shard %d: restarted instance's token %d not above the old one %d", e.shard, e.term.Token, prev.Token)
		}
	}
	for s := range deadlines {
		if !seen[s] {
			t.Errorf("shard %d: the restarted instance never took it back", s)
		}
	}
}

func TestCountIsFixed(t *testing.T) {
	c := newCluster(t, 8)
	c.add("a")
	m, err := shards.New(c.store, shards.Config{Group: "g", Identity: "b", Count: 9, Elector: timing(c.clk)})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); !errors.Is(err, shards.ErrCountMismatch) {
		t.Fatalf("Start with another count: %v, want ErrCountMismatch", err)
	}
	<-m.Done()
}

// TestStoredCountRefused checks that a member refuses a group whose stored
// count is not its own, however the value was written (above MaxCount, not
// in the form a member writes, not a number, huge), and that the error
// quotes a huge value only in part.
func TestStoredCountRefused(t *testing.T) {
	for _, stored := range []string{"65537", "4294967296", "0256", "256 ", "-256", "", "ab", strings.Repeat("9", 4000)} {
		store := memstore.New()
		if _, err := store.CreateIfAbsent(context.Background(), "g/count", []byte(stored), 0); err != nil {
			t.Fatal(err)
		}
		m, err := shards.New(store, shards.Config{Group: "g", Identity: "a", Count: 256})
		if err != nil {
			t.Fatal(err)
		}
		err = m.Start(context.Background())
		if !errors.Is(err, shards.ErrCountMismatch) {
			t.Errorf("stored count %.20q: Start = %v, want ErrCountMismatch", stored, err)
		} else if len(err.Error()) > 200 {
			t.Errorf("stored count of %d bytes: the error has %d bytes, want it cut short", len(stored), len(err.Error()))
		}
		<-m.Done()
		store.Close()
	}
}

// TestMaxCount checks that a group may have MaxCount shards, at least
// 65,536, and that a placement of them is whole and balanced.
func TestMaxCount(t *testing.T) {
	if shards.MaxCount < 65536 {
		t.Fatalf("MaxCount = %d, want at least 65536", shards.MaxCount)
	}
	if err := (shards.Config{Group: "g", Identity: "a", Count: shards.MaxCount}).Validate(); err != nil {
		t.Fatalf("a config of MaxCount shards: %v", err)
	}
	ms := members("member", 256)
	place := shards.Place(shards.MaxCount, ms)
	for s, id := range place {
		if id == "" {
			t.Fatalf("shard %d of %d placed nowhere", s, shards.MaxCount)
		}
	}
	if d := spread(place, ms); d > 1 {
		t.Errorf("Place(%d, 256 members): spread %d, want ≤ 1", shards.MaxCount, d)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := shards.Config{Group: "g", Identity: "a", Count: 4}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for name, mutate := range map[string]func(*shards.Config){
		"no group":     func(c *shards.Config) { c.Group = "" },
		"no identity":  func(c *shards.Config) { c.Identity = "" },
		"count zero":   func(c *shards.Config) { c.Count = 0 },
		"count big":    func(c *shards.Config) { c.Count = shards.MaxCount + 1 },
		"template key": func(c *shards.Config) { c.Elector.Key = "k" },
		"template cb":  func(c *shards.Config) { c.Elector.OnElected = func(context.Context, elector.Term) {} },
		"bad timing":   func(c *shards.Config) { c.Elector.TTL, c.Elector.RenewPeriod = time.Second, 2*time.Second },
	} {
		cfg := ok
		mutate(&cfg)
		if err := cfg.Validate(); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("%s: Validate = %v, want ErrInvalid", name, err)
		}
	}
}

// TestOneWatchPerMember checks that a member's electors watch their claims
// through the member's one watch of the group: a member owning every one of
// 32 shards has opened one store watch, not one per elector (on a filestore
// each watch costs an inotify instance, of which a user has 128 by default).
func TestOneWatchPerMember(t *testing.T) {
	c := newCluster(t, 32)
	a := c.add("a")
	c.stepUntil("settle", 2*testTTL, func() bool { return c.settled("a") })
	if got := a.Store.Calls(faults.OpWatch); got != 1 {
		t.Errorf("a member owning 32 shards opened %d store watches, want 1", got)
	}
}

// TestStartContextStops checks that cancelling the context given to Start
// stops the member as Stop does: it leaves, its shards are released, and Done
// is closed.
func TestStartContextStops(t *testing.T) {
	c := newCluster(t, 4)
	c.add("b")
	c.stepUntil("settle", 2*testTTL, func() bool { return c.settled("b") })
	ctx, cancel := context.WithCancel(context.Background())
	// A term Stop ends before its OnAcquired was delivered gets neither
	// callback (see the elector's doc), so the count to expect is that of
	// the terms whose OnAcquired ran, not of the shards owned.
	var acquired, released atomic.Int32
	m, err := shards.New(c.store, shards.Config{Group: "g", Identity: "a", Count: 4, Elector: timing(c.clk),
		OnAcquired: func(context.Context, int, elector.Term) { acquired.Add(1); c.sig.Notify() },
		OnReleased: func(int, elector.Term, elector.Cause) { released.Add(1); c.sig.Notify() }})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.members["a"] = &node{id: "a", m: m, in: map[int]bool{}}
	c.mu.Unlock()
	c.stepUntil("a joins", 2*testTTL, func() bool { return len(m.Owned()) == 2 && acquired.Load()-released.Load() == 2 })
	cancel()
	select {
	case <-m.Done():
	case <-time.After(time.Minute):
		t.Fatal("member did not stop when its context was cancelled")
	}
	if got, want := released.Load(), acquired.Load(); got != want || want < 2 {
		t.Errorf("OnReleased called %d times after %d OnAcquired, want as many, at least 2", got, want)
	}
	c.await("b takes everything back", func() bool { return c.settled("b") })
	if err := m.Start(context.Background()); !errors.Is(err, shards.ErrAlreadyStarted) {
		t.Errorf("Start after the end: %v, want ErrAlreadyStarted", err)
	}
}

func TestStopBeforeStart(t *testing.T) {
	m, err := shards.New(newCluster(t, 4).store, shards.Config{Group: "g", Identity: "a", Count: 4})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := m.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	<-m.Done()
	if err := m.Start(context.Background()); !errors.Is(err, shards.ErrAlreadyStarted) {
		t.Errorf("Start after Stop: %v, want ErrAlreadyStarted", err)
	}
}

// TestEventsNeedNoListing checks that between full reads, a member follows
// the group through its watch: a join that moves half of its shards away
// costs it no listing of the group (on etcd, a listing costs a request per
// lease of the entries it returns).
func TestEventsNeedNoListing(t *testing.T) {
	c := newCluster(t, 8)
	a := c.add("a")
	c.stepUntil("settle", 2*testTTL, func() bool { return c.settled("a") })
	before := a.Store.Calls(faults.OpList)
	c.add("b")
	c.await("b joins", func() bool { return c.settled("a", "b") })
	if got := a.Store.Calls(faults.OpList) - before; got != 0 {
		t.Errorf("a member listed the group %d times while following a join, want 0", got)
	}
}

// quiet is a memory store whose watch reports no deletes and which does not
// claim expiry events, like a filestore: a member learns that a claim
// expired only by reading the group.
type quiet struct{ *memstore.Store }

func (q quiet) Capabilities() backends.Capabilities {
	c := q.Store.Capabilities()
	c.ExpiryEvents = false
	return c
}

func (q quiet) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	return filterWatch(ctx, q.Store, prefix, func(ev backends.Event) bool { return ev.Kind != backends.EventDelete })
}

// filterWatch watches prefix on s and passes on the events keep accepts.
func filterWatch(ctx context.Context, s backends.Store, prefix string, keep func(backends.Event) bool) (<-chan backends.Event, error) {
	in, err := s.(backends.Watcher).Watch(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make(chan backends.Event)
	go func() {
		defer close(out)
		for ev := range in {
			if !keep(ev) {
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// TestReadsAreNotPostponedByEvents checks that on a store that does not
// report expiry, a member reads the group every TTL/6 however many events its
// watch delivers meanwhile, so a crashed member's shards are taken over
// within a TTL and a sixth even while the group keeps changing.
func TestReadsAreNotPostponedByEvents(t *testing.T) {
	c := newCluster(t, 8)
	c.inner = quiet{c.store}
	var rev int64
	c.onStep = func() { // a write in the group at every step: a steady flow of events
		e, err := c.store.CompareAndSet(context.Background(), "g/noise", rev, []byte("x"), 0)
		if err != nil {
			t.Fatal(err)
		}
		rev = e.Revision
	}
	c.add("a")
	b := c.add("b")
	c.stepUntil("settle", 2*testTTL, func() bool { return c.settled("a", "b") })
	b.Cut()
	took := c.stepUntil("takeover", testTTL+testTTL/6+2*testStep, func() bool { return c.settled("a") })
	t.Logf("taken over after %v", took)
}

// TestLeaveDrainsWhileMembershipIsReleased checks that a leaving member
// drains its shards at once, without waiting for its membership's release:
// with every release of b held up in the store (a CompareAndDelete delayed on
// the clock, which does not move), every OnAcquired of b sees its context
// end; once the releases go through, the other member takes the shards.
func TestLeaveDrainsWhileMembershipIsReleased(t *testing.T) {
	c := newCluster(t, 8)
	c.add("a")
	b := c.add("b")
	c.stepUntil("settle", 2*testTTL, func() bool { return c.settled("a", "b") })
	c.quiesce()
	owned := b.m.Owned()
	if len(owned) == 0 {
		t.Fatal("b owns no shard")
	}
	delay := b.Store.Delay(faults.OpCompareAndDelete, testStep)
	stopped := make(chan error, 1)
	go func() { stopped <- b.m.Stop(context.Background()) }()
	drained := func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, s := range owned {
			if b.in[s] {
				return false
			}
		}
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := electortest.Until(ctx, "b's shards drained", drained, c.sources()...); err != nil {
		t.Fatalf("b's shards still run while its membership release is held up: %v", err)
	}
	if err := delay.AwaitHolding(ctx, 1); err != nil {
		t.Fatal(err)
	}
	c.stepUntil("a leave settles", testTTL, func() bool { return c.settled("a") })
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	c.checkPaired()
}

// TestAnswersWhilePlacing checks that a member computing a new placement goes
// on answering Owned, Owner and Members: it computes the placement without
// holding its lock.
func TestAnswersWhilePlacing(t *testing.T) {
	c := newCluster(t, 16)
	entered, release := make(chan struct{}), make(chan struct{})
	var hold sync.Once
	shards.HoldPlacing(t, func(members []string) {
		if len(members) == 2 {
			hold.Do(func() {
				close(entered)
				<-release
			})
		}
	})
	var released sync.Once
	let := func() { released.Do(func() { close(release) }) }
	defer let()
	c.add("a")
	c.stepUntil("a settles", 2*testTTL, func() bool { return c.settled("a") })
	c.add("b")
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("no member placed the two members")
	}
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		for _, n := range c.nodes() {
			n.m.Owned()
			n.m.Members()
			n.m.Owner(0)
		}
	}()
	select {
	case <-answered:
	case <-time.After(30 * time.Second):
		t.Fatal("Owned, Members or Owner waited for a placement to be computed")
	}
	let()
	c.await("two members settle", func() bool { return c.settled("a", "b") })
	c.checkBalanced("a", "b")
}

// TestOutageBacksOff checks that a member whose store fails every call for a
// minute backs off instead of reading the group again at once: on a store
// without expiry events it reads on a schedule, and a failed read must push
// that schedule back (by a capped, growing wait), not leave it in the past.
// The member's List calls over the outage are bounded by the outage over
// the first retry wait (TTL/6), which a fixed-rate retry would reach and a
// backoff stays well under; the test stops counting at a threshold so that a
// member that spins fails it rather than running for ever.
func TestOutageBacksOff(t *testing.T) {
	c := newCluster(t, 8)
	c.inner = quiet{c.store}
	a := c.add("a")
	c.stepUntil("settle", 2*testTTL, func() bool { return c.settled("a") })
	c.quiesce()
	const outage = time.Minute
	limit := int(outage / (testTTL / 6))
	lists, all := a.Store.Calls(faults.OpList), a.Store.Calls(faults.AllOps)
	fault := a.Store.Fail(faults.AllOps, 0, backends.ErrUnavailable)
	for start := c.clk.Now(); c.clk.Now().Sub(start) < outage; {
		c.quiesce()
		if got := a.Store.Calls(faults.OpList) - lists; got > limit {
			t.Fatalf("after %v of outage the member listed the group %d times, want at most %d", c.clk.Now().Sub(start), got, limit)
		}
		c.clk.Add(testStep)
	}
	c.quiesce()
	lists, all = a.Store.Calls(faults.OpList)-lists, a.Store.Calls(faults.AllOps)-all
	t.Logf("over %v of outage: %d List calls, %d calls in all", outage, lists, all)
	if lists > limit {
		t.Errorf("the member listed the group %d times over %v of outage, want at most %d", lists, outage, limit)
	}
	// Every elector (the membership and one per shard) backs off too.
	if most := (c.count + 2) * int(outage/timing(c.clk).RetryPeriod); all > most {
		t.Errorf("the member made %d calls over %v of outage, want at most %d", all, outage, most)
	}
	fault.Remove()
	took := c.stepUntil("recover", 3*testTTL, func() bool { return c.settled("a") })
	t.Logf("settled again %v after the outage", took)
}
