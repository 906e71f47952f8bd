package failuremodes_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// onlyLeader fails unless exactly want leads among ps.
func onlyLeader(t *testing.T, w *world, want string, ps ...participant) {
	t.Helper()
	if got := leaders(ps...); len(got) != 1 || got[0] != want {
		t.Fatalf("at %v: leaders = %v, want [%s]", w.elapsed(), got, want)
	}
}

// TestFM06ClockOffsetBetweenHolders checks FM-06, clock offset between
// holders: wall clocks that disagree between holders must not let one take a
// live claim from another.
//
// Trigger: the wall clocks of two holders disagree (NTP drift of more than a
// second).
//
// A naive elector: the holder writes its expiry as a wall-clock time and
// others judge it by theirs: a node whose clock runs ahead sees a live lease
// as expired and takes it. Two leaders.
//
// Tenure: no timestamp crosses hosts. The store judges expiry by its own
// clock; each holder counts its deadline on its own monotonic clock from the
// moment it sent the request. Offsets between clocks change nothing.
func TestFM06ClockOffsetBetweenHolders(t *testing.T) {
	// b's clock reads 9s ahead of the store's, a's an hour behind: more
	// than TTL minus RenewPeriod apart.
	t.Run("tenure ignores offsets", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a", withConfig(func(c *elector.Config) { c.Clock = newWallClock(w.clk, -time.Hour) })).start()
		a.await(electortest.Elected, 1)
		w.step(leaderTimers, 2*time.Second)
		b := w.newNode("b", withConfig(func(c *elector.Config) { c.Clock = newWallClock(w.clk, 9*time.Second) })).start()
		b.await(electortest.Lost, 1)
		for range 3 * ttl / time.Second {
			w.step(leaderTimers+followerTimers, time.Second)
			onlyLeader(t, w, "a", a, b)
		}
		if n := b.rec.Count(electortest.Elected); n != 0 {
			t.Errorf("b was elected %d times while a renewed", n)
		}
	})
	t.Run("naive steals with a fast clock", func(t *testing.T) {
		w := newWorld(t)
		na := w.newNaive("a", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		na.Start(w.ctx)
		w.awaitRec("a", na.rec, electortest.Acquired, 1)
		w.clk.Add(2 * time.Second) // a renews at 3s
		nb := w.newNaive("b", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: newWallClock(w.clk, 9*time.Second)})
		nb.Start(w.ctx)
		w.awaitRec("b", nb.rec, electortest.Acquired, 1)
		if got := leaders(na, nb); len(got) != 2 {
			t.Fatalf("naive: leaders = %v, want the failure mode [a b]", got)
		}
	})
}

// TestFM07WallClockStep checks FM-07, wall clock stepped backward: a step of
// a holder's wall clock must not end a valid lease early or let another
// holder in.
//
// Trigger: NTP steps a holder's wall clock back (or forward).
//
// A naive elector: the renew condition compares stored wall-clock expiries
// with a stepped "now": the leader's own renewal fails (false demotion) or a
// follower's acquire succeeds (split brain), depending on the direction.
//
// Tenure: the elector reads no wall clock, and Go's clock readings carry a
// monotonic component that Sub and Before use, so a step of the wall clock
// moves no deadline. Which judges of expiry are immune is FM-28.
func TestFM07WallClockStep(t *testing.T) {
	t.Run("tenure reads no wall clock", func(t *testing.T) {
		// The real clock adapter, the default Config.Clock, returns readings
		// with a monotonic component; Sub, Before and After use it, so a
		// step of the wall clock moves no deadline.
		if now := clock.New().Now(); !strings.Contains(now.String(), " m=") {
			t.Fatalf("clock.New().Now() = %v has no monotonic reading", now)
		}
		w := newWorld(t)
		wall := newWallClock(w.clk, 0) // a's wall clock: read by nothing in tenure
		a := w.newNode("a").start()
		a.await(electortest.Elected, 1)
		w.step(leaderTimers, time.Second/2)
		b := w.newNode("b").start()
		b.await(electortest.Lost, 1)
		w.step(leaderTimers+followerTimers, 3*time.Second/2)
		wall.stepBy(-time.Hour)
		for range 3 * ttl / time.Second {
			w.step(leaderTimers+followerTimers, time.Second)
			onlyLeader(t, w, "a", a, b)
		}
	})
	t.Run("naive: a leader stepped back is robbed", func(t *testing.T) {
		w := newWorld(t)
		wall := newWallClock(w.clk, 0)
		na := w.newNaive("a", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: wall})
		na.Start(w.ctx)
		w.awaitRec("a", na.rec, electortest.Acquired, 1)
		w.clk.Add(time.Second / 2)
		nb := w.newNaive("b", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		nb.Start(w.ctx) // ticks at 0.5s, 3.5s, ...
		w.awaitRec("b", nb.rec, electortest.Lost, 1)
		w.clk.Add(3 * time.Second / 2)
		wall.stepBy(-time.Hour) // at 2s
		w.clk.Add(time.Second)  // 3s: a renews, writing an expiry an hour ago
		w.awaitRec("a", na.rec, electortest.Renewed, 1)
		w.clk.Add(time.Second / 2) // 3.5s: b finds it expired
		w.awaitRec("b", nb.rec, electortest.Acquired, 1)
		if got := leaders(na, nb); len(got) != 2 {
			t.Fatalf("naive: leaders = %v, want the failure mode [a b]", got)
		}
	})
}

