// Package shardstest runs shard groups on the real clock over any backend,
// for the tests of package shards and of its real-server tests: members
// join, leave gracefully and are cut off, and an invariant checker watches
// every owner. It is test support: import it only from _test.go files.
//
// The checker records, for every term of every shard, when its OnAcquired
// began and when its context ended (when OnAcquired saw it done, or the
// context's deadline if that came first), on this process's monotonic clock,
// and writes the term's token to a fenced counter (one per shard, which
// refuses a token lower than the highest it has seen) while the member's Term
// says it owns the shard. It fails the test if two terms of one shard were
// acting at once, if a term that still owned its shard was refused by the
// fence, or if the callbacks of one member and shard did not alternate.
package shardstest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
	"github.com/tenure-go/tenure/lifecycle"
	"github.com/tenure-go/tenure/shards"
)

// Group is shard members on the real clock, each over its own store (as
// separate processes have), with the invariant checker.
type Group struct {
	t        testing.TB
	count    int
	timing   elector.Config
	newStore func(member int) backends.Store
	sig      electortest.Signal
	tracer   tracer // the members' claim writes and deletions seen, while on
	untraced bool   // the members' stores are not traced (their watches then have no hop of the tracer's)

	mu      sync.Mutex
	members map[string]*Member // by identity, the latest instance; guarded by mu
	high    map[int]int64      // the fence: highest token written, by shard; guarded by mu
	terms   []*span            // every term, in acquisition order; guarded by mu
	acting  map[acting]*span   // the terms whose OnAcquired runs; guarded by mu
	stores  int                // stores made so far; guarded by mu
	tally   tally              // the acting terms counted by shard and member; guarded by mu
}

// Member is one member instance of a Group.
type Member struct {
	*shards.Member
	*Link
	ID string
}

// Link is a member's store behind a switch that cuts the member off.
type Link struct {
	Store *faults.Store // the member's store, where faults are injected

	mu  sync.Mutex
	cut *faults.Fault // guarded by mu
}

// NewLink wraps a member's store; delays injected on it run on clk (nil for
// the real clock).
func NewLink(inner backends.Store, clk clock.Clock) *Link {
	return &Link{Store: faults.Wrap(inner, clk)}
}

// acting names the OnAcquired of one member instance and shard.
type acting struct {
	member *Member
	shard  int
}

// span is one term of one shard: when it began acting and when it saw its
// end.
type span struct {
	member *Member
	shard  int
	token  int64
	begin  time.Time
	end    time.Time // zero while acting
}

// New returns an empty Group of count shards. newStore returns the store
// of the i-th member started (its store is closed at cleanup); timing is the
// elector template (its Clock must be left nil: the real clock).
func New(t testing.TB, count int, timing elector.Config, newStore func(i int) backends.Store) *Group {
	g := &Group{t: t, count: count, timing: timing, newStore: newStore, members: map[string]*Member{}, high: map[int]int64{}, acting: map[acting]*span{}, tally: newTally(count)}
	t.Cleanup(g.checkSpans)
	return g
}

