package crashtest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/crashtest"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
	"github.com/tenure-go/tenure/shards"
)

// TestCrashedMemberShardsAreTakenAfterTTL checks the same for a shard
// member: crashed through the wrapper, it releases nothing; each of its
// shards' terms ends by its own deadline (OnReleased with ReasonExpired),
// and the other member takes each shard only once the store has let the
// crashed member's claim on it expire.
func TestCrashedMemberShardsAreTakenAfterTTL(t *testing.T) {
	const (
		count = 4
		ttl   = 3 * time.Second
		step  = 100 * time.Millisecond
	)
	clk := clocktest.New(t0)
	ctx := barrier(t)
	ms := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { ms.Close() })
	counted := faults.Wrap(ms, clk)
	crashing := crashtest.Wrap(counted)

	var (
		sig      electortest.Signal
		mu       sync.Mutex
		released = map[int]elector.Cause{} // guarded by mu; a's shards
	)
	start := func(s backends.Store, id string) *shards.Member {
		cfg := shards.Config{
			Group: "g", Identity: id, Count: count,
			Elector: elector.Config{TTL: ttl, RenewPeriod: time.Second, RetryPeriod: 250 * time.Millisecond,
				DisableJitter: true, Clock: clk},
			OnAcquired: func(ctx context.Context, shard int, term elector.Term) {
				sig.Notify()
				<-ctx.Done()
			},
			OnReleased: func(shard int, term elector.Term, cause elector.Cause) {
				if id == "a" {
					mu.Lock()
					released[shard] = cause
					mu.Unlock()
				}
				sig.Notify()
			},
		}
		m, err := shards.New(s, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		return m
	}
	a := start(crashing, "a")
	b := start(ms, "b")
	t.Cleanup(func() {
		for _, m := range []*shards.Member{a, b} {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			m.Stop(sctx) // a's releases fail: it crashed
			cancel()
			<-m.Done()
		}
	})
	// advance moves the clock one step once the members have armed timers
	// (a weak barrier: the checks below hold at any instant, and the
	// bounds on time are generous).
	advance := func() {
		t.Helper()
		if err := electortest.UntilOrArmed(ctx, clk, 2, "the members' timers", func() bool { return false }); err != nil {
			t.Fatal(err)
		}
		clk.Add(step)
	}
	for len(a.Owned()) != count/2 || len(b.Owned()) != count/2 {
		if clk.Now().Sub(t0) > 10*ttl {
			t.Fatalf("no balanced placement after %v: a owns %v, b owns %v", clk.Now().Sub(t0), a.Owned(), b.Owned())
		}
		advance()
	}

	terms := map[int]elector.Term{}
	for _, shard := range a.Owned() {
		term, ok := a.Term(shard)
		if !ok {
			t.Fatalf("a owns shard %d but has no term", shard)
		}
		terms[shard] = term
	}
	mu.Lock()
	clear(released) // shards handed to b during placement
	mu.Unlock()
	crashing.Crash()
	crashedAt := clk.Now()
	reached := counted.Calls(faults.AllOps)
	for len(b.Owned()) != count {
		now := clk.Now()
		if now.Sub(crashedAt) > 3*ttl {
			t.Fatalf("%v after the crash b owns %v, want every shard", now.Sub(crashedAt), b.Owned())
		}
		for shard, term := range terms {
			expiry := term.Deadline.Add(ttl / 100) // the default margin, TTL/100 but at least 10ms
			if !now.Before(expiry) {
				continue
			}
			if _, ok := b.Term(shard); ok {
				t.Fatalf("at %v b owns shard %d, before a's claim on it expires at %v", now.Sub(t0), shard, expiry.Sub(t0))
			}
			got, err := ms.Get(ctx, fmt.Sprintf("g/shard/%d", shard))
			if err != nil || got.CreateRevision != term.Token {
				t.Fatalf("at %v shard %d's entry is %+v (err %v), want a's token %d until %v",
					now.Sub(t0), shard, got, err, term.Token, expiry.Sub(t0))
			}
		}
		advance()
	}
	t.Logf("b owns every shard %v after the crash (TTL %v)", clk.Now().Sub(crashedAt), ttl)
	if got := counted.Calls(faults.AllOps) - reached; got != 0 {
		t.Errorf("the crashed member made %d calls that reached the store, want none", got)
	}
	electortest.Await(t, ctx, "a's shards released", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for shard := range terms {
			if _, ok := released[shard]; !ok {
				return false
			}
		}
		return true
	}, &sig)
	mu.Lock()
	defer mu.Unlock()
	for shard := range terms {
		if c := released[shard]; c.Reason != elector.ReasonExpired {
			t.Errorf("a's shard %d ended with %v, want %v", shard, c, elector.ReasonExpired)
		}
	}
}