// TestFM08SlowRenewResponse checks FM-08, slow response: the lease expires
// between ticks: a renewal whose answer is slower than TTL minus the renew
// period must not keep a holder leading past the backend's expiry.
//
// Trigger: a renewal succeeds at the backend but its answer takes longer than
// TTL minus the renew period.
//
// A naive elector: the holder believes it leads until its next tick, after
// the lease has expired at the backend and another node took it. Two leaders.
//
// Tenure: the deadline counts from when the request was sent, never from the
// answer; IsLeader turns false at the deadline, which comes before the
// backend's expiry, and an answer arriving after the deadline extends nothing
// (elector.ErrLateAnswer).
func TestFM08SlowRenewResponse(t *testing.T) {
	t.Run("tenure stops at the deadline; the late answer extends nothing", func(t *testing.T) {
		w := newWorld(t)
		inFlight := make(chan struct{})
		answer := make(chan struct{})
		var held bool
		a := w.newNode("a", withFault(electortest.Renew, &electortest.Fault{After: func(backends.Claim, error) {
			if !held { // the loop goroutine is the only caller
				held = true
				close(inFlight)
				<-answer // applied at the backend; the answer is slow
			}
		}})).start()
		defer func() {
			select {
			case <-answer:
			default:
				close(answer)
			}
		}()
		term := a.await(electortest.Elected, 1).Term
		b := w.newNode("b").start()
		b.await(electortest.Lost, 1)
		w.step(leaderTimers+followerTimers, renewPeriod) // renew at 3s, applied
		recv(w, inFlight)
		// a's deadline timer and request timeout, b's wait.
		w.step(3, term.Deadline.Sub(w.clk.Now()))
		if a.IsLeader() {
			t.Fatalf("at a's deadline %v with its renewal unanswered: IsLeader = true", w.elapsed())
		}
		a.await(electortest.WorkDone, 1)
		a.f.Fail(opAcquire, 0, backends.ErrUnavailable) // keep a from re-campaigning
		close(answer)
		if ev := a.await(electortest.OnDemoted, 1); ev.Cause.Reason != elector.ReasonExpired {
			t.Errorf("a's term ended with %v, want expired", ev.Cause)
		}
		if n := a.rec.Count(electortest.Renewed); n != 0 {
			t.Errorf("the late answer counted as %d renewals, want 0", n)
		}
		// a released the claim once its work returned; b takes it at its
		// next attempt.
		w.step(2, b.rec.All(electortest.Lost)[0].At.Add(ttl+time.Millisecond).Sub(w.clk.Now()))
		b.await(electortest.Elected, 1)
		onlyLeader(t, w, "b", a, b)
	})
	t.Run("naive leads past the expiry", func(t *testing.T) {
		w := newWorld(t)
		sa := w.naiveStore()
		na := w.newNaive("a", &epochLocker{store: sa, key: key, ttl: ttl, wall: w.clk})
		na.Start(w.ctx)
		w.awaitRec("a", na.rec, electortest.Acquired, 1)
		slow := sa.Delay(faults.OpCompareAndSet, 11*time.Second) // the renewal's write lands late
		w.clk.Add(time.Second)
		nb := w.newNaive("b", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		nb.Start(w.ctx) // ticks at 1s, 4s, 7s, 10s, 13s
		w.awaitRec("b", nb.rec, electortest.Lost, 1)
		w.clk.Add(2 * time.Second) // 3s: a renews; its write is in flight
		if err := slow.AwaitHolding(w.ctx, 1); err != nil {
			t.Fatal(err)
		}
		for i, d := range []time.Duration{time.Second, 3 * time.Second, 3 * time.Second} { // 4s, 7s, 10s
			w.clk.Add(d)
			w.awaitRec("b", nb.rec, electortest.Lost, i+2) // at 10s the expiry, 10s, is not yet "< now"
		}
		w.clk.Add(3 * time.Second) // 13s: b finds it expired; a's write is still in flight
		w.awaitRec("b", nb.rec, electortest.Acquired, 1)
		if got := leaders(na, nb); len(got) != 2 {
			t.Fatalf("naive: leaders = %v, want the failure mode [a b]", got)
		}
	})
}

// TestFM09Jitter checks FM-09, no jitter: renewals and retries must be
// jittered so that holders started together do not stay in step.
//
// Trigger: many holders with the same configuration start together.
//
// A naive elector: every tick of every node lands on the same instant: bursts
// of contention on the backend.
//
// Tenure: every renewal and every retry wait is jittered (renewals only ever
// earlier), so attempts spread out. Renewals then move to a grid whose phase
// comes from the Store the holder's Locker runs over (and a seed drawn once
// per process): the many claims of one process renew together, however their
// Electors are named, so a backend can send them as one burst, while holders
// over different Stores (different processes) stay apart, by the random
// phases of their grids.
//
// The test runs holders over ten Stores; TestRenewalsOverOneStoreAlign in
// package elector checks that renewals over one Store align.
func TestFM09Jitter(t *testing.T) {
	const n = 10
	const step = 10 * time.Millisecond
	// distinct counts the different times among ts.
	distinct := func(ts []time.Time) int {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		return len(slices.Compact(ts))
	}
	t.Run("tenure spreads", func(t *testing.T) {
		w := newWorld(t)
		var leadersOnOwnKeys, followers []*node
		for i := range n {
			leadersOnOwnKeys = append(leadersOnOwnKeys, w.newNode(fmt.Sprintf("l%d", i), withConfig(func(c *elector.Config) {
				c.Key = fmt.Sprintf("fm/own/%d", i)
				c.DisableJitter = false // the default jitter, 15%
			})).start())
			f := w.newNode(fmt.Sprintf("f%d", i), withConfig(func(c *elector.Config) { c.DisableJitter = false }))
			f.f.Fail(opAcquire, 0, backends.ErrUnavailable)
			followers = append(followers, f.start())
		}
		for _, l := range leadersOnOwnKeys {
			l.await(electortest.Elected, 1)
		}
		for _, f := range followers {
			f.await(electortest.Lost, 1)
		}
		for w.elapsed() < renewPeriod+step {
			w.step(n*leaderTimers+n*followerTimers, step)
		}
		var renews, retries []time.Time
		for _, l := range leadersOnOwnKeys {
			renews = append(renews, l.await(electortest.Renewed, 1).At)
		}
		for _, f := range followers {
			retries = append(retries, f.await(electortest.Lost, 2).At)
		}
		if got := distinct(renews); got < n/2 {
			t.Errorf("first renewals of %d leaders fell on %d distinct instants, want at least %d", n, got, n/2)
		}
		if got := distinct(retries); got < n/2 {
			t.Errorf("second attempts of %d followers fell on %d distinct instants, want at least %d", n, got, n/2)
		}
	})
	t.Run("naive moves in step", func(t *testing.T) {
		w := newWorld(t)
		var ls, fs []*naive
		failing := w.naiveStore()
		failing.Fail(faults.OpGet, 0, backends.ErrUnavailable)
		for i := range n {
			l := w.newNaive(fmt.Sprintf("l%d", i), &epochLocker{store: w.naiveStore(), key: fmt.Sprintf("fm/own/%d", i), ttl: ttl, wall: w.clk})
			f := w.newNaive(fmt.Sprintf("f%d", i), &epochLocker{store: failing, key: key, ttl: ttl, wall: w.clk})
			l.Start(w.ctx)
			f.Start(w.ctx)
			ls, fs = append(ls, l), append(fs, f)
		}
		for i := range n {
			w.awaitRec("l", ls[i].rec, electortest.Acquired, 1)
			w.awaitRec("f", fs[i].rec, electortest.Lost, 1)
		}
		w.clk.Add(renewPeriod)
		var renews, retries []time.Time
		for i := range n {
			renews = append(renews, w.awaitRec("l", ls[i].rec, electortest.Renewed, 1).At)
			retries = append(retries, w.awaitRec("f", fs[i].rec, electortest.Lost, 2).At)
		}
		if got := distinct(renews) + distinct(retries); got != 2 {
			t.Fatalf("naive: %d distinct instants for %d renewals and %d retries, want the failure mode (2: all in step)", got, n, n)
		}
	})
}