// Add starts a member with identity id. A member already running with id
// keeps running (as a process that was not stopped would).
func (g *Group) Add(id string) *Member {
	g.t.Helper()
	g.mu.Lock()
	i := g.stores
	g.stores++
	g.mu.Unlock()
	inner := g.newStore(i)
	g.t.Cleanup(func() { _ = inner.Close() })
	store := inner
	if !g.untraced {
		store = g.tracer.traced(inner, id)
	}
	m := &Member{ID: id, Link: NewLink(store, nil)}
	cfg := shards.Config{
		Group:    "g",
		Identity: id,
		Count:    g.count,
		Elector:  g.timing,
		OnAcquired: func(ctx context.Context, shard int, term elector.Term) {
			g.acquired(ctx, m, shard, term)
		},
		OnReleased: func(shard int, term elector.Term, cause elector.Cause) { g.sig.Notify() },
	}
	// A term that ends without a callback yet (its deadline passed) shows
	// in Owned: let the waiters look again.
	cfg.Elector.Trace.StateChanged = func(from, to lifecycle.State) { g.sig.Notify() }
	sm, err := shards.New(m.Store, cfg)
	if err != nil {
		g.t.Fatal(err)
	}
	m.Member = sm
	g.mu.Lock()
	g.members[id] = m
	g.mu.Unlock()
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

// acquired is OnAcquired: it records the term, writes its token to the
// fence while the member owns the shard, and acts until ctx is done.
func (g *Group) acquired(ctx context.Context, m *Member, shard int, term elector.Term) {
	sp := &span{member: m, shard: shard, token: term.Token, begin: time.Now()}
	key := acting{m, shard}
	g.mu.Lock()
	if o := g.acting[key]; o != nil {
		g.t.Errorf("%s shard %d: OnAcquired (token %d) while the one of token %d runs", m.ID, shard, term.Token, o.token)
	}
	g.acting[key] = sp
	g.terms = append(g.terms, sp)
	g.tally.add(m.ID, shard, 1)
	g.mu.Unlock()
	if t, ok := m.Term(shard); ok && t.Token == term.Token {
		g.mu.Lock()
		if term.Token < g.high[shard] {
			g.t.Errorf("%s shard %d: token %d refused by the fence (highest %d) while its term was valid", m.ID, shard, term.Token, g.high[shard])
		} else {
			g.high[shard] = term.Token
		}
		g.mu.Unlock()
	}
	g.sig.Notify()
	<-ctx.Done()
	// The term ended at its deadline at the latest, whenever this goroutine
	// got to see it: by the rules, a member acts only while its context's Err
	// is nil, which it is not past that deadline, even in a process too
	// starved to run the timer that closes Done in time.
	end := time.Now()
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	g.mu.Lock()
	sp.end = end
	if g.acting[key] == sp {
		delete(g.acting, key)
	}
	g.tally.add(m.ID, shard, -1)
	g.mu.Unlock()
	g.sig.Notify()
}

// checkSpans fails the test if two terms of one shard acted at once.
func (g *Group) checkSpans() {
	g.mu.Lock()
	defer g.mu.Unlock()
	by := map[int][]*span{}
	for _, sp := range g.terms {
		by[sp.shard] = append(by[sp.shard], sp)
	}
	for shard, sps := range by {
		slices.SortFunc(sps, func(a, b *span) int { return a.begin.Compare(b.begin) })
		for i := 1; i < len(sps); i++ {
			prev, cur := sps[i-1], sps[i]
			if prev.end.IsZero() || prev.end.After(cur.begin) {
				g.t.Errorf("shard %d: %s (token %d) began at %v while %s (token %d) acted until %v",
					shard, cur.member.ID, cur.token, cur.begin.Format(time.StampMicro), prev.member.ID, prev.token, prev.end.Format(time.StampMicro))
			}
			if cur.token <= prev.token {
				g.t.Errorf("shard %d: token %d after token %d", shard, cur.token, prev.token)
			}
		}
	}
}

// Member returns the latest instance of id.
func (g *Group) Member(id string) *Member {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.members[id]
}

// Cut cuts the member off from its store: every call fails as
// unavailable, as for a crashed or stopped process or a partition.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut == nil {
		l.cut = l.Store.Partition(faults.PartitionFail)
	}
}

// Heal ends a Cut.
func (l *Link) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut != nil {
		l.cut.Remove()
		l.cut = nil
	}
}

// Settled reports whether every shard is owned by the member that the
// placement over ids names, and by no other member instance.
func (g *Group) Settled(ids ...string) bool {
	return g.settledAs(shards.Place(g.count, ids))
}

// settledAs reports whether every shard is owned by the member want names,
// and by no other member instance.
func (g *Group) settledAs(want []string) bool {
	g.mu.Lock()
	var ms []*Member
	for _, m := range g.members {
		ms = append(ms, m)
	}
	g.mu.Unlock()
	owned := make([]string, g.count)
	for _, m := range ms {
		for _, s := range m.Owned() {
			if owned[s] != "" {
				return false
			}
			owned[s] = m.ID
		}
	}
	return slices.Equal(owned, want)
}

// Await waits until the members in ids have settled (see Settled) and
// returns how long it took, failing the test after limit.
func (g *Group) Await(what string, limit time.Duration, ids ...string) time.Duration {
	g.t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	// The placement is computed once: the check runs at every callback,
	// on the CPU the members under measurement need.
	want := shards.Place(g.count, ids)
	if err := electortest.Until(ctx, what, func() bool { return g.settledAs(want) }, &g.sig); err != nil {
		g.t.Fatalf("%v:%s", err, g.describe())
	}
	return time.Since(start)
}

func (g *Group) describe() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := ""
	for _, m := range g.members {
		s += fmt.Sprintf("\n  %s: members %v owned %v err %v", m.ID, m.Members(), m.Owned(), m.Err())
	}
	return s
}

