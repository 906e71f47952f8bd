package shards_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/lifecycle"
	"github.com/tenure-go/tenure/shards"
)

// breakable is a store whose watches the test can end, as a store ends a
// watch whose consumer fell behind.
type breakable struct {
	backends.Store
	sig    *electortest.Signal // notified at each watch opened
	opened atomic.Int32        // watches opened

	mu      sync.Mutex
	cancels []context.CancelFunc // guarded by mu
}

func (s *breakable) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	ctx, cancel := context.WithCancel(ctx)
	ch, err := s.Store.(backends.Watcher).Watch(ctx, prefix)
	if err != nil {
		cancel()
		return nil, err
	}
	s.mu.Lock()
	s.cancels = append(s.cancels, cancel)
	s.mu.Unlock()
	s.opened.Add(1)
	s.sig.Notify()
	return ch, nil
}

func (s *breakable) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	return s.Store.(backends.Txner).Txn(ctx, conds, ops)
}

// breakAll ends every watch open now.
func (s *breakable) breakAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.cancels {
		c()
	}
	s.cancels = nil
}

// TestWatchBreakKeepsClaimWatches checks that when the store ends a
// member's group watch and the member reopens it at once, its followers
// still hear of a release: a shard released after the break is taken at
// once, with the clock standing still. Ending their claim watches with the
// group watch left each follower waiting for its holder's expiry, a TTL
// away, before it looked again.
func TestWatchBreakKeepsClaimWatches(t *testing.T) {
	clk := clocktest.New(t0)
	store := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { store.Close() })
	const count = 8
	release := make(chan struct{})
	var sig electortest.Signal
	start := func(id string, s backends.Store, lost *atomic.Int32, onAcquired func(ctx context.Context, shard int, term elector.Term)) *shards.Member {
		cfg := shards.Config{Group: "g", Identity: id, Count: count, Elector: timing(clk), OnAcquired: onAcquired}
		cfg.Elector.Trace.StateChanged = func(from, to lifecycle.State) { sig.Notify() }
		cfg.Elector.Trace.ElectionLost = func(backends.Class, time.Duration) {
			lost.Add(1)
			sig.Notify()
		}
		m, err := shards.New(s, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stopped := make(chan error, 1)
			go func() { stopped <- m.Stop(ctx) }()
			for {
				select {
				case err := <-stopped:
					if err != nil {
						t.Errorf("stop %s: %v", id, err)
					}
					return
				case <-time.After(10 * time.Millisecond): // the fake clock bounds the releases: move it
					clk.Add(testStep)
				}
			}
		})
		return m
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// a drains a shard only once release is closed.
	var aLost, bLost atomic.Int32
	a := start("a", store, &aLost, func(ctx context.Context, shard int, term elector.Term) {
		sig.Notify()
		<-ctx.Done()
		<-release
	})
	if err := electortest.Until(ctx, "a owns every shard", func() bool { return len(a.Owned()) == count }, &sig); err != nil {
		t.Fatal(err)
	}
	bs := &breakable{Store: store, sig: &sig}
	b := start("b", bs, &bLost, func(ctx context.Context, shard int, term elector.Term) {
		sig.Notify()
		<-ctx.Done()
	})
	mine := 0
	for _, id := range shards.Place(count, []string{"a", "b"}) {
		if id == "b" {
			mine++
		}
	}
	// b's electors find their shards held by a, which is draining, and
	// wait for the release.
	if err := electortest.Until(ctx, "b's followers find their shards held", func() bool { return bLost.Load() >= int32(mine) }, &sig); err != nil {
		t.Fatal(err)
	}
	bs.breakAll()
	// Whatever the break did to their claim watches, b's followers try
	// again and find their shards still held.
	if err := electortest.Until(ctx, "b's group watch reopened and its followers tried again", func() bool {
		return bs.opened.Load() >= 2 && bLost.Load() >= int32(2*mine)
	}, &sig); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := electortest.Until(ctx, "b owns its shards, the clock standing still", func() bool { return len(b.Owned()) == mine }, &sig); err != nil {
		t.Fatalf("%v: b owns %v, a owns %v", err, b.Owned(), a.Owned())
	}
}

// endingWatches is a store whose every watch ends as soon as it opens.
type endingWatches struct {
	backends.Store
	opened atomic.Int32
}

func (s *endingWatches) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	ctx, cancel := context.WithCancel(ctx)
	ch, err := s.Store.(backends.Watcher).Watch(ctx, prefix)
	if err != nil {
		cancel()
		return nil, err
	}
	s.opened.Add(1)
	cancel() // the inner watch closes its channel
	return ch, nil
}

func (s *endingWatches) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	return s.Store.(backends.Txner).Txn(ctx, conds, ops)
}

// TestEndingWatchesNoSpin checks that a member whose store ends every watch
// at once reopens it at most every TTL/6 (the mends) or at the read
// backoff's pace, not in a loop: over four TTLs it opens at most 4×6
// and a few (the first open, the step the last one falls in).
func TestEndingWatchesNoSpin(t *testing.T) {
	c := newCluster(t, 4)
	var ws []*endingWatches
	c.wrap = func(inner backends.Store) backends.Store {
		w := &endingWatches{Store: inner}
		ws = append(ws, w)
		return w
	}
	c.add("a")
	start := c.clk.Now()
	c.stepUntil("four TTLs", 5*testTTL, func() bool { return c.clk.Now().Sub(start) >= 4*testTTL })
	t.Logf("%d watches opened in four TTLs", ws[0].opened.Load())
	if got, most := ws[0].opened.Load(), int32(4*6+4); got > most {
		t.Errorf("a member whose watches end at once opened %d watches in four TTLs, want at most %d", got, most)
	}
}
