package failuremodes_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// TestFM21ThousandElectorsOneLeader checks FM-21, concurrent acquisition at
// scale: of a thousand candidates campaigning at once, exactly one leads.
//
// Trigger: a thousand candidates campaign for one claim at once.
//
// A naive elector: list-then-register (the race the primitives proposal was
// written for): every candidate lists, sees nobody, and registers. Many
// leaders.
//
// Tenure: acquisition is one create-if-absent: exactly one of the 1000
// electors on memstore leads, the others follow, and after the leader stops
// exactly one takes over.
func TestFM21ThousandElectorsOneLeader(t *testing.T) {
	const n = 1000
	t.Run("tenure", func(t *testing.T) {
		// No fake time passes: the candidates campaign at start, and again
		// when their watch of the claim sees the leader release it. (A
		// thousand timers due at one instant would be fired by one Add while
		// the woken electors arm new ones, which the archived mock clock
		// underneath clocktest does not survive.)
		w := newWorld(t)
		nodes := make([]*node, n)
		var acting, maxActing atomic.Int32
		for i := range nodes {
			nodes[i] = w.newNode(fmt.Sprintf("n%04d", i), withWatch())
			nodes[i].rec.SetWork(func(ctx context.Context, _ elector.Term) {
				now := acting.Add(1)
				for m := maxActing.Load(); now > m && !maxActing.CompareAndSwap(m, now); m = maxActing.Load() {
				}
				<-ctx.Done()
				acting.Add(-1)
			})
		}
		for _, nd := range nodes {
			nd.start()
		}
		// Every candidate has made its attempt: campaign, then won or lost.
		for _, nd := range nodes {
			nd.await(electortest.Transition, 2)
		}
		first := countLeaders(t, nodes, 1)

		// The leader stops and releases; the others see it and campaign.
		if err := first.e.Stop(w.ctx); err != nil {
			t.Fatal(err)
		}
		for _, nd := range nodes {
			if nd != first {
				nd.await(electortest.Transition, 4)
			}
		}
		second := countLeaders(t, nodes, 1)
		if second == first {
			t.Fatal("the stopped leader leads again")
		}
		second.await(electortest.Elected, 1)
		if got := maxActing.Load(); got != 1 {
			t.Errorf("OnElected ran in %d electors at once, want 1", got)
		}
		won := 0
		for _, nd := range nodes {
			won += nd.rec.Count(electortest.Won)
		}
		if won != 2 {
			t.Errorf("%d elections won in all, want 2", won)
		}
	})
	t.Run("naive list-then-register", func(t *testing.T) {
		w := newWorld(t)
		s := w.naiveStore()
		lists := s.Pause(faults.OpList, faults.AfterCall, 0)
		var registered atomic.Int32
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				members, err := s.List(w.ctx, "fm/members/")
				if err != nil || len(members) > 0 {
					return
				}
				if _, err := s.CreateIfAbsent(w.ctx, fmt.Sprintf("fm/members/%04d", i), nil, ttl); err == nil {
					registered.Add(1)
				}
			})
		}
		// Every candidate lists before any registers.
		calls := make([]*faults.Call, 0, n)
		for range n {
			c, err := lists.Next(w.ctx)
			if err != nil {
				t.Fatal(err)
			}
			calls = append(calls, c)
		}
		for _, c := range calls {
			c.Release()
		}
		wg.Wait()
		if got := registered.Load(); got < 2 {
			t.Fatalf("naive: %d leaders registered, want the failure mode (many)", got)
		}
		t.Logf("naive: %d of %d candidates registered as leader", registered.Load(), n)
	})
}

// countLeaders fails unless exactly want nodes lead, and returns the first.
func countLeaders(t *testing.T, nodes []*node, want int) *node {
	t.Helper()
	var got []*node
	for _, nd := range nodes {
		if nd.IsLeader() {
			got = append(got, nd)
		}
	}
	if len(got) != want {
		t.Fatalf("%d leaders, want %d", len(got), want)
	}
	return got[0]
}