// Scenario runs the life of a group of three members a, b and c: they
// settle; d joins; b leaves gracefully; c is cut off and its shards are
// taken over once its claims expire; c returns. Every step ends when the
// group has settled again, and the invariant checker watches throughout.
// limit bounds each step.
func Scenario(t *testing.T, g *Group, limit time.Duration) {
	for _, id := range []string{"a", "b", "c"} {
		g.Add(id)
	}
	t.Logf("three members settled in %v", g.Await("three members settle", limit, "a", "b", "c"))
	g.Add("d")
	t.Logf("a join settled in %v", g.Await("a join settles", limit, "a", "b", "c", "d"))
	stopped := make(chan error, 1)
	go func() { stopped <- g.Member("b").Stop(context.Background()) }()
	t.Logf("a graceful leave settled in %v", g.Await("a leave settles", limit, "a", "c", "d"))
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	g.Member("c").Cut()
	t.Logf("a cut member's shards were taken over in %v", g.Await("takeover", limit, "a", "d"))
	g.Member("c").Heal()
	t.Logf("the cut member came back in %v", g.Await("return", limit, "a", "c", "d"))
}

// Handover runs act (which makes leaver leave: Stop, or Cut), waits until
// the members in ids have settled, and returns the shards leaver owned and,
// for each, the time from act's start to the first OnAcquired of another
// member on it.
func (g *Group) Handover(leaver *Member, act func(), limit time.Duration, ids ...string) (owned []int, took []time.Duration) {
	g.t.Helper()
	owned = leaver.Owned()
	g.mu.Lock()
	first := len(g.terms) // the terms before act began are not looked at
	g.mu.Unlock()
	start := time.Now()
	act()
	// First the records of the new owners' OnAcquired, a cheap check that
	// runs at every callback while the handover is measured; then the
	// settled group, a check that asks every member's electors.
	all := func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		took = took[:0]
		for _, s := range owned {
			for _, sp := range g.terms[first:] {
				if sp.shard == s && sp.member != leaver && !sp.begin.Before(start) {
					took = append(took, sp.begin.Sub(start))
					break
				}
			}
		}
		return len(took) == len(owned)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := electortest.Until(ctx, "the new owners' OnAcquired", all, &g.sig); err != nil {
		g.t.Fatal(err)
	}
	g.Await("handover", limit, ids...)
	return owned, took
}

// Quantiles returns the median and the maximum of ds, in milliseconds.
func Quantiles(ds []time.Duration) (p50, maxMs float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return ms(s[len(s)/2]), ms(s[len(s)-1])
}

// ReportLeaves reports graceful leaves: the median and the maximum of the
// handovers of every shard of every leave (handover-ms, handover-max-ms),
// and of the time each leave took until all its shards were acquired
// elsewhere (all-owned-ms, all-owned-max-ms).
func ReportLeaves(b *testing.B, handovers, leaves []time.Duration) {
	p50, mx := Quantiles(handovers)
	b.ReportMetric(p50, "handover-ms")
	b.ReportMetric(mx, "handover-max-ms")
	p50, mx = Quantiles(leaves)
	b.ReportMetric(p50, "all-owned-ms")
	b.ReportMetric(mx, "all-owned-max-ms")
}

// settled returns a Group of count shards whose members m0, m1, … have
// settled, and their identities.
func settled(b *testing.B, count, members int, timing elector.Config, newStore func(int) backends.Store) (*Group, []string) {
	g := New(b, count, timing, newStore)
	ids := make([]string, members)
	for i := range ids {
		ids[i] = fmt.Sprintf("m%d", i)
		g.Add(ids[i])
	}
	g.Await("settle", time.Minute, ids...)
	return g, ids
}

