package failuremodes_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
	"github.com/tenure-go/tenure/lifecycle"
)

// TestFM01ErrorBlindRenewal checks FM-01, error-blind renewal: a transient
// error on renewal must not demote a leader whose local deadline has not
// passed.
//
// Trigger: a transient backend error (timeout, unavailable) on a renewal.
//
// A naive elector: renew returns false on any error, so the leader demotes
// while its lease is still valid: needless leadership churn.
//
// Tenure: renewal errors are classified with backends.Classify. A transient
// one is retried with backoff until the local deadline; only a lost claim or
// a fatal error demotes at once.
func TestFM01ErrorBlindRenewal(t *testing.T) {
	t.Run("tenure retries until the deadline", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a").start()
		a.await(electortest.Elected, 1)
		a.f.Fail(faults.OpKeepAlive, 2, backends.ErrUnavailable)
		// Renew at 3s fails, the retry at 4s fails, the one at 6s succeeds;
		// the deadline of the first term is 9.9s.
		w.step(leaderTimers, renewPeriod)
		if ev := a.await(electortest.RenewFail, 1); ev.Class != backends.ClassTransient {
			t.Errorf("first renew failure class = %v, want transient", ev.Class)
		}
		w.step(leaderTimers, retryPeriod)
		a.await(electortest.RenewFail, 2)
		if !a.IsLeader() {
			t.Fatalf("at %v, after two transient renew errors and before the deadline: IsLeader = false, want true", w.elapsed())
		}
		w.step(leaderTimers, 2*retryPeriod)
		a.await(electortest.Renewed, 1)
		if got := a.rec.Count(electortest.Demoted); got != 0 || !a.IsLeader() {
			t.Errorf("after the retries: demotions = %d, IsLeader = %v; want 0, true", got, a.IsLeader())
		}
	})
	t.Run("naive demotes on the first error", func(t *testing.T) {
		w := newWorld(t)
		s := w.naiveStore()
		n := w.newNaive("n", &epochLocker{store: s, key: key, ttl: ttl, wall: w.clk})
		n.Start(w.ctx)
		w.awaitRec("n", n.rec, electortest.Acquired, 1)
		s.Fail(faults.OpGet, 1, backends.ErrUnavailable)
		w.step(1, renewPeriod)
		w.awaitRec("n", n.rec, electortest.Dropped, 1)
		hs, err := s.Inner().Get(w.ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		owner, expiry, _ := parseEpoch(hs.Value)
		stillValid := owner == "n" && expiry > w.clk.Now().UnixNano()
		if n.IsLeader() || !stillValid {
			t.Fatalf("naive: IsLeader = %v, own claim still valid = %v; want the failure mode (false, true)", n.IsLeader(), stillValid)
		}
	})
}

