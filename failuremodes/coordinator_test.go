package failuremodes_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/electortest"
	"github.com/tenure-go/tenure/internal/faults"
	"github.com/tenure-go/tenure/lifecycle"
)

// FM-01: a transient error on renewal must not demote a leader whose local
// deadline has not passed.
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

// FM-02: a panic in the election loop must not leave IsLeader reporting a
// leadership nobody renews.
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

// FM-03: Stop must release a claim the loop took while Stop was running.
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

// FM-04: a second Start must not start a second loop.
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

// FM-05: cancelling the context given to Start must stop the elector as
// Stop does: IsLeader false, claim released.
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
