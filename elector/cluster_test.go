package elector_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/lifecycle"
)

// cluster is three electors over one memstore, each through its own
// fault-injecting Locker, checking after every clock step and inside every
// callback that at most one of them reports IsLeader.
type cluster struct {
	t    *testing.T
	clk  *clocktest.Clock
	els  []*elector.Elector
	fls  []*electortest.Locker
	recs []*electortest.Recorder
	down []bool // stopped or crashed: arms no timers we wait for
}

func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	clk := clocktest.New(t0)
	store := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { store.Close() })
	sl, err := backends.NewLocker(store)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, clk: clk, down: make([]bool, n)}
	for i := range n {
		fl := electortest.Wrap(sl)
		rec := electortest.NewRecorder(t, nil)
		rec.SetCheck(c.checkOne)
		cfg := baseConfig(clk, fmt.Sprintf("node-%d", i))
		rec.InstallCallbacks(&cfg)
		c.fls = append(c.fls, fl)
		c.recs = append(c.recs, rec)
		e, err := elector.New(fl.Watching(electortest.WatchPass), cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.els = append(c.els, e)
	}
	// Start only once c.els is complete: callbacks read it.
	for i, e := range c.els {
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stopAndWait(t, e) })
		t.Cleanup(c.fls[i].Uncrash) // runs first: lets a crashed elector stop
	}
	return c
}

// leaders returns how many electors report IsLeader, and the last of them.
func (c *cluster) leaders() (n, who int) {
	who = -1
	for i, e := range c.els {
		if e.IsLeader() {
			n, who = n+1, i
		}
	}
	return n, who
}

func (c *cluster) checkOne(where string) {
	if n, _ := c.leaders(); n > 1 {
		c.t.Errorf("%s at %v: %d electors report IsLeader", where, c.clk.Now().Sub(t0), n)
	}
}

// quiesce waits until every live elector has armed the timers of its
// state: a leader its deadline and renew (or retry) timers, a follower its
// retry timer. The count is recomputed while waiting, as states change.
func (c *cluster) quiesce(ctx context.Context) {
	c.t.Helper()
	for {
		want := c.atRest()
		err := electortest.UntilOrArmed(ctx, c.clk, want, "a change of state", func() bool { return c.atRest() != want }, c.sources()...)
		if err != nil {
			c.t.Fatalf("timers never armed: %d waiters, want %d: %v", c.clk.Waiters(), want, err)
		}
		if c.clk.Waiters() >= c.atRest() {
			return
		}
	}
}

// atRest is how many timers the live electors arm at rest in their states.
func (c *cluster) atRest() int {
	want := 0
	for i, e := range c.els {
		if c.down[i] {
			continue
		}
		switch e.State() {
		case lifecycle.Leader:
			want += 2
		case lifecycle.Follower:
			want++
		}
	}
	return want
}

// sources are the recorders: a change of state or leader is reported to
// one of them.
func (c *cluster) sources() []electortest.Source {
	var out []electortest.Source
	for _, r := range c.recs {
		out = append(out, r)
	}
	return out
}

// stepUntil advances the clock in steps of d until cond holds, checking the
// invariant after every step, for at most limit of clock time. It returns
// the clock time it took.
func (c *cluster) stepUntil(ctx context.Context, d, limit time.Duration, what string, cond func() bool) time.Duration {
	c.t.Helper()
	start := c.clk.Now()
	for !cond() {
		if c.clk.Now().Sub(start) >= limit {
			c.t.Fatalf("no %s within %v", what, limit)
		}
		c.quiesce(ctx)
		c.clk.Add(d)
		c.checkOne("after a step")
	}
	return c.clk.Now().Sub(start)
}

func TestThreeElectors(t *testing.T) {
	for _, mode := range []string{"stopped", "crashed", "partitioned"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := barrier(t)
			c := newCluster(t, 3)
			const step = 100 * time.Millisecond
			c.stepUntil(ctx, step, ttl, "first leader", func() bool { n, _ := c.leaders(); return n == 1 })
			_, old := c.leaders()
			// Let the term run through a few renewals first.
			c.stepUntil(ctx, step, 2*renewPeriod+step, "renewals", func() bool {
				return c.clk.Now().Sub(t0) >= 2*renewPeriod
			})
			if n, who := c.leaders(); n != 1 || who != old {
				t.Fatalf("leader changed without a fault: %d leaders, %d (was %d)", n, who, old)
			}
			lastRenewal, _ := c.els[old].Term()
			renewedAt := lastRenewal.Deadline.Add(-(ttl - margin))

			next := func() bool { n, who := c.leaders(); return n == 1 && who != old }
			switch mode {
			case "stopped":
				before := c.clk.Now()
				if err := c.els[old].Stop(ctx); err != nil {
					t.Fatalf("Stop: %v", err)
				}
				c.down[old] = true
				// A watching follower takes the released claim with no
				// clock movement at all.
				eventually(t, ctx, "a new leader after Stop", func() bool { c.checkOne("handover"); return next() }, c.sources()...)
				if now := c.clk.Now(); !now.Equal(before) {
					t.Errorf("handover took %v of clock time, want none", now.Sub(before))
				}
			case "crashed":
				c.fls[old].Crash()
				c.down[old] = true
				c.stepUntil(ctx, step, 2*ttl, "new leader after the crash", next)
				// The claim expires TTL after the last renewal; followers
				// time their attempts to that expiry.
				if took := c.clk.Now().Sub(renewedAt); took > ttl+step {
					t.Errorf("failover %v after the last renewal, want at most TTL + one step (%v)", took, ttl+step)
				}
			case "partitioned":
				c.fls[old].Partition(true)
				c.stepUntil(ctx, step, 2*ttl, "new leader after the partition", next)
				if took := c.clk.Now().Sub(renewedAt); took > ttl+step {
					t.Errorf("failover %v after the last renewal, want at most TTL + one step (%v)", took, ttl+step)
				}
				cause := c.recs[old].WaitDemoted(t, ctx, 1)
				if cause.Reason != elector.ReasonExpired {
					t.Errorf("partitioned leader demoted with %v, want ReasonExpired", cause)
				}
				// No zombie standby: it keeps campaigning while cut off, and
				// follows the new leader once healed.
				tries := c.fls[old].Count(electortest.Acquire)
				c.stepUntil(ctx, step, 10*retryPeriod, "attempts while partitioned", func() bool {
					return c.fls[old].Count(electortest.Acquire) > tries
				})
				c.fls[old].Partition(false)
				_, nw := c.leaders()
				c.stepUntil(ctx, step, ttl, "the healed node following", func() bool {
					ld, ok := c.els[old].Leader()
					return ok && ld.Holder == c.els[nw].Holder()
				})
			}
			// The new leader keeps leading through renewals.
			_, nw := c.leaders()
			start := c.clk.Now()
			c.stepUntil(ctx, step, 2*ttl, "a stable new leader", func() bool { return c.clk.Now().Sub(start) >= ttl+renewPeriod })
			if n, who := c.leaders(); n != 1 || who != nw {
				t.Errorf("after %v: %d leaders (%d), want %d alone", ttl+renewPeriod, n, who, nw)
			}
		})
	}
}