// TestFM22NoReleaseUnderRunningWork checks FM-22, release while leader work
// still runs: the claim is never released while OnElected still runs.
//
// Trigger: a leader is demoted (or stopped) while its work has not finished.
//
// A naive elector: the claim is released at once while the work goes on
// (client-go does not await its OnStartedLeading); another node starts the
// same work. Two workers.
//
// Tenure: the claim is released only after OnElected has returned; if it does
// not return within DrainTimeout the claim is left to expire, never released,
// and the elector does not campaign again until the work has returned.
func TestFM22NoReleaseUnderRunningWork(t *testing.T) {
	t.Run("tenure: released once the work returns", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a")
		winding := make(chan struct{})
		a.rec.SetWork(func(ctx context.Context, _ elector.Term) {
			<-ctx.Done()
			wound := w.clk.After(time.Second) // a second to wind down
			close(winding)
			<-wound
		})
		a.start()
		a.await(electortest.Elected, 1)
		b := w.newNode("b").start()
		b.await(electortest.Lost, 1)
		stopped := make(chan error, 1)
		go func() { stopped <- a.e.Stop(w.ctx) }()
		// The work's own timer must be armed before the clock moves; the
		// count alone could be met by timers that are about to be stopped.
		recv(w, winding)
		// The work's timer, the drain timer, Stop's bound, b's wait.
		w.settle(4)
		if hs := w.holders(); len(hs) != 1 || hs[0].Holder != a.e.Holder() {
			t.Fatalf("holders while a's work winds down = %+v, want a's claim", hs)
		}
		w.clk.Add(time.Second)
		if err := recv(w, stopped); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if hs := w.holders(); len(hs) != 0 {
			t.Errorf("holders after a's work returned = %+v, want released", hs)
		}
		if done, demoted := a.await(electortest.WorkDone, 1), a.await(electortest.OnDemoted, 1); done.At.After(demoted.At) {
			t.Errorf("OnDemoted at %v before the work returned at %v", demoted.At, done.At)
		}
	})
	t.Run("tenure: work that outlives the drain timeout", func(t *testing.T) {
		w := newWorld(t)
		finish := make(chan struct{})
		a := w.newNode("a")
		a.rec.SetWork(func(ctx context.Context, _ elector.Term) { <-finish }) // deaf to ctx
		a.start()
		a.await(electortest.Elected, 1)
		b := w.newNode("b").start()
		b.await(electortest.Lost, 1) // b tries next at 10.001s
		a.f.Fail(faults.OpKeepAlive, 1, backends.ErrPermission)
		w.step(leaderTimers+followerTimers, renewPeriod) // fatal: demoted at 3s
		a.await(electortest.Demoted, 1)
		w.step(2, drainTimeout) // the drain timer and b's wait: 5s, drain gave up
		creates := a.f.Calls(opAcquire)
		for w.elapsed() < ttl {
			w.step(followerTimers, time.Second)
			if hs := w.holders(); w.elapsed() < ttl && (len(hs) != 1 || hs[0].Holder != a.e.Holder()) {
				t.Fatalf("at %v holders = %+v, want a's claim, left to expire", w.elapsed(), hs)
			}
		}
		w.step(followerTimers, time.Millisecond) // 10.001s
		b.await(electortest.Elected, 1)
		if got := a.f.Calls(opAcquire); got != creates {
			t.Errorf("a campaigned %d times while its work still ran", got-creates)
		}
		close(finish)
		a.await(electortest.OnDemoted, 1)
		w.stepUntil(followerTimers+leaderTimers, 100*time.Millisecond, func() bool { return a.f.Calls(opAcquire) > creates })
	})
	t.Run("naive: released under running work", func(t *testing.T) {
		w := newWorld(t)
		s := w.naiveStore()
		finish := make(chan struct{})
		var working atomic.Bool
		started := make(chan struct{})
		n := w.newNaive("n", &epochLocker{store: s, key: key, ttl: ttl, wall: w.clk})
		n.onElected = func(context.Context) {
			working.Store(true)
			close(started)
			<-finish
			working.Store(false)
		}
		defer close(finish)
		n.Start(w.ctx)
		w.awaitRec("n", n.rec, electortest.Acquired, 1)
		select { // the naive node starts its work in a goroutine of its own
		case <-started:
		case <-w.ctx.Done():
			t.Fatal("naive: the work never started")
		}
		if err := n.Stop(w.ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Inner().Get(w.ctx, key); !errors.Is(err, backends.ErrNotFound) || !working.Load() {
			t.Fatalf("naive: claim present = %v, work running = %v; want the failure mode (released, running)", err == nil, working.Load())
		}
	})
}

