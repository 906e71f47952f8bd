package failuremodes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// TestFM28ClockJumps checks FM-28, clock jumps forward and backward. The
// elector's deadline is on the monotonic clock; which judges of expiry are
// immune depends on the backend.
//
// Trigger: the clock of a holder, or of the host that judges expiry, jumps.
//
// A naive elector: expiry written as wall time and judged by wall time moves
// with every jump.
//
// Tenure: the elector's deadline is on the monotonic clock: readings of the
// default clock carry Go's monotonic component, so a step of the wall clock
// moves no deadline, and a forward jump of the holder's own clock can only
// end its term early (IsLeader turns false at once; the renewal answered
// after the jump extends nothing). Judges of expiry, as each backend declares
// in Capabilities.ExpiryJudge: filestore uses the boot id and CLOCK_MONOTONIC
// and never the wall clock; kube judges by this process's own observation on
// its monotonic clock; etcd's server judges its leases; memstore's judge is
// its injected clock, documented as process-local: a jump of that clock
// expires entries for every user of the store alike, and the default clock's
// readings are monotonic.
func TestFM28ClockJumps(t *testing.T) {
	t.Run("tenure: the holder's clock jumps forward", func(t *testing.T) {
		// A forward jump of the holder's clock can only end its term
		// early: IsLeader is false the moment the clock reads past the
		// deadline, and a renewal answered after that extends nothing.
		w := newWorld(t)
		clk := newWallClock(w.clk, 0)
		a := w.newNode("a", withConfig(func(c *elector.Config) { c.Clock = clk })).start()
		first := a.await(electortest.Elected, 1).Term
		b := w.newNode("b").start()
		b.await(electortest.Lost, 1)
		w.step(leaderTimers+followerTimers, time.Second)
		clk.stepBy(time.Hour)
		if a.IsLeader() {
			t.Fatal("after its clock jumped an hour: IsLeader = true")
		}
		w.step(leaderTimers+followerTimers, renewPeriod-time.Second) // a's renewal, answered "an hour late"
		if ev := a.await(electortest.Demoted, 1); ev.Cause.Reason != elector.ReasonExpired {
			t.Errorf("a's term ended with %v, want expired", ev.Cause)
		}
		// a released its claim and campaigned again at once: a new term,
		// with a new token, timed on its clock as it now reads.
		if second := a.await(electortest.Elected, 2).Term; second.Token <= first.Token {
			t.Errorf("a's new term has token %d, the first had %d", second.Token, first.Token)
		}
		onlyLeader(t, w, "a", a, b)
	})
	t.Run("tenure: readings are monotonic", func(t *testing.T) {
		// With the real clock (Config.Clock's default), readings carry a
		// monotonic component that Sub, Before and After use: a step of
		// the wall clock, backward or forward, moves no deadline.
		now := clock.New().Now()
		if !strings.Contains(now.String(), " m=") {
			t.Fatalf("clock.New().Now() = %v: no monotonic reading", now)
		}
		if later := now.Add(time.Second); later.Sub(now) != time.Second || !strings.Contains(later.String(), " m=") {
			t.Errorf("a deadline computed from a reading lost its monotonic component: %v", later)
		}
	})
	t.Run("judges of expiry", func(t *testing.T) {
		clk := clocktest.New(time.Time{})
		mem := memstore.New(memstore.WithClock(clk))
		defer mem.Close()
		host, err := filestore.Open(context.Background(), t.TempDir()) // the host's own judge
		if err != nil {
			t.Fatal(err)
		}
		defer host.Close()
		tests := []struct {
			store backends.Store
			judge string
			scope backends.Scope
		}{
			{mem, "injected clock", backends.ScopeProcess},
			{host, "CLOCK_MONOTONIC", backends.ScopeHost},
		}
		for _, tt := range tests {
			c := tt.store.Capabilities()
			if !strings.Contains(c.ExpiryJudge, tt.judge) || c.Scope != tt.scope {
				t.Errorf("%T: judge %q, scope %v; want %q within %v", tt.store, c.ExpiryJudge, c.Scope, tt.judge, tt.scope)
			}
		}
		// filestore's judge counts CLOCK_MONOTONIC, not the wall clock: the
		// remaining time of a fresh entry is its TTL, whatever the time of
		// day reads.
		e, err := host.CreateIfAbsent(t.Context(), "k", []byte("v"), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if e.Remaining <= 59*time.Minute || e.Remaining > time.Hour {
			t.Errorf("filestore entry's remaining time %v, want about an hour", e.Remaining)
		}
		// memstore's judge is its injected clock: process-local by
		// contract. A jump of that clock expires entries, for every user of
		// the store alike; with the default clock its readings are
		// monotonic (above).
		if _, err := mem.CreateIfAbsent(t.Context(), "k", []byte("v"), time.Hour); err != nil {
			t.Fatal(err)
		}
		clk.Add(2 * time.Hour)
		if _, err := mem.Get(t.Context(), "k"); err == nil {
			t.Error("memstore entry outlived a jump of its clock past its expiry")
		}
	})
	t.Run("naive: a follower's wall clock jumps forward", func(t *testing.T) {
		w := newWorld(t)
		na := w.newNaive("a", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		na.Start(w.ctx) // renews at 3s, 6s, ...
		w.awaitRec("a", na.rec, electortest.Acquired, 1)
		w.clk.Add(time.Second / 2)
		wall := newWallClock(w.clk, 0)
		nb := w.newNaive("b", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: wall})
		nb.Start(w.ctx) // ticks at 0.5s, 3.5s, ...
		w.awaitRec("b", nb.rec, electortest.Lost, 1)
		w.clk.Add(5 * time.Second / 2) // 3s
		w.awaitRec("a", na.rec, electortest.Renewed, 1)
		wall.stepBy(time.Hour)
		w.clk.Add(time.Second / 2) // 3.5s
		w.awaitRec("b", nb.rec, electortest.Acquired, 1)
		if got := leaders(na, nb); len(got) != 2 {
			t.Fatalf("naive: leaders = %v, want the failure mode [a b]", got)
		}
	})
}

// TestFM29ClockRateSkew checks FM-29, clock rate skew: a holder whose clock
// runs slow against the judge of expiry stops before the expiry as long as
// the drift over one TTL is within SafetyMargin (100ms of 10s: 1%). Its term
// ends CancelLead (another 1%) before its deadline, so the overlap shows from
// a drift beyond both.
//
// Trigger: a holder's clock runs slower than the clock that judges expiry.
//
// A naive elector: with no margin, a slow holder's deadline falls after the
// backend's expiry: overlap.
//
// Tenure: the local deadline is TTL minus SafetyMargin after the send time; a
// rate skew whose drift over one TTL stays within the margin never overlaps.
// The term ends CancelLead earlier still, which hides a little more drift but
// eats the time kept for a late timer; a skew beyond both overlaps, which the
// test also shows: the margin must be configured for the clocks in use.
func TestFM29ClockRateSkew(t *testing.T) {
	tests := []struct {
		name    string
		rate    float64 // of a's clock against the store's
		overlap bool
	}{
		{"0.9% slow, within the margin", 0.991, false},
		{"3% slow, beyond the margin and the lead", 0.97, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			a := w.newNode("a", withConfig(func(c *elector.Config) { c.Clock = w.clk.Skewed(tt.rate) })).start()
			a.await(electortest.Elected, 1)
			b := w.newNode("b").start()
			b.await(electortest.Lost, 1) // b tries next at 10.001s of the store's time
			w.step(leaderTimers+followerTimers, time.Second)
			a.f.Partition(faults.PartitionFail) // a renews no more
			for w.elapsed() < ttl-margin-cancelLead {
				w.step(leaderTimers+followerTimers, 100*time.Millisecond)
				onlyLeader(t, w, "a", a, b)
			}
			var overlap time.Duration
			w.advance(ttl+150*time.Millisecond-w.elapsed(), time.Millisecond, func() {
				if len(leaders(a, b)) > 1 {
					overlap += time.Millisecond
				}
			})
			b.await(electortest.Elected, 1)
			if (overlap > 0) != tt.overlap {
				t.Errorf("a's clock at rate %v: overlap %v, want overlap = %v", tt.rate, overlap, tt.overlap)
			}
			if overlap > 0 {
				t.Logf("rate %v: both led for %v (the margin must cover the skew)", tt.rate, overlap)
			}
		})
	}
}
