package shards_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/shardstest"
	"github.com/tenure-go/tenure/lifecycle"
	"github.com/tenure-go/tenure/shards"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	testTTL  = 3 * time.Second
	testStep = 100 * time.Millisecond
)

// timing is the elector template of the fake-clock tests: no jitter, so
// every wait is its nominal length.
func timing(clk *clocktest.Clock) elector.Config {
	return elector.Config{
		TTL:           testTTL,
		RenewPeriod:   time.Second,
		RetryPeriod:   250 * time.Millisecond,
		DisableJitter: true,
		Clock:         clk,
	}
}

// fence is the resource the shards guard: one counter per shard that
// accepts a write only with a token at least the highest it has seen.
type fence struct {
	mu   sync.Mutex
	high map[int]int64 // guarded by mu
}

// write applies a write for shard under token and reports whether it was
// accepted.
func (f *fence) write(shard int, token int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if token < f.high[shard] {
		return false
	}
	f.high[shard] = token
	return true
}

// cluster is members of one group over one memstore on a fake clock, each
// through its own fault-injecting wrapper, with an invariant checker: a write made by an
// owner that its own Term says may act is never refused by the fence, no two
// members' Terms are valid for one shard at any check, and per member and
// shard the callbacks alternate and never overlap.
type cluster struct {
	t      *testing.T
	clk    *clocktest.Clock
	store  *memstore.Store
	inner  backends.Store                      // what the members' stores wrap: store unless a test says otherwise
	wrap   func(backends.Store) backends.Store // if set, each member instance's store is wrap(inner)
	onStep func()                              // called before each step of the clock, if set
	count  int
	fence  fence
	sig    electortest.Signal

	mu      sync.Mutex
	members map[string]*node // by identity, the latest instance; guarded by mu
	events  []event          // every callback, in order; guarded by mu
}

// node is one member instance.
type node struct {
	id               string
	m                *shards.Member
	*shardstest.Link              // the member's store, which Cut cuts off as a crash, a stopped process or a partition would
	in               map[int]bool // shards whose OnAcquired runs; guarded by cluster.mu
}

type event struct {
	id       string
	m        *shards.Member
	shard    int
	acquired bool // else released
	term     elector.Term
	at       time.Time
}

func newCluster(t *testing.T, count int) *cluster {
	t.Helper()
	clk := clocktest.New(t0)
	store := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { store.Close() })
	return &cluster{t: t, clk: clk, store: store, count: count, fence: fence{high: map[int]int64{}}, members: map[string]*node{}}
}

// add starts a member with identity id (replacing the record of an earlier
// instance of id, which keeps running until stopped).
func (c *cluster) add(id string) *node {
	c.t.Helper()
	inner := c.inner
	if inner == nil {
		inner = c.store
	}
	if c.wrap != nil {
		inner = c.wrap(inner)
	}
	// Each instance writes through its own store, as a process does.
	n := &node{id: id, Link: shardstest.NewLink(newOwnWrites(c.t, inner), c.clk), in: map[int]bool{}}
	cfg := shards.Config{
		Group:    "g",
		Identity: id,
		Count:    c.count,
		Elector:  timing(c.clk),
		OnAcquired: func(ctx context.Context, shard int, term elector.Term) {
			c.acquired(n, shard, term)
			<-ctx.Done()
			c.mu.Lock()
			n.in[shard] = false
			c.mu.Unlock()
			c.sig.Notify()
		},
		OnReleased: func(shard int, term elector.Term, cause elector.Cause) { c.released(n, shard, term) },
	}
	cfg.Elector.Trace.StateChanged = func(from, to lifecycle.State) { c.sig.Notify() }
	m, err := shards.New(n.Store, cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	n.m = m
	c.mu.Lock()
	c.members[id] = n
	c.mu.Unlock()
	if err := m.Start(context.Background()); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		n.Heal()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stopped := make(chan error, 1)
		go func() { stopped <- m.Stop(ctx) }()
		// Stopping waits for releases the fake clock bounds: keep it moving.
		for {
			select {
			case err := <-stopped:
				if err != nil {
					c.t.Errorf("stop %s: %v", id, err)
				}
				return
			default:
				c.clk.Add(testStep)
				c.quiesce()
			}
		}
	})
	return n
}

func (c *cluster) acquired(n *node, shard int, term elector.Term) {
	now := c.clk.Now()
	t, ok := n.m.Term(shard)
	c.mu.Lock()
	if n.in[shard] {
		c.t.Errorf("%s shard %d: OnAcquired while its previous OnAcquired runs", n.id, shard)
	}
	n.in[shard] = true
	if last := c.lastLocked(n.m, shard); last != nil && last.acquired {
		c.t.Errorf("%s shard %d: OnAcquired twice without OnReleased", n.id, shard)
	}
	c.events = append(c.events, event{id: n.id, m: n.m, shard: shard, acquired: true, term: term, at: now})
	c.mu.Unlock()
	if !ok || t.Token != term.Token {
		c.t.Logf("%s shard %d: term of token %d already over in OnAcquired (Term %v, %v): no write", n.id, shard, term.Token, t, ok)
	}
	if ok && t.Token == term.Token && !c.fence.write(shard, term.Token) {
		c.t.Errorf("%s shard %d: a write under token %d, made while its term was valid, was refused: a newer owner acted first", n.id, shard, term.Token)
	}
	c.check("OnAcquired")
	c.sig.Notify()
}

