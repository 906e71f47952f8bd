package elector_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/internal/electortest"
)

// The renewals of many Electors of one Identity (the claims of one process)
// go out on the same instants, so that a backend sharing a connection
// between them can send them together; each still goes out at most
// RenewPeriod, and at least half of it, after the send time its deadline
// counts from. Electors of another Identity renew on other instants.
func TestRenewalsOfOneIdentityAlign(t *testing.T) {
	const (
		n       = 5
		renewed = 4 // renewals watched per Elector
		// step is how far the clock moves at a time. A timer fires at its
		// instant, but the Elector reads the clock for the send time when
		// its goroutine runs, which can be as late as the end of the step.
		step    = 5 * time.Millisecond
		stagger = 37 * time.Millisecond // between two Electors' acquisitions
	)
	clk := clocktest.New(t0)
	ctx := barrier(t)
	l := newLocker(t, clk, "memstore")
	type member struct {
		id string
		o  *electortest.Recorder
	}
	var ms []member
	for i := range n + 1 {
		id := "process-a"
		if i == n {
			id = "process-b"
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
	grid := time.Duration(0.15 * float64(renewPeriod)) // the default Jitter
	phase := func(at time.Time) time.Duration { return at.Sub(t0) % grid }
	// near tells whether two phases are within a step of each other.
	near := func(a, b time.Duration) bool {
		d := (a - b + grid) % grid
		return d <= step || grid-d <= step
	}
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
				t.Errorf("%s, claim %d: renewal %d went out at phase %v of the grid, want %v like the others of its identity", m.id, i, j, phase(ts[j]), want)
			case i == n && near(phase(ts[j]), want):
				t.Errorf("%s: renewal %d went out on the grid of process-a (phase %v)", m.id, j, want)
			}
		}
	}
}