// TestFM23NoDemotedWithoutElected checks FM-23, OnDemoted for a holder that
// never led: OnDemoted is called only after an OnElected.
//
// Trigger: Stop on a node that never led.
//
// A naive elector: the stop callback runs anyway (client-go calls
// OnStoppedLeading for a process that never led), and code that cleans up
// after leadership runs on a follower.
//
// Tenure: OnDemoted runs exactly once after each OnElected, and never
// otherwise; a term that ended before OnElected's turn gets neither.
func TestFM23NoDemotedWithoutElected(t *testing.T) {
	t.Run("tenure: a follower stops", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a").start()
		a.await(electortest.Elected, 1)
		b := w.newNode("b").start()
		b.await(electortest.Lost, 1)
		if err := b.e.Stop(w.ctx); err != nil {
			t.Fatal(err)
		}
		if n := b.rec.Count(electortest.OnDemoted); n != 0 {
			t.Errorf("OnDemoted called %d times for a follower", n)
		}
	})
	t.Run("tenure: a term that ends before OnElected's turn", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a")
		a.rec.NewLeaderGate = make(chan struct{})
		a.start()
		a.await(electortest.Won, 1)
		a.await(electortest.NewLeader, 1) // the callback goroutine is held here
		stopped := make(chan error, 1)
		go func() { stopped <- a.e.Stop(w.ctx) }()
		a.await(electortest.Demoted, 1)
		close(a.rec.NewLeaderGate)
		if err := recv(w, stopped); err != nil {
			t.Fatal(err)
		}
		if e, d := a.rec.Count(electortest.Elected), a.rec.Count(electortest.OnDemoted); e != 0 || d != 0 {
			t.Errorf("OnElected %d, OnDemoted %d times for a term that ended first; want 0, 0", e, d)
		}
		if hs := w.holders(); len(hs) != 0 {
			t.Errorf("holders = %+v, want released", hs)
		}
	})
	t.Run("naive: the stop callback runs for a follower", func(t *testing.T) {
		w := newWorld(t)
		na := w.newNaive("a", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		na.Start(w.ctx)
		w.awaitRec("a", na.rec, electortest.Acquired, 1)
		nb := w.newNaive("b", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		nb.onStopped = func() { nb.rec.Add(electortest.Event{Kind: electortest.StopCalled}) }
		nb.Start(w.ctx)
		w.awaitRec("b", nb.rec, electortest.Lost, 1)
		if err := nb.Stop(w.ctx); err != nil {
			t.Fatal(err)
		}
		if nb.rec.Count(electortest.StopCalled) != 1 || nb.rec.Count(electortest.Acquired) != 0 {
			t.Fatal("naive: want the failure mode (the stop callback ran for a node that never led)")
		}
	})
}

// steal deletes the claim and writes a foreign one in its place, as a
// holder elsewhere would after an outage of ours.
func steal(w *world) {
	w.t.Helper()
	l, err := backends.NewLocker(w.store)
	if err != nil {
		w.t.Fatal(err)
	}
	hs := w.holders()
	if len(hs) != 1 {
		w.t.Fatalf("holders = %+v", hs)
	}
	if err := l.Release(w.ctx, hs[0]); err != nil {
		w.t.Fatal(err)
	}
	h, _ := backends.NewHolder("thief")
	if _, err := l.TryAcquire(w.ctx, key, h, ttl); err != nil {
		w.t.Fatal(err)
	}
}

// TestFM24CampaignsAgainAfterLoss checks FM-24, zombie standby after a loss:
// after losing its claim an elector campaigns again.
//
// Trigger: a leader loses its claim (taken over, deleted).
//
// A naive elector: a one-shot campaign (client-go's Run, etcd's Campaign)
// returns and never campaigns again: the node is a standby that never stands
// in.
//
// Tenure: after a loss, an expiry, transient errors or a panic the elector
// campaigns again, for as long as it runs, and leads when the claim is free.
// It stops campaigning only when stopped, or after repeated fatal errors
// (FM-18), and then Run returns the error.
func TestFM24CampaignsAgainAfterLoss(t *testing.T) {
	t.Run("tenure", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a").start()
		first := a.await(electortest.Elected, 1).Term
		w.step(leaderTimers, time.Second)
		steal(w) // at 1s; the thief never renews: its claim expires at 11s
		w.step(leaderTimers, renewPeriod-time.Second)
		if ev := a.await(electortest.OnDemoted, 1); ev.Cause.Reason != elector.ReasonLost {
			t.Errorf("a's term ended with %v, want lost", ev.Cause)
		}
		a.await(electortest.Lost, 1) // it campaigned again at once and found the thief
		w.step(followerTimers, ttl-renewPeriod+time.Second+time.Millisecond)
		if second := a.await(electortest.Elected, 2).Term; second.Token <= first.Token {
			t.Errorf("second term token %d, first %d", second.Token, first.Token)
		}
	})
	t.Run("naive one-shot campaign", func(t *testing.T) {
		w := newWorld(t)
		n := w.newNaive("n", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		n.oneShot = true
		n.Start(w.ctx)
		w.awaitRec("n", n.rec, electortest.Acquired, 1)
		w.clk.Add(time.Second)
		thief := &epochLocker{store: w.store, key: key, ttl: ttl, wall: w.clk}
		e, err := w.store.Get(w.ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.store.CompareAndSet(w.ctx, key, e.Revision, thief.value("thief"), 0); err != nil {
			t.Fatal(err)
		}
		w.clk.Add(renewPeriod - time.Second)
		w.awaitRec("n", n.rec, electortest.Dropped, 1)
		n.cleanup()        // the loop has returned
		w.clk.Add(3 * ttl) // the thief's claim is long expired
		if n.IsLeader() || n.rec.Count(electortest.Attempt) != 1 {
			t.Fatalf("naive: leader %v after %d attempts; want the failure mode (never campaigns again)", n.IsLeader(), n.rec.Count(electortest.Attempt))
		}
	})
}

// TestFM25LateAcquireDoesNotLead checks FM-25, a campaign answered after its
// lease expired: an acquisition answered after the deadline it would grant
// does not make a leader.
//
// Trigger: the acquiring request succeeds at the backend, but its answer
// arrives after the deadline the acquisition would grant (etcd's Campaign can
// return success after its session expired).
//
// A naive elector: success means leader, however late: it leads on a claim
// that has already expired and been taken by another node.
//
// Tenure: the deadline counts from the request's send time; an answer
// arriving after it is not led (the claim is released if still held).
func TestFM25LateAcquireDoesNotLead(t *testing.T) {
	t.Run("tenure", func(t *testing.T) {
		w := newWorld(t)
		answered, deliver := make(chan struct{}), make(chan struct{})
		var once bool
		a := w.newNode("a", withFault(electortest.Acquire, &electortest.Fault{After: func(backends.Claim, error) {
			if !once { // the loop goroutine is the only caller
				once = true
				close(answered)
				<-deliver // created at 0s; the answer is slow
			}
		}})).start()
		defer func() {
			select {
			case <-deliver:
			default:
				close(deliver)
			}
		}()
		recv(w, answered)
		w.clk.Add(time.Second / 2)
		b := w.newNode("b").start()
		b.await(electortest.Lost, 1) // b tries next at 10.001s
		// a's request timer, b's wait.
		w.step(2, ttl+time.Millisecond-w.elapsed())
		b.await(electortest.Elected, 1)
		close(deliver) // a's answer arrives at 10.001s; its deadline was 9.9s
		a.await(electortest.Lost, 1)
		if n := a.rec.Count(electortest.Won); n != 0 || a.IsLeader() {
			t.Errorf("a won %d times, IsLeader %v, from an answer after its deadline", n, a.IsLeader())
		}
		if hs := w.holders(); len(hs) != 1 || hs[0].Holder != b.e.Holder() {
			t.Errorf("holders = %+v, want b's claim untouched", hs)
		}
		onlyLeader(t, w, "b", a, b)
	})
	t.Run("naive", func(t *testing.T) {
		w := newWorld(t)
		sa := w.naiveStore()
		slow := sa.DelayResponse(opAcquire, 14*time.Second) // created at 0s, answered at 14s
		na := w.newNaive("a", &epochLocker{store: sa, key: key, ttl: ttl, wall: w.clk})
		nb := w.newNaive("b", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		overlap := make(chan bool, 1)
		na.onElected = func(context.Context) { overlap <- nb.IsLeader() }
		na.Start(w.ctx)
		if err := slow.AwaitHolding(w.ctx, 1); err != nil {
			t.Fatal(err)
		}
		w.clk.Add(time.Second / 2)
		nb.Start(w.ctx) // ticks at 0.5s, 3.5s, ..., 12.5s
		w.awaitRec("b", nb.rec, electortest.Lost, 1)
		for i := 2; i <= 4; i++ {
			w.clk.Add(3 * time.Second)
			w.awaitRec("b", nb.rec, electortest.Lost, i)
		}
		w.clk.Add(3 * time.Second) // 12.5s: b takes the expired claim
		w.awaitRec("b", nb.rec, electortest.Acquired, 1)
		w.clk.Add(3 * time.Second / 2) // 14s: a's answer
		if !recv(w, overlap) {
			t.Fatal("naive: a started leading while b did not lead; want the failure mode")
		}
	})
}

// TestFM26UnknownOutcome checks FM-26, a write whose outcome is unknown: a
// write applied by the backend whose answer was lost.
//
// Trigger: an acquire or a renewal is applied by the backend, but the answer
// is lost (a timeout after commit).
//
// A naive elector: a lost acquire answer looks like failure; the next attempt
// finds the claim held (by itself) and waits a whole TTL: leaderless.
//
// Tenure: the error is transient (outcome unknown). A renewal is retried
// (keep-alive is idempotent). An acquire whose claim turns out to be its own
// is released, not led (its deadline is unknown), and taken afresh on the
// next attempt.
func TestFM26UnknownOutcome(t *testing.T) {
	t.Run("tenure: acquire", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a")
		a.f.DropResponse(opAcquire, 1)
		a.start()
		if ev := a.await(electortest.Lost, 1); ev.Class != backends.ClassTransient {
			t.Errorf("lost answer classified %v, want transient", ev.Class)
		}
		if hs := w.holders(); len(hs) != 1 || hs[0].Holder != a.e.Holder() {
			t.Fatalf("holders = %+v, want a's claim, created unbeknownst to it", hs)
		}
		w.step(followerTimers, retryPeriod) // finds its own claim and releases it
		a.await(electortest.Lost, 2)
		w.step(followerTimers, 2*retryPeriod) // takes it afresh
		term := a.await(electortest.Elected, 1).Term
		if at := term.AcquiredAt.Sub(epoch); at >= ttl {
			t.Errorf("a led from %v, want before the orphaned claim would have expired (%v)", at, ttl)
		}
	})
	t.Run("tenure: renew", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a").start()
		a.await(electortest.Elected, 1)
		a.f.DropResponse(faults.OpKeepAlive, 1)
		w.step(leaderTimers, renewPeriod)
		a.await(electortest.RenewFail, 1)
		w.step(leaderTimers, retryPeriod)
		a.await(electortest.Renewed, 1)
		if n := a.rec.Count(electortest.Demoted); n != 0 {
			t.Errorf("a demoted %d times", n)
		}
	})
	t.Run("naive waits out its own claim", func(t *testing.T) {
		w := newWorld(t)
		s := w.naiveStore()
		s.DropResponse(opAcquire, 1)
		l, err := backends.NewLocker(s)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := backends.NewHolder("n")
		n := w.newNaive("n", &strictLocker{l: l, key: key, ttl: ttl, holder: h})
		n.Start(w.ctx)
		w.awaitRec("n", n.rec, electortest.Lost, 1)
		for i := 2; i <= 4; i++ { // 3s, 6s, 9s: "held"
			w.clk.Add(renewPeriod)
			w.awaitRec("n", n.rec, electortest.Lost, i)
		}
		if n.IsLeader() {
			t.Fatal("naive leads")
		}
		t.Logf("naive: leaderless for %v behind its own orphaned claim (the failure mode)", w.elapsed())
	})
}

// TestFM30PauseFencedByToken checks FM-30, stop-the-world pause past the
// lease: a leader paused past its lease writes with a stale token; the fenced
// resource rejects it.
//
// Trigger: the leader's process pauses (GC, a stopped VM) longer than the
// lease while its work runs, then resumes and writes.
//
// A naive elector: nothing stops the write: it lands after another holder was
// elected.
//
// Tenure: no elector can stop a paused process (the package doc says so);
// every term carries a fencing token, the claim's CreateRevision, strictly
// higher for each new holder, and a downstream resource that accepts only
// tokens at least as high as the highest it has seen rejects the stale write.
func TestFM30PauseFencedByToken(t *testing.T) {
	t.Run("tenure", func(t *testing.T) {
		w := newWorld(t)
		res := &fenced{}
		pause, resume := make(chan struct{}), make(chan struct{})
		late := make(chan error, 1)
		var once bool
		a := w.newNode("a", withFault(electortest.Renew, &electortest.Fault{Before: func() {
			if !once { // the loop goroutine is the only caller
				once = true
				<-resume // the whole process is paused
			}
		}}))
		a.rec.SetWork(func(ctx context.Context, term elector.Term) {
			if err := res.write(term.Token, "a-1"); err != nil {
				t.Error(err)
			}
			close(pause)
			<-resume // paused mid-work
			late <- res.write(term.Token, "a-2")
		})
		a.start()
		recv(w, pause)
		b := w.newNode("b")
		bWrote := make(chan error, 1)
		b.rec.SetWork(func(ctx context.Context, term elector.Term) {
			bWrote <- res.write(term.Token, "b-1")
			<-ctx.Done()
		})
		b.start()
		b.await(electortest.Lost, 1)
		w.step(leaderTimers+followerTimers, renewPeriod) // a's renewal freezes
		w.step(3, ttl+time.Millisecond-w.elapsed())      // b takes the expired claim
		if err := recv(w, bWrote); err != nil {
			t.Fatal(err)
		}
		close(resume)
		err := recv(w, late)
		if err == nil {
			t.Fatalf("the paused leader's write was accepted: log %v", res.accepted())
		}
		if got := res.accepted(); len(got) != 2 || got[0] != "a-1" || got[1] != "b-1" {
			t.Errorf("accepted writes = %v, want [a-1 b-1]", got)
		}
	})
	t.Run("naive: no token to check", func(t *testing.T) {
		w := newWorld(t)
		res := &fenced{}
		p := newPausing(&epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		na := w.newNaive("a", p)
		late := make(chan error, 1)
		na.onElected = func(context.Context) {
			res.write(0, "a-1")
			<-p.resume
			late <- res.write(0, "a-2")
		}
		na.Start(w.ctx)
		w.awaitRec("a", na.rec, electortest.Acquired, 1)
		w.clk.Add(renewPeriod)
		recv(w, p.paused)
		nb := w.newNaive("b", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		bWrote := make(chan error, 1)
		nb.onElected = func(context.Context) { bWrote <- res.write(0, "b-1") }
		w.clk.Add(ttl) // 13s
		nb.Start(w.ctx)
		if err := recv(w, bWrote); err != nil {
			t.Fatal(err)
		}
		close(p.resume)
		if err := recv(w, late); err != nil {
			t.Fatalf("naive: stale write rejected (%v); want the failure mode", err)
		}
		t.Logf("naive: accepted %v (the failure mode: a-2 after b-1)", res.accepted())
	})
}