// BenchLeave measures graceful leaves: members members of a group of count
// shards settle; then, b.N times, one of them stops and the time each of
// its shards takes to be acquired elsewhere is recorded, and it rejoins
// (untimed). It reports the median and the maximum over all those shards
// (handover-ms, handover-max-ms); the median and the maximum over the
// leaves of the time until every shard of the leaver was acquired elsewhere
// (all-owned-ms, all-owned-max-ms); the shards the leaver owned
// (shards/leave); when the leaver's release of its membership was answered
// (left-ms, median over the leaves) and the other members' watches reported
// it (left-seen-ms, left-seen-max-ms, over every member of every leave); and
// where the time went, as medians over the same shards of the times from
// Stop at which the leaver's release was answered
// (released-ms, and its maximum released-max-ms), the new owner's watch
// reported the deletion (seen-ms) and its winning attempt was sent (sent-ms,
// sent-max-ms), the duration of that attempt (acquire-ms), the other
// members' acquisition attempts per shard (attempts/shard), and how many
// group watches ended on their own meanwhile (watch-ends); and the CPU time
// the process spent from each Stop until the handover was complete
// (cpu-ms/leave: the members' work, the checker's, and on etcd the
// embedded server's).
func BenchLeave(b *testing.B, count, members int, timing elector.Config, newStore func(int) backends.Store) {
	g, ids := settled(b, count, members, timing, newStore)
	var all, whole []time.Duration
	var bd breakdown
	var cpu time.Duration
	owned := 0
	b.ResetTimer()
	for i := range b.N {
		id := ids[i%members]
		leaver := g.Member(id)
		rest := slices.DeleteFunc(slices.Clone(ids), func(x string) bool { return x == id })
		var start time.Time
		g.tracer.start()
		cpu0 := cpuTime(b)
		had, ds := g.Handover(leaver, func() {
			start = time.Now()
			go func() { _ = leaver.Stop(context.Background()) }()
		}, time.Minute, rest...)
		cpu += cpuTime(b) - cpu0
		bd.add(g.tracer.stop(), start, id, had)
		all = append(all, ds...)
		if len(ds) > 0 {
			whole = append(whole, slices.Max(ds))
		}
		owned += len(ds)
		b.StopTimer()
		<-leaver.Done()
		g.Add(id)
		g.Await("rejoin", time.Minute, ids...)
		b.StartTimer()
	}
	ReportLeaves(b, all, whole)
	b.ReportMetric(float64(owned)/float64(b.N), "shards/leave")
	b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/leave")
	bd.report(b)
}

// BenchCrash measures takeovers after a member is cut off from its store
// (as a crashed process is): members members of a group of count shards
// settle; then, b.N times, one is cut off and the time each of its shards
// takes to be acquired elsewhere is recorded; it is healed and rejoins
// (untimed). It reports the median and the maximum (takeover-ms,
// takeover-max-ms) and the TTL (ttl-ms) they compare with.
func BenchCrash(b *testing.B, count, members int, timing elector.Config, newStore func(int) backends.Store) {
	g, ids := settled(b, count, members, timing, newStore)
	var all []time.Duration
	b.ResetTimer()
	for i := range b.N {
		id := ids[i%members]
		m := g.Member(id)
		rest := slices.DeleteFunc(slices.Clone(ids), func(x string) bool { return x == id })
		_, took := g.Handover(m, m.Cut, time.Minute, rest...)
		all = append(all, took...)
		b.StopTimer()
		m.Heal()
		g.Await("return", time.Minute, ids...)
		b.StartTimer()
	}
	p50, mx := Quantiles(all)
	b.ReportMetric(p50, "takeover-ms")
	b.ReportMetric(mx, "takeover-max-ms")
	b.ReportMetric(float64(timing.TTL/time.Millisecond), "ttl-ms")
}

// BenchRest measures what a settled group costs at rest: members members of
// a group of count shards settle and wait a TTL; then, b.N times, the
// process's CPU time and the members' store calls are counted over window
// of real time. It reports the CPU time per second of all members together
// (cpu-ms/s: the members are the process's only work, but the machine's
// other load slows it too), and their lists (lists/s), the entries those
// returned (listed/s) and their writes (writes/s) per second.
func BenchRest(b *testing.B, count, members int, timing elector.Config, newStore func(int) backends.Store, window time.Duration) {
	g, ids := settled(b, count, members, timing, newStore)
	<-time.After(timing.TTL)
	calls := func(ops faults.Op) int {
		n := 0
		for _, id := range ids {
			n += g.Member(id).Store.Calls(ops)
		}
		return n
	}
	b.ResetTimer()
	var cpu, elapsed time.Duration
	var lists, writes int
	var listed int64
	for range b.N {
		l0, w0, c0, t0 := calls(faults.OpList), calls(faults.Writes), cpuTime(b), time.Now()
		e0 := g.tracer.listed.Load()
		<-time.After(window)
		cpu += cpuTime(b) - c0
		elapsed += time.Since(t0)
		lists += calls(faults.OpList) - l0
		writes += calls(faults.Writes) - w0
		listed += g.tracer.listed.Load() - e0
		if !g.Settled(ids...) {
			b.Fatal("ownership changed at rest")
		}
	}
	secs := elapsed.Seconds()
	b.ReportMetric(float64(cpu.Milliseconds())/secs, "cpu-ms/s")
	b.ReportMetric(float64(lists)/secs, "lists/s")
	b.ReportMetric(float64(listed)/secs, "listed/s")
	b.ReportMetric(float64(writes)/secs, "writes/s")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
