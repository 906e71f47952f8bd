package allocator

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// pair moves two fake clocks together: the embedded one first.
type pair struct {
	*clocktest.Clock
	other *clocktest.Clock
}

func (p *pair) Add(d time.Duration) {
	p.Clock.Add(d)
	p.other.Add(d)
}

// eventually waits until cond holds, for conditions a background goroutine
// makes true after the fake clock moved.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("never: %s", what)
		}
		runtime.Gosched()
	}
}

// TestRenewAndRestore checks that references are kept alive past their TTL
// while the allocator runs; one that lapsed is written again while its key
// still maps to the same ID, and when the key has moved on the local uses are
// dropped.
func TestRenewAndRestore(t *testing.T) {
	s, storeClk := newMem(t)
	f := faults.Wrap(s, storeClk)
	// The allocator's own clock, so that its only timer is the renewal
	// ticker (the store arms expiry timers on its clock); both move
	// together.
	clk := &pair{clocktest.New(epoch), storeClk}
	cfg := testConfig("a", clk.Clock)
	cfg.TTL = 30 * time.Second // renewed every 10s
	a := newAllocator(t, f, cfg)
	ctx := context.Background()
	id := mustAllocate(t, a, "K")
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := clk.BlockUntil(bctx, 1); err != nil { // the renewal ticker
		t.Fatal(err)
	}
	refs := func() int { return len(dump(t, s, valueDir)) }

	for round := 1; round <= 6; round++ {
		clk.Add(10 * time.Second)
		eventually(t, "a keep-alive per renewal", func() bool { return f.Calls(faults.OpKeepAlive) == round })
	}
	if n := refs(); n != 1 {
		t.Fatalf("after 60s (TTL 30s) with renewals: %d references, want 1", n)
	}

	// The reference vanishes (as if it lapsed): the next renewal restores it.
	ref, err := s.Get(ctx, a.refKey("K"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompareAndDelete(ctx, ref.Key, ref.Revision); err != nil {
		t.Fatal(err)
	}
	clk.Add(10 * time.Second)
	eventually(t, "the reference restored", func() bool { return refs() == 1 })
	if got, err := a.Get(ctx, "K"); err != nil || got != id {
		t.Fatalf("Get(K) after restore = %d, %v; want %d", got, err, id)
	}

	// The reference vanishes and K moves to another ID meanwhile (as
	// garbage collection and another member could have done): the local
	// uses go, and Allocate answers K's current ID.
	ref, err = s.Get(ctx, a.refKey("K"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := s.Get(ctx, a.indexKey("K"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Get(ctx, a.idKey(id))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct {
		key string
		rev int64
	}{{ref.Key, ref.Revision}, {idx.Key, idx.Revision}, {m.Key, m.Revision}} {
		if err := s.CompareAndDelete(ctx, e.key, e.rev); err != nil {
			t.Fatal(err)
		}
	}
	moved := id + 1
	if _, err := s.CreateIfAbsent(ctx, a.idKey(moved), []byte("K"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateIfAbsent(ctx, a.indexKey("K"), encodeIndex(moved, true), 0); err != nil {
		t.Fatal(err)
	}
	clk.Add(10 * time.Second)
	eventually(t, "the local uses dropped", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		u := a.local["K"]
		return u == nil || u.count == 0
	})
	if n := refs(); n != 0 {
		t.Fatalf("%d references after K moved, want 0 (none to the old ID, none written to the new)", n)
	}
	if got := mustAllocate(t, a, "K"); got != moved {
		t.Fatalf("Allocate(K) after it moved = %d, want %d", got, moved)
	}
}
