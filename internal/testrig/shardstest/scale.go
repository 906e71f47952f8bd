package shardstest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

// tally counts the acting terms (OnAcquired running, its context not done)
// by shard and by member identity, so that whether the group is whole can be
// checked at every callback in time by the members, not the shards.
type tally struct {
	byShard  []int
	single   int            // shards with exactly one acting term
	byMember map[string]int // acting terms by member identity
}

func newTally(count int) tally {
	return tally{byShard: make([]int, count), byMember: map[string]int{}}
}

// add counts d (1 or −1) acting terms of member id on shard.
func (t *tally) add(id string, shard, d int) {
	if t.byShard[shard] == 1 {
		t.single--
	}
	t.byShard[shard] += d
	if t.byShard[shard] == 1 {
		t.single++
	}
	t.byMember[id] += d
}

// whole reports whether every shard has exactly one acting term, by one of
// ids, and each of ids acts on ⌊S/M⌋ or ⌈S/M⌉ shards: one owner per shard
// and balance within one.
func (g *Group) whole(ids []string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tally.single != g.count {
		return false
	}
	lo, hi := g.count/len(ids), (g.count+len(ids)-1)/len(ids)
	sum := 0
	for _, id := range ids {
		n := g.tally.byMember[id]
		if n < lo || n > hi {
			return false
		}
		sum += n
	}
	return sum == g.count
}

// owned reports whether every shard has exactly one acting term, by one of
// ids (balanced or not).
func (g *Group) owned(ids []string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.tally.single != g.count {
		return false
	}
	sum := 0
	for _, id := range ids {
		sum += g.tally.byMember[id]
	}
	return sum == g.count
}

// awaitCond waits until cond holds, checked at every callback and state
// change, and returns how long it took; it fails after limit.
func (g *Group) awaitCond(what string, limit time.Duration, cond func() bool) time.Duration {
	g.t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := electortest.Until(ctx, what, cond, &g.sig); err != nil {
		g.mu.Lock()
		single := g.tally.single
		g.mu.Unlock()
		g.t.Fatalf("%v: %d of %d shards have one owner", err, single, g.count)
	}
	return time.Since(start)
}

// overlaps counts the pairs of terms of one shard that acted at once, and
// the terms whose token did not rise above the previous term's.
func (g *Group) overlaps() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	by := map[int][]*span{}
	for _, sp := range g.terms {
		by[sp.shard] = append(by[sp.shard], sp)
	}
	n := 0
	for _, sps := range by {
		slices.SortFunc(sps, func(a, b *span) int { return a.begin.Compare(b.begin) })
		for i := 1; i < len(sps); i++ {
			prev, cur := sps[i-1], sps[i]
			if prev.end.IsZero() || prev.end.After(cur.begin) || cur.token <= prev.token {
				n++
			}
		}
	}
	return n
}

