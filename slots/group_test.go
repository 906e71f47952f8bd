package slots_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/slots"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// storeCase opens a fresh store whose expiry is judged by clk.
type storeCase struct {
	name string
	open func(t *testing.T, clk *clocktest.Clock) backends.Store
}

var stores = []storeCase{
	{"memstore", func(t *testing.T, clk *clocktest.Clock) backends.Store {
		s := memstore.New(memstore.WithClock(clk))
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"filestore", func(t *testing.T, clk *clocktest.Clock) backends.Store {
		s, err := filestore.Open(context.Background(), t.TempDir(), filestore.WithClock("boot-1", clk))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
}

func eachStore(t *testing.T, f func(t *testing.T, clk *clocktest.Clock, s backends.Store)) {
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			clk := clocktest.New(time.Time{})
			f(t, clk, sc.open(t, clk))
		})
	}
}

func holder(t *testing.T, id string) backends.Holder {
	t.Helper()
	h, err := backends.NewHolder(id)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func newGroup(t *testing.T, s backends.Store, n int) *slots.Group {
	t.Helper()
	g, err := slots.New(s, slots.Config{Size: n})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestNewValidates(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	for _, n := range []int{0, -1, slots.MaxSize + 1} {
		if _, err := slots.New(s, slots.Config{Size: n}); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("New(size %d) = %v, want ErrInvalid", n, err)
		}
	}
	if _, err := slots.New(nil, slots.Config{Size: 1}); err == nil {
		t.Error("New over a nil store succeeded")
	}
}

func TestAcquireFillsSlotsThenRefuses(t *testing.T) {
	eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
		ctx := context.Background()
		g := newGroup(t, s, 3)
		seen := map[int]bool{}
		for i := range 3 {
			l, err := g.TryAcquire(ctx, "grp", holder(t, fmt.Sprint("h", i)), time.Second)
			if err != nil {
				t.Fatalf("acquire %d: %v", i, err)
			}
			if l.Slot < 0 || l.Slot >= 3 || seen[l.Slot] {
				t.Fatalf("acquire %d got slot %d; slots so far %v", i, l.Slot, seen)
			}
			seen[l.Slot] = true
		}
		_, err := g.TryAcquire(ctx, "grp", holder(t, "late"), time.Second)
		var he *backends.HeldError
		if !errors.As(err, &he) || len(he.Holders) != 3 {
			t.Fatalf("fourth acquire = %v, want HeldError with 3 holders", err)
		}
		hs, err := g.Holders(ctx, "grp")
		if err != nil || len(hs) != 3 {
			t.Fatalf("Holders = %v, %v; want 3", hs, err)
		}
		for i, h := range hs {
			if h.Slot != i || h.Token <= 0 || h.Remaining <= 0 || h.Remaining > time.Second {
				t.Errorf("holder %d = %+v: want slot %d, a token and 0 < remaining <= 1s", i, h, i)
			}
		}
	})
}

func TestOneSlotPerHolder(t *testing.T) {
	eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
		ctx := context.Background()
		g := newGroup(t, s, 3)
		h := holder(t, "same")
		if _, err := g.TryAcquire(ctx, "grp", h, time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := g.TryAcquire(ctx, "grp", h, time.Second); !errors.Is(err, backends.ErrHeld) {
			t.Fatalf("second acquire by the same holder = %v, want ErrHeld", err)
		}
		// The same identity in another instance is another holder.
		if _, err := g.TryAcquire(ctx, "grp", holder(t, "same"), time.Second); err != nil {
			t.Fatalf("acquire by a second instance of the same identity: %v", err)
		}
	})
}

func TestRenewReleaseAndTokens(t *testing.T) {
	eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
		ctx := context.Background()
		g := newGroup(t, s, 1)
		a, b := holder(t, "a"), holder(t, "b")
		la, err := g.TryAcquire(ctx, "grp", a, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		clk.Add(700 * time.Millisecond)
		if la, err = g.Renew(ctx, la); err != nil {
			t.Fatalf("renew: %v", err)
		}
		clk.Add(700 * time.Millisecond) // past the first TTL, within the renewed one
		if _, err := g.TryAcquire(ctx, "grp", b, time.Second); !errors.Is(err, backends.ErrHeld) {
			t.Fatalf("acquire of a renewed slot = %v, want ErrHeld", err)
		}
		if err := g.Release(ctx, la); err != nil {
			t.Fatalf("release: %v", err)
		}
		lb, err := g.TryAcquire(ctx, "grp", b, time.Second)
		if err != nil {
			t.Fatalf("acquire after release: %v", err)
		}
		if lb.Token <= la.Token {
			t.Errorf("token after release %d, before %d: want strictly greater", lb.Token, la.Token)
		}
		if _, err := g.Renew(ctx, la); backends.Classify(err) != backends.ClassLost {
			t.Errorf("renew of a released lease = %v, want class lost", err)
		}
		if err := g.Release(ctx, la); !errors.Is(err, backends.ErrNotHolder) {
			t.Errorf("release of a lease another holder took = %v, want ErrNotHolder", err)
		}
		clk.Add(2 * time.Second) // lb expires
		if err := g.Release(ctx, lb); err != nil {
			t.Errorf("release of an expired lease = %v, want nil", err)
		}
		lc, err := g.TryAcquire(ctx, "grp", a, time.Second)
		if err != nil || lc.Token <= lb.Token {
			t.Errorf("acquire after expiry = %+v, %v; want a token above %d", lc, err, lb.Token)
		}
	})
}