// TestFM02ZombieLeaderAfterLoopPanic checks FM-02, zombie leader after a loop
// panic: a panic in the election loop must not leave IsLeader reporting a
// leadership nobody renews.
//
// Trigger: a panic inside the election loop (here: in the Locker's Renew), or
// a loop wedged in a call that ignores its context.
//
// A naive elector: the loop dies, IsLeader returns its last value forever,
// and once the lease expires another node leads too.
//
// Tenure: IsLeader is computed at each call from the local deadline, so it
// turns false at the deadline whatever the loop is doing, and the leader's
// context is cancelled then. A panic is recovered: the term is demoted (cause
// ReasonPanic), the claim released, the panic reported, and the elector
// campaigns again.
func TestFM02ZombieLeaderAfterLoopPanic(t *testing.T) {
	t.Run("tenure demotes, reports and campaigns again", func(t *testing.T) {
		w := newWorld(t)
		var panics atomic.Int32
		panics.Store(1)
		a := w.newNode("a", withFault(electortest.Renew, &electortest.Fault{Before: func() {
			if panics.Add(-1) >= 0 {
				panic("renew exploded")
			}
		}})).start()
		first := a.await(electortest.Elected, 1).Term
		w.step(leaderTimers, renewPeriod)
		a.await(electortest.Panicked, 1)
		ev := a.await(electortest.OnDemoted, 1)
		if ev.Cause.Reason != elector.ReasonPanic || a.IsLeader() {
			t.Errorf("after the panic: cause = %v, IsLeader = %v; want panic, false", ev.Cause, a.IsLeader())
		}
		if hs := w.holders(); len(hs) != 0 {
			t.Errorf("claim after the panicked term = %v, want released", hs)
		}
		// It campaigns again after a backoff of RetryPeriod.
		w.step(followerTimers, retryPeriod)
		second := a.await(electortest.Elected, 2).Term
		if second.Token <= first.Token || !a.IsLeader() {
			t.Errorf("second term token %d (first %d), IsLeader %v; want a new, higher token and leadership", second.Token, first.Token, a.IsLeader())
		}
	})
	t.Run("tenure: a wedged loop cannot keep IsLeader true", func(t *testing.T) {
		w := newWorld(t)
		wedge := make(chan struct{})
		var wedged atomic.Bool
		a := w.newNode("a", withFault(electortest.Renew, &electortest.Fault{Before: func() {
			if wedged.CompareAndSwap(false, true) {
				<-wedge // stuck, deaf to its context
			}
		}})).start()
		defer close(wedge)
		term := a.await(electortest.Elected, 1).Term
		w.step(leaderTimers, renewPeriod)
		// The loop is stuck in Renew; only the deadline timer is armed (and
		// the request's timeout).
		w.step(2, term.Deadline.Sub(w.clk.Now()))
		if a.IsLeader() {
			t.Fatalf("at the deadline with the loop wedged: IsLeader = true")
		}
		a.await(electortest.WorkDone, 1) // the leader's context was cancelled at the deadline
		if ev := a.await(electortest.Demoted, 1); ev.Cause.Reason != elector.ReasonExpired {
			t.Errorf("demotion cause = %v, want expired", ev.Cause)
		}
	})
	t.Run("naive keeps reporting leader", func(t *testing.T) {
		w := newWorld(t)
		s := w.naiveStore()
		n := w.newNaive("n", &panicky{naiveLocker: &epochLocker{store: s, key: key, ttl: ttl, wall: w.clk}})
		n.Start(w.ctx)
		w.awaitRec("n", n.rec, electortest.Acquired, 1)
		w.step(1, renewPeriod) // renew panics; the loop is gone
		n.cleanup()            // join the dead loop
		w.clk.Add(2 * ttl)
		m := w.newNaive("m", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		m.Start(w.ctx)
		w.awaitRec("m", m.rec, electortest.Acquired, 1)
		if got := leaders(n, m); len(got) != 2 {
			t.Fatalf("after the naive loop died and its lease expired: leaders = %v, want the failure mode [n m]", got)
		}
	})
}

// panicky panics in renew.
type panicky struct{ naiveLocker }

func (p *panicky) renew(context.Context, string) (bool, error) { panic("renew exploded") }

// TestFM03StopReleasesAcquiredClaim checks FM-03, Stop skips Release
// (check-then-act): Stop must release a claim the loop took while Stop was
// running.
//
// Trigger: the loop acquires the claim between Stop's read of the state and
// its cancelling of the loop.
//
// A naive elector: Stop read "follower", so it does not release; the claim is
// held by nobody until its TTL runs out.
//
// Tenure: Stop marks the elector stopping under the same mutex the loop takes
// to become leader. An answer that arrives after that is not led but
// released; a term that began before is demoted and released. Stop does not
// cancel an acquiring request in flight: it waits for the answer, at most
// RenewTimeout. If the backend applied the request but the answer is lost,
// the outcome is unknown (FM-26); the stopping elector then reads the claim
// and releases it if it is its own, so the claim is free when Stop returns,
// not only after its TTL.
func TestFM03StopReleasesAcquiredClaim(t *testing.T) {
	t.Run("tenure: answer arrives after Stop began", func(t *testing.T) {
		w := newWorld(t)
		answered := make(chan struct{})
		proceed := make(chan struct{})
		a := w.newNode("a", withFault(electortest.Acquire, &electortest.Fault{After: func(backends.Claim, error) {
			close(answered)
			<-proceed // the answer is in hand; the loop has not looked at it yet
		}})).start()
		recv(w, answered)
		stopped := make(chan error, 1)
		go func() { stopped <- a.e.Stop(w.ctx) }()
		// Stop has begun once its bounded wait is armed (the acquire's
		// request timeout is the other timer).
		w.settle(2)
		close(proceed)
		if err := recv(w, stopped); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if hs := w.holders(); len(hs) != 0 {
			t.Errorf("claim after Stop = %v, want released", hs)
		}
		if n := a.rec.Count(electortest.Elected) + a.rec.Count(electortest.OnDemoted); n != 0 {
			t.Errorf("OnElected/OnDemoted calls = %d, want 0 for a term never led", n)
		}
	})
	t.Run("tenure: Stop right after the election", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a").start()
		a.await(electortest.Won, 1)
		if err := a.e.Stop(w.ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if hs := w.holders(); len(hs) != 0 {
			t.Errorf("claim after Stop = %v, want released", hs)
		}
	})
	t.Run("tenure: acquire in flight when Stop comes, answer lost", func(t *testing.T) {
		// The backend applies the create, but its answer never comes:
		// Stop does not cancel the request, which ends at its timeout with
		// an unknown outcome. The elector must not lead on it, and must
		// find its claim and release it before Stop returns.
		w := newWorld(t)
		a := w.newNode("a")
		gate := a.f.Pause(opAcquire, faults.AfterCall, 1)
		a.start()
		if _, err := gate.Next(w.ctx); err != nil {
			t.Fatal(err)
		}
		stopped := make(chan error, 1)
		go func() { stopped <- a.e.Stop(w.ctx) }()
		w.step(2, renewTimeout) // the request's timeout and Stop's bound
		if err := recv(w, stopped); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if n := a.rec.Count(electortest.Won); n != 0 {
			t.Errorf("won %d times on an answer that never came", n)
		}
		if hs := w.holders(); len(hs) != 0 {
			t.Errorf("holders after Stop = %+v, want none: the claim taken was released", hs)
		}
	})
	t.Run("naive leaves the claim held", func(t *testing.T) {
		w := newWorld(t)
		s := w.naiveStore()
		gate := s.Pause(opAcquire, faults.AfterCall, 1)
		n := w.newNaive("n", &epochLocker{store: s, key: key, ttl: ttl, wall: w.clk})
		n.betweenReadAndCancel = func() {
			c, err := gate.Next(w.ctx)
			if err != nil {
				t.Error(err)
				return
			}
			c.Release()
			w.awaitRec("n", n.rec, electortest.Acquired, 1)
		}
		n.Start(w.ctx)
		if err := n.Stop(w.ctx); err != nil {
			t.Fatalf("naive Stop: %v", err)
		}
		if _, err := s.Inner().Get(w.ctx, key); err != nil {
			t.Fatalf("naive: claim after Stop: %v; want the failure mode (still held)", err)
		}
	})
}

// TestFM04DoubleStart checks FM-04, double Start: a second Start must not
// start a second loop.
//
// Trigger: Start called twice.
//
// A naive elector: a second loop runs; the first one's cancel is lost, so
// Stop stops only one of them.
//
// Tenure: a second Start (or a Start after Stop) returns
// elector.ErrAlreadyStarted (or ErrStopped); one loop runs, and nothing is
// left running after Stop.
func TestFM04DoubleStart(t *testing.T) {
	t.Run("tenure refuses", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a").start()
		if err := a.e.Start(context.Background()); !errors.Is(err, elector.ErrAlreadyStarted) {
			t.Errorf("second Start = %v, want ErrAlreadyStarted", err)
		}
		a.await(electortest.Elected, 1)
		if err := a.e.Stop(w.ctx); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if err := a.e.Start(context.Background()); !errors.Is(err, elector.ErrStopped) {
			t.Errorf("Start after Stop = %v, want ErrStopped", err)
		}
		if got := w.clk.Waiters(); got != 0 {
			t.Errorf("armed timers after Stop = %d, want 0: a loop is still running", got)
		}
		if got := a.f.Calls(opAcquire); got != 1 {
			t.Errorf("acquire attempts = %d, want 1 (one loop)", got)
		}
	})
	t.Run("naive runs two loops and stops one", func(t *testing.T) {
		w := newWorld(t)
		s := w.naiveStore()
		s.Fail(faults.OpGet, 0, backends.ErrUnavailable) // keep both loops following
		n := w.newNaive("n", &epochLocker{store: s, key: key, ttl: ttl, wall: w.clk})
		n.Start(w.ctx)
		n.Start(w.ctx)
		w.awaitRec("n", n.rec, electortest.Attempt, 2)
		if err := n.Stop(w.ctx); err != nil {
			t.Fatal(err)
		}
		w.step(1, renewPeriod) // the first loop's ticker is still armed
		w.awaitRec("n", n.rec, electortest.Attempt, 3)
		t.Logf("naive: an attempt at %v, after Stop returned (the failure mode)", w.elapsed())
	})
}