func (c *cluster) released(n *node, shard int, term elector.Term) {
	c.mu.Lock()
	if last := c.lastLocked(n.m, shard); last == nil || !last.acquired || last.term.Token != term.Token {
		c.t.Errorf("%s shard %d: OnReleased(token %d) not paired with the last OnAcquired", n.id, shard, term.Token)
	}
	c.events = append(c.events, event{id: n.id, m: n.m, shard: shard, term: term, at: c.clk.Now()})
	c.mu.Unlock()
	c.sig.Notify()
}

// lastLocked is the last callback of member instance m for shard.
func (c *cluster) lastLocked(m *shards.Member, shard int) *event {
	for i := len(c.events) - 1; i >= 0; i-- {
		if c.events[i].m == m && c.events[i].shard == shard {
			return &c.events[i]
		}
	}
	return nil
}

// nodes returns the members' latest instances.
func (c *cluster) nodes() []*node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*node
	for _, n := range c.members {
		out = append(out, n)
	}
	return out
}

// node returns the latest instance of id.
func (c *cluster) node(id string) *node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[id]
}

// check fails the test if two instances hold a valid Term on one shard.
func (c *cluster) check(where string) {
	c.mu.Lock()
	var ms []*shards.Member
	for _, e := range c.events {
		if !slices.Contains(ms, e.m) {
			ms = append(ms, e.m)
		}
	}
	c.mu.Unlock()
	for shard := range c.count {
		var holders []int64
		for _, m := range ms {
			if t, ok := m.Term(shard); ok {
				holders = append(holders, t.Token)
			}
		}
		if len(holders) > 1 {
			c.t.Errorf("%s at %v: shard %d has %d owners acting (tokens %v)", where, c.clk.Now().Sub(t0), shard, len(holders), holders)
		}
	}
}

// sources are what reports a change: the callbacks and every member's reads.
func (c *cluster) sources() []electortest.Source {
	srcs := []electortest.Source{&c.sig}
	for _, n := range c.nodes() {
		srcs = append(srcs, changed{n.m})
	}
	return srcs
}

type changed struct{ m *shards.Member }

func (s changed) Changed() <-chan struct{} { return s.m.Changed() }

// atRest is how many timers the cluster arms when nothing is in flight: the
// members' (see Member.AtRest). The memstore's expiry timer is left out: it
// is armed only while a watch is open, and counting one too few only lets
// a wait end early, while one too many would never end.
func (c *cluster) atRest() int {
	n := 0
	c.mu.Lock()
	var ms []*shards.Member
	for _, e := range c.allInstancesLocked() {
		ms = append(ms, e)
	}
	c.mu.Unlock()
	for _, m := range ms {
		n += m.AtRest()
	}
	return n
}

// instances are every member instance started, stopped ones included.
func (c *cluster) allInstancesLocked() []*shards.Member {
	var out []*shards.Member
	for _, n := range c.members {
		out = append(out, n.m)
	}
	for _, e := range c.events {
		if !slices.Contains(out, e.m) {
			out = append(out, e.m)
		}
	}
	return out
}

// quiesce waits until every goroutine under test has armed the timers of
// its state.
func (c *cluster) quiesce() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		want := c.atRest()
		err := electortest.UntilOrArmed(ctx, c.clk, want, "a change", func() bool { return c.atRest() != want }, c.sources()...)
		if err != nil {
			c.t.Fatalf("at %v: timers never armed: %d waiters, want %d: %v", c.clk.Now().Sub(t0), c.clk.Waiters(), want, err)
		}
		if c.clk.Waiters() >= c.atRest() {
			return
		}
	}
}

// stepUntil moves the clock in steps until cond holds, checking the
// invariants at every step, and returns the fake time it took. It fails the
// test if cond does not hold within limit.
func (c *cluster) stepUntil(what string, limit time.Duration, cond func() bool) time.Duration {
	c.t.Helper()
	start := c.clk.Now()
	for {
		c.quiesce()
		c.check(what)
		if cond() {
			return c.clk.Now().Sub(start)
		}
		if c.clk.Now().Sub(start) > limit {
			c.t.Fatalf("%s: not within %v: %s", what, limit, c.describe())
		}
		if c.onStep != nil {
			c.onStep()
		}
		c.clk.Add(testStep)
	}
}

// await waits, without moving the clock, until cond holds: for what needs
// no time to pass (a graceful handover, a join).
func (c *cluster) await(what string, cond func() bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := electortest.Until(ctx, what, func() bool { c.check(what); return cond() }, c.sources()...); err != nil {
		c.t.Fatalf("%v: %s", err, c.describe())
	}
}

// settled reports whether the live members agree on the membership ids,
// every shard is owned by the member it is placed on, and that member alone,
// and every live member observes that owner.
func (c *cluster) settled(ids ...string) bool {
	want := shards.Place(c.count, ids)
	owned := make([]string, c.count)
	for _, n := range c.nodes() {
		if !slices.Contains(ids, n.id) {
			continue
		}
		if !slices.Equal(n.m.Members(), sorted(ids)) {
			return false
		}
		for s := range c.count {
			if o, ok := n.m.Owner(s); !ok || o.Holder.ID != want[s] {
				return false
			}
		}
		for _, s := range n.m.Owned() {
			if owned[s] != "" {
				return false
			}
			owned[s] = n.id
		}
	}
	return slices.Equal(owned, want)
}

func (c *cluster) describe() string {
	s := ""
	for _, n := range c.nodes() {
		s += fmt.Sprintf("\n  %s: members %v owned %v", n.id, n.m.Members(), n.m.Owned())
	}
	return s
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}
