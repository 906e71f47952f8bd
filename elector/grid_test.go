package elector_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

// TestRenewalsOverOneStoreAlign checks that the renewals of many Electors
// over one Store (the claims of one process) go out on the same instants,
// whatever the Electors' identities and through whichever Locker over that
// Store, so that a backend sharing a connection between them can send them
// together; each still goes out at most RenewPeriod, and at least half of it,
// after the send time its deadline counts from. An Elector over another Store
// (another process) renews on other instants.
func TestRenewalsOverOneStoreAlign(t *testing.T) {
	const (
		n       = 5
		renewed = 4 // renewals watched per Elector
		// step is how far the clock moves at a time. A timer fires at its
		// instant, but the Elector reads the clock for the send time when
		// its goroutine runs, which can be as late as the end of the step.
		step    = 5 * time.Millisecond
		stagger = 37 * time.Millisecond // between two Electors' acquisitions
	)
	grid := time.Duration(0.15 * float64(renewPeriod)) // the default Jitter
	clk := clocktest.New(t0)
	ctx := barrier(t)
	// lockerOver returns a Locker over s that hides the claim watch (the
	// memstore's arms timers of its own on the clock).
	lockerOver := func(s backends.Store) backends.Locker {
		sl, err := backends.NewLocker(s)
		if err != nil {
			t.Fatal(err)
		}
		return electortest.Wrap(sl)
	}
	newStore := func() *memstore.Store {
		s := memstore.New(memstore.WithClock(clk))
		t.Cleanup(func() { s.Close() })
		return s
	}
	storeA := newStore()
	lockersA := []backends.Locker{lockerOver(storeA), lockerOver(storeA)}
	phaseOf := func(l backends.Locker) time.Duration {
		cfg := baseConfig(clk, "probe")
		cfg.DisableJitter = false
		e, err := elector.New(l, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return e.GridPhase()
	}
	// near tells whether two phases are within a step of each other.
	near := func(a, b time.Duration) bool {
		d := ((a-b)%grid + grid) % grid
		return d <= step || grid-d <= step
	}
	// The other process's Store: one whose grid is clearly apart (phases
	// are drawn at random, and may fall close by chance).
	var lockerB backends.Locker
	for range 100 {
		l := lockerOver(newStore())
		if d := ((phaseOf(l)-phaseOf(lockersA[0]))%grid + grid) % grid; d > 4*step && grid-d > 4*step {
			lockerB = l
			break
		}
	}
	if lockerB == nil {
		t.Error("no store with a grid apart from the first's in 100 tries: the grid does not follow the store")
		lockerB = lockerOver(newStore())
	}

	type member struct {
		id string
		o  *electortest.Recorder
	}
	var ms []member
	for i := range n + 1 {
		id, l := fmt.Sprintf("claim-%d", i), lockersA[i%2] // each claim's Elector named on its own
		if i == n {
			id, l = "process-b", lockerB
		}
		cfg, _, o, _ := loggedConfig(t, clk, id)
		cfg.Key = fmt.Sprintf("claims/%d", i)
		cfg.DisableJitter = false
		startElector(t, l, cfg)
		o.Await(t, ctx, electortest.Won, 1)
		ms = append(ms, member{id, o})
		if err := clk.BlockUntil(ctx, 2*len(ms)); err != nil { // each leader's deadline and renew timers
			t.Fatal(err)
		}
		clk.Add(stagger)
	}
	for {
		done := true
		for _, m := range ms {
			done = done && m.o.Count(electortest.Renewed) >= renewed
		}
		if done {
			break
		}
		if err := clk.BlockUntil(ctx, 2*len(ms)); err != nil {
			t.Fatal(err)
		}
		clk.Add(step)
	}

	// sends are the send times of a member's acquisition and renewals,
	// from the deadlines they gave.
	sends := func(m member) []time.Time {
		var ts []time.Time
		for _, ev := range append(m.o.All(electortest.Won), m.o.All(electortest.Renewed)...) {
			ts = append(ts, ev.Term.Deadline.Add(-(ttl - margin)))
		}
		return ts
	}
	phase := func(at time.Time) time.Duration { return at.Sub(t0) % grid }
	var want time.Duration
	for i, m := range ms {
		ts := sends(m)
		for j := 1; j < len(ts); j++ {
			if gap := ts[j].Sub(ts[j-1]); gap > renewPeriod+step || gap < renewPeriod/2 {
				t.Errorf("%s, claim %d: renewal %d went out %v after the previous send, want within [%v, %v] (and a step)", m.id, i, j, gap, renewPeriod/2, renewPeriod)
			}
			switch {
			case i == 0 && j == 1:
				want = phase(ts[j])
			case i < n && !near(phase(ts[j]), want):
				t.Errorf("%s: renewal %d went out at phase %v of the grid, want %v like the other claims over its store", m.id, j, phase(ts[j]), want)
			case i == n && near(phase(ts[j]), want):
				t.Errorf("%s: renewal %d went out on the grid of the other store (phase %v)", m.id, j, want)
			}
		}
	}
}