// TestFM05ParentContextCancelled checks FM-05, stale leadership after the
// parent context is cancelled: cancelling the context given to Start must
// stop the elector as Stop does: IsLeader false, claim released.
//
// Trigger: the context given to Start is cancelled without Stop.
//
// A naive elector: the loop exits, the state stays leader, IsLeader returns
// true with an expired lease, and the claim is not released.
//
// Tenure: a cancelled parent context behaves like Stop: the term is demoted
// (ReasonStopped), the claim released, the state becomes stopped and Done is
// closed.
func TestFM05ParentContextCancelled(t *testing.T) {
	t.Run("tenure stops and releases", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a").start()
		a.await(electortest.Elected, 1)
		a.cancel()
		recv(w, a.e.Done())
		if a.IsLeader() || a.e.State() != lifecycle.Stopped {
			t.Errorf("after the parent context was cancelled: IsLeader = %v, state = %v; want false, stopped", a.IsLeader(), a.e.State())
		}
		if hs := w.holders(); len(hs) != 0 {
			t.Errorf("claim = %v, want released", hs)
		}
		if ev := a.await(electortest.OnDemoted, 1); ev.Cause.Reason != elector.ReasonStopped {
			t.Errorf("OnDemoted cause = %v, want stopped", ev.Cause)
		}
	})
	t.Run("naive keeps reporting leader", func(t *testing.T) {
		w := newWorld(t)
		s := w.naiveStore()
		n := w.newNaive("n", &epochLocker{store: s, key: key, ttl: ttl, wall: w.clk})
		ctx, cancel := context.WithCancel(w.ctx)
		n.Start(ctx)
		w.awaitRec("n", n.rec, electortest.Acquired, 1)
		cancel()
		n.cleanup() // the loop has exited
		w.clk.Add(2 * ttl)
		if _, err := s.Inner().Get(w.ctx, key); !n.IsLeader() || err != nil {
			t.Fatalf("naive: IsLeader = %v, claim present = %v; want the failure mode (true, true)", n.IsLeader(), err == nil)
		}
	})
}