func TestResize(t *testing.T) {
	eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
		ctx := context.Background()
		g := newGroup(t, s, 3)
		var leases []backends.Claim
		for i := range 3 {
			l, err := g.TryAcquire(ctx, "grp", holder(t, fmt.Sprint("h", i)), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, l)
		}
		// A process configured with another size agrees with the store.
		other := newGroup(t, s, 5)
		if n, err := other.Size(ctx, "grp"); err != nil || n != 3 {
			t.Fatalf("Size through a group configured with 5 = %d, %v; want 3", n, err)
		}
		if err := g.Resize(ctx, "grp", 1); err != nil {
			t.Fatal(err)
		}
		for _, l := range leases {
			_, err := g.Renew(ctx, l)
			if l.Slot == 0 && err != nil {
				t.Errorf("renew of slot 0 after shrinking to 1: %v", err)
			}
			if l.Slot > 0 && !errors.Is(err, backends.ErrNotHolder) {
				t.Errorf("renew of slot %d after shrinking to 1 = %v, want ErrNotHolder", l.Slot, err)
			}
			if l.Slot > 0 {
				if err := g.Release(ctx, l); err != nil {
					t.Errorf("release of retired slot %d: %v", l.Slot, err)
				}
			}
		}
		if _, err := g.TryAcquire(ctx, "grp", holder(t, "new"), time.Second); !errors.Is(err, backends.ErrHeld) {
			t.Errorf("acquire after shrinking to 1 with slot 0 held = %v, want ErrHeld", err)
		}
		if err := g.Resize(ctx, "grp", 2); err != nil {
			t.Fatal(err)
		}
		if l, err := g.TryAcquire(ctx, "grp", holder(t, "new"), time.Second); err != nil || l.Slot != 1 {
			t.Errorf("acquire after growing to 2 = %+v, %v; want slot 1", l, err)
		}
		if err := g.Resize(ctx, "grp", 0); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("Resize(0) = %v, want ErrInvalid", err)
		}
	})
}

// TestAtMostN races many holders over a group and checks, from a concurrent
// observer and from the holders' own bookkeeping, that never more than N
// hold a slot.
func TestAtMostN(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprint("N=", n), func(t *testing.T) {
			eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
				ctx := context.Background()
				g := newGroup(t, s, n)
				const workers, rounds = 50, 6
				var holding, maxHolding atomic.Int64
				var wg sync.WaitGroup
				for w := range workers {
					wg.Go(func() {
						h := holder(t, fmt.Sprint("w", w))
						for range rounds {
							l, err := g.TryAcquire(ctx, "grp", h, time.Minute)
							if errors.Is(err, backends.ErrHeld) {
								continue
							}
							if err != nil {
								t.Errorf("acquire: %v", err)
								return
							}
							now := holding.Add(1)
							for {
								m := maxHolding.Load()
								if now <= m || maxHolding.CompareAndSwap(m, now) {
									break
								}
							}
							if hs, err := g.Holders(ctx, "grp"); err != nil || len(hs) > n {
								t.Errorf("Holders while holding = %d, %v; want at most %d", len(hs), err, n)
							}
							if _, err := g.Renew(ctx, l); err != nil {
								t.Errorf("renew: %v", err)
							}
							holding.Add(-1)
							if err := g.Release(ctx, l); err != nil {
								t.Errorf("release: %v", err)
							}
						}
					})
				}
				wg.Wait()
				if got := maxHolding.Load(); got > int64(n) || got == 0 {
					t.Errorf("at most %d holders at once, want 1..%d", got, n)
				}
			})
		})
	}
}

func TestWatchSignalsFreedSlot(t *testing.T) {
	eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
		// The timeout only bounds a failing run; a passing one is signalled.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		g := newGroup(t, s, 1)
		l, err := g.TryAcquire(ctx, "grp", holder(t, "a"), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := g.WatchClaim(ctx, "grp")
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		wantSignal(t, ctx, cancel, ch, "the group's watch of a released slot")
	})
}

// wantSignal waits for a signal on ch, the watch of ctx, then ends the
// watch and waits for ch to close. ctx's deadline only bounds a failing
// run; a passing one is signalled.
func wantSignal(t *testing.T, ctx context.Context, cancel context.CancelFunc, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatalf("%s: closed before signalling", what)
		}
	case <-ctx.Done():
		t.Fatalf("%s: no signal", what)
	}
	cancel()
	for range ch { // the channel closes once the watch ends
	}
}

func TestKeysOfNestedGroupsAreNotHolders(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	g := newGroup(t, s, 2)
	if _, err := g.TryAcquire(ctx, "a/slot-1", holder(t, "nested"), time.Second); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a/slot-01", "a/slot-x", "a/slot-"} {
		if _, err := s.CreateIfAbsent(ctx, k, []byte("not a claim"), 0); err != nil {
			t.Fatal(err)
		}
	}
	hs, err := g.Holders(ctx, "a")
	if err != nil || len(hs) != 0 {
		t.Errorf("Holders(a) = %v, %v; want none (only a nested group's and foreign keys exist)", hs, err)
	}
}