// BenchScale measures a large group in one process: members members of a
// group of count shards are started one after the other; then one member
// leaves gracefully, and then another is cut off from its store (as a
// crashed process is). It reports, in seconds: start_s, from the first
// member's Start to the last one's return; converge_s, from the last
// member's Start until every shard has exactly one owner and every member
// ⌊S/M⌋ or ⌈S/M⌉ shards (owners being terms whose OnAcquired runs with its
// context not done); leave_s, from the leaver's Stop until every shard has
// one owner again among the others, and leave_settled_s until they are
// balanced too; crash_s, from the cut until every shard has one owner
// among the rest, and crash_settled_s until balanced; ttl_s, the TTL they
// compare with. It also reports the process's resident memory once the
// group has converged (rss_mb), its goroutines then (goroutines), and how
// many pairs of terms of one shard acted at once or kept a token over the
// whole run (violations, which fails the benchmark too). With a
// steady.Requests, it also counts, once the group has converged and its
// renewals have run for a TTL, the members' requests over steady.Window,
// and reports them per second and per member (req/s/member), failing if
// any shard changed owner meanwhile. Each iteration starts a group of its
// own; -benchtime=1x is the intended run.
func BenchScale(b *testing.B, count, members int, timing elector.Config, newStore func(int) backends.Store, steady Steady) {
	var ramp, conv, leave, leaveSet, crash, crashSet, perMember []float64
	var rss, gor float64
	violations := 0
	for i := range b.N {
		g := New(b, count, timing, newStore)
		g.untraced = true
		ids := make([]string, members)
		for j := range ids {
			ids[j] = fmt.Sprintf("g%d-m%d", i, j)
		}
		first := time.Now()
		for j := range ids {
			g.Add(ids[j])
		}
		ramp = append(ramp, time.Since(first).Seconds())
		conv = append(conv, g.awaitCond("converge", 5*time.Minute, func() bool { return g.whole(ids) }).Seconds())
		rss, gor = max(rss, residentMB(b)), max(gor, float64(runtime.NumGoroutine()))
		if steady.Requests != nil {
			perMember = append(perMember, g.steadyRate(b, ids, timing, steady))
		}

		leaver := g.Member(ids[0])
		rest := ids[1:]
		start := time.Now()
		go func() { _ = leaver.Stop(context.Background()) }()
		g.awaitCond("leave re-owned", 5*time.Minute, func() bool { return g.owned(rest) })
		leave = append(leave, time.Since(start).Seconds())
		g.awaitCond("leave settled", 5*time.Minute, func() bool { return g.whole(rest) })
		leaveSet = append(leaveSet, time.Since(start).Seconds())
		<-leaver.Done()

		cut := g.Member(rest[0])
		rest = rest[1:]
		start = time.Now()
		cut.Cut()
		g.awaitCond("crash re-owned", 5*time.Minute, func() bool { return g.owned(rest) })
		crash = append(crash, time.Since(start).Seconds())
		g.awaitCond("crash settled", 5*time.Minute, func() bool { return g.whole(rest) })
		crashSet = append(crashSet, time.Since(start).Seconds())
		violations += g.overlaps()
	}
	b.ReportMetric(slices.Max(ramp), "start_s")
	b.ReportMetric(slices.Max(conv), "converge_s")
	b.ReportMetric(slices.Max(leave), "leave_s")
	b.ReportMetric(slices.Max(leaveSet), "leave_settled_s")
	b.ReportMetric(slices.Max(crash), "crash_s")
	b.ReportMetric(slices.Max(crashSet), "crash_settled_s")
	ttl := timing.TTL
	if ttl == 0 {
		ttl = elector.DefaultTTL
	}
	b.ReportMetric(ttl.Seconds(), "ttl_s")
	if len(perMember) > 0 {
		b.ReportMetric(slices.Max(perMember), "req/s/member")
	}
	b.ReportMetric(rss, "rss_mb")
	b.ReportMetric(gor, "goroutines")
	b.ReportMetric(float64(violations), "violations")
}

// Steady is what BenchScale needs to count a converged group's requests:
// the members' requests so far (Requests; nil for no count), and how long
// to count them (Window).
type Steady struct {
	Requests func() int64
	Window   time.Duration
}

// steadyRate waits a TTL for the group's renewals to run at their pace,
// then counts the members' requests over st.Window, and returns them per
// second and per member. It fails b if a term began meanwhile.
func (g *Group) steadyRate(b *testing.B, ids []string, timing elector.Config, st Steady) float64 {
	ttl := timing.TTL
	if ttl == 0 {
		ttl = elector.DefaultTTL
	}
	<-time.After(ttl)
	g.mu.Lock()
	terms := len(g.terms)
	g.mu.Unlock()
	before, start := st.Requests(), time.Now()
	<-time.After(st.Window)
	n, elapsed := st.Requests()-before, time.Since(start)
	g.mu.Lock()
	changed := len(g.terms) != terms
	g.mu.Unlock()
	if changed || !g.whole(ids) {
		b.Fatal("a shard changed owner during the steady window")
	}
	return float64(n) / elapsed.Seconds() / float64(len(ids))
}

// residentMB is the process's resident memory, in MiB.
func residentMB(b testing.TB) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}
