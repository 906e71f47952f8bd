package failuremodes_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// transferModes are the two ways a StoreLocker makes a transfer: one
// transaction (memstore declares CapTxn), or a reservation written before
// the claim is deleted (the same store with its Txn hidden, as filestore,
// kube and nats are).
var transferModes = []struct {
	name  string
	store func(w *world) backends.Store
}{
	{"txn", func(w *world) backends.Store { return w.store }},
	{"steps", func(w *world) backends.Store { return faults.Hide(w.store, backends.CapTxn) }},
}

// transferWorld starts a, b and c, all watching, with a the leader and b
// and c followers that have seen it hold the claim.
func transferWorld(t *testing.T, store func(w *world) backends.Store) (w *world, a, b, c *node) {
	t.Helper()
	return transferWorldWith(t, store, nil)
}

// transferWorldWith is transferWorld with setup run on a before it starts.
func transferWorldWith(t *testing.T, store func(w *world) backends.Store, setup func(w *world, a *node)) (w *world, a, b, c *node) {
	t.Helper()
	w = newWorld(t)
	st := store(w)
	mk := func(name string) *node {
		return w.newNode(name, withWatch(), onStore(st))
	}
	a = mk("a")
	if setup != nil {
		setup(w, a)
	}
	a.start()
	a.await(electortest.Elected, 1)
	b, c = mk("b").start(), mk("c").start()
	b.await(electortest.Lost, 1)
	c.await(electortest.Lost, 1)
	return w, a, b, c
}

// overlapWatch records, at every event of the nodes, how many of them
// report IsLeader, and returns a function giving the largest count seen.
// It runs until the test ends.
func overlapWatch(w *world, nodes ...*node) func() int {
	var mu sync.Mutex
	most := 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w.t.Cleanup(func() { cancel(); <-done })
	check := func() {
		n := 0
		for _, nd := range nodes {
			if nd.IsLeader() {
				n++
			}
		}
		mu.Lock()
		most = max(most, n)
		mu.Unlock()
	}
	go func() {
		defer close(done)
		for {
			cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}}
			for _, nd := range nodes {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(nd.rec.Changed())})
			}
			check()
			if i, _, _ := reflect.Select(cases); i == 0 {
				return
			}
		}
	}()
	return func() int {
		check()
		mu.Lock()
		defer mu.Unlock()
		return most
	}
}

// TestFM34TransferMovesTheClaim checks FM-34, planned handover to a named
// candidate: the claim moves to it, never to a third one, never with two
// leaders.
//
// Trigger: a deploy replaces the leader's process; the operator (or a
// preference) names the candidate that should lead next.
//
// A naive elector: it can only resign and let every follower race; the
// claim goes to whoever is fastest (often a process about to be replaced
// too), and a leader that resigns before its work has stopped overlaps
// with the winner.
//
// Tenure: Transfer ends the term first (IsLeader false, the leader's
// context cancelled, OnElected awaited), then releases the claim reserved
// for the target in one step (a transaction, or the reservation written
// before the claim is deleted); the third candidate is refused, the target
// leads with a greater token, and the old leader sits the reservation out.
func TestFM34TransferMovesTheClaim(t *testing.T) {
	for _, mode := range transferModes {
		t.Run(mode.name, func(t *testing.T) {
			// a's work reads the claim once its context is done, before
			// it returns: the claim must still be a's then.
			stopped := make(chan []backends.Claim, 1)
			w, a, b, c := transferWorldWith(t, mode.store, func(w *world, a *node) {
				a.rec.SetWork(func(ctx context.Context, _ elector.Term) {
					<-ctx.Done()
					stopped <- w.holders()
				})
			})
			most := overlapWatch(w, a, b, c)
			first := a.rec.Nth(electortest.Elected, 1).Term
			lostBefore := c.rec.Count(electortest.Lost)
			if err := a.e.Transfer(w.ctx, "b"); err != nil {
				t.Fatalf("Transfer(b): %v", err)
			}
			if hs := recv(w, stopped); len(hs) != 1 || hs[0].Holder != a.e.Holder() {
				t.Errorf("holders when a's context was done = %+v, want a still holding: the claim goes only after the work", hs)
			}
			cause := a.await(electortest.OnDemoted, 1).Cause
			if cause.Reason != elector.ReasonTransferred || cause.Err != nil {
				t.Errorf("a's OnDemoted cause = %v, want transferred with no error", cause)
			}
			got := b.await(electortest.Elected, 1).Term
			if got.Token <= first.Token {
				t.Errorf("b leads at token %d, want above a's %d", got.Token, first.Token)
			}
			if !got.AcquiredAt.Equal(w.clk.Now()) {
				t.Errorf("b acquired at %v, want at the transfer (%v), with no time passing", got.AcquiredAt, w.clk.Now())
			}
			// c saw the claim change too; its next attempt met the
			// reservation or b's claim.
			c.await(electortest.Lost, lostBefore+1)
			if n := c.rec.Count(electortest.Elected); n != 0 {
				t.Errorf("c was elected %d times during a transfer to b", n)
			}
			if n := a.rec.Count(electortest.Elected); n != 1 {
				t.Errorf("a was elected %d times, want once: it must not take back what it gave", n)
			}
			if n := most(); n > 1 {
				t.Errorf("%d nodes reported IsLeader at once", n)
			}
		})
	}
}

// TestFM35TransferLeaderDiesMidway checks FM-35, the leader dies midway
// through a transfer: the claim goes to the target or, past the bound, to
// anyone; never to two.
//
// Trigger: the leader crashes, or loses the store, between the steps of
// its transfer, or the answer to its transaction is lost.
//
// A naive elector: a handover in two writes (mark, then release) that
// dies in between leaves either a claim no one may take or one everyone
// races for.
//
// Tenure: where the steps are one transaction, a lost answer leaves the
// transfer done (the fallback release finds nothing to release). Where
// they are two writes, the reservation is written first: a leader that
// dies before deleting its claim leaves the claim to expire, and then only
// the target may take it until the reservation ends (the claim's create
// is the only way in, so there is never a second holder).
func TestFM35TransferLeaderDiesMidway(t *testing.T) {
	t.Run("txn: the answer is lost", func(t *testing.T) {
		w, a, b, c := transferWorld(t, transferModes[0].store)
		most := overlapWatch(w, a, b, c)
		first := a.rec.Nth(electortest.Elected, 1).Term
		a.f.DropResponse(faults.OpTxn, 1)
		if err := a.e.Transfer(w.ctx, "b"); err == nil {
			t.Errorf("Transfer with its answer lost = nil, want the error")
		}
		if got := b.await(electortest.Elected, 1).Term; got.Token <= first.Token {
			t.Errorf("b leads at token %d, want above %d", got.Token, first.Token)
		}
		if n := c.rec.Count(electortest.Elected); n != 0 {
			t.Errorf("c was elected %d times", n)
		}
		if n := most(); n > 1 {
			t.Errorf("%d nodes reported IsLeader at once", n)
		}
	})
	t.Run("steps: dies after reserving", func(t *testing.T) {
		w, a, b, c := transferWorld(t, transferModes[1].store)
		most := overlapWatch(w, a, b, c)
		first := a.rec.Nth(electortest.Elected, 1).Term
		w.step(leaderTimers+1+1+1, time.Second) // a leads (renew at 3s); b, c wait on their watch; the store's timer
		// a reserves, then its store is gone for good: its delete, its
		// fallback release and its later attempts all fail.
		a.f.Fail(faults.OpCompareAndDelete|faults.OpKeepAlive|opAcquire, -1, backends.ErrUnavailable)
		if err := a.e.Transfer(w.ctx, "b"); !errors.Is(err, backends.ErrUnavailable) {
			t.Errorf("Transfer with the delete failing = %v, want ErrUnavailable", err)
		}
		// a's claim stays until it expires at 10s; nobody takes it before.
		w.stepUntil(1, 100*time.Millisecond, func() bool {
			return b.rec.Count(electortest.Elected) > 0 || w.elapsed() > ttl+time.Second
		})
		got := b.await(electortest.Elected, 1).Term
		if got.Token <= first.Token {
			t.Errorf("b leads at token %d, want above %d", got.Token, first.Token)
		}
		if at := got.AcquiredAt.Sub(epoch); at < ttl {
			t.Errorf("b acquired at %v, before a's claim expired at %v", at, ttl)
		}
		if n := c.rec.Count(electortest.Elected); n != 0 {
			t.Errorf("c was elected %d times", n)
		}
		if n := most(); n > 1 {
			t.Errorf("%d nodes reported IsLeader at once", n)
		}
	})
}

// TestFM36TransferTargetNeverComes checks FM-36, the target of a transfer
// is dead (or never existed): the claim is reserved for it only for the
// stated bound, then open to all.
//
// Trigger: the target crashed after the transfer began, or the name was
// wrong.
//
// A naive elector: a claim marked for a dead target stays unclaimed until
// an operator clears it.
//
// Tenure: the reservation is an entry with the TTL Config.TransferBound;
// until it ends every other candidate is refused (a *ReservedError,
// watched, not polled), after it one of them leads at a greater token.
func TestFM36TransferTargetNeverComes(t *testing.T) {
	for _, mode := range transferModes {
		t.Run(mode.name, func(t *testing.T) {
			w, a, b, c := transferWorld(t, mode.store)
			most := overlapWatch(w, a, b, c)
			first := a.rec.Nth(electortest.Elected, 1).Term
			if err := a.e.Transfer(w.ctx, "ghost"); err != nil {
				t.Fatalf("Transfer(ghost): %v", err)
			}
			start := w.clk.Now()
			// At rest: a sits the reservation out, b and c wait on their
			// watch, and the store times the reservation's expiry.
			w.stepUntil(1+1+1+1, 250*time.Millisecond, func() bool {
				return b.rec.Count(electortest.Elected)+c.rec.Count(electortest.Elected)+a.rec.Count(electortest.Elected) > 1
			})
			var next electortest.Event
			for _, n := range []*node{a, b, c} {
				for _, ev := range n.rec.All(electortest.Elected) {
					if ev.Term.Token != first.Token {
						next = ev
					}
				}
			}
			// Each candidate waited out the reservation instead of
			// answering the others' attempts with its own: a few
			// attempts each (meeting the other's brief create on a store
			// without transactions, then the reservation), where
			// answering every signal made hundreds.
			for _, n := range []*node{b, c} {
				if got := n.rec.Count(electortest.Lost); got > 10 {
					t.Errorf("%s made %d failed attempts during the reservation, want a few: %s", n.name, got, n.rec.EventLog())
				}
			}
			if waited := next.Term.AcquiredAt.Sub(start); waited < ttl {
				t.Errorf("a candidate led %v after a transfer to a ghost, want no sooner than the bound %v", waited, ttl)
			}
			if next.Term.Token <= first.Token {
				t.Errorf("the next leader's token %d is not above %d", next.Term.Token, first.Token)
			}
			if n := most(); n > 1 {
				t.Errorf("%d nodes reported IsLeader at once", n)
			}
		})
	}
}

// TestFM37TransferStoreFails checks FM-37, the store fails during a
// transfer: the leader has stopped acting, and the claim is left as Stop
// leaves it.
//
// Trigger: the store is unreachable when the leader hands over.
//
// A naive elector: a handover that errors out keeps leading (work
// resumed under a claim the store may already have passed on), or retries
// the handover while still acting.
//
// Tenure: the term ended before the store was asked, and it is not
// revived. If the transfer's write fails, a plain release follows; if that
// fails too, the claim expires. Either way Transfer and OnDemoted report
// the error, and whoever leads next has a greater token.
func TestFM37TransferStoreFails(t *testing.T) {
	t.Run("the transfer fails, the release works", func(t *testing.T) {
		w, a, b, c := transferWorld(t, transferModes[0].store)
		most := overlapWatch(w, a, b, c)
		first := a.rec.Nth(electortest.Elected, 1).Term
		a.f.Fail(faults.OpTxn, 1, backends.ErrUnavailable)
		if err := a.e.Transfer(w.ctx, "b"); !errors.Is(err, backends.ErrUnavailable) {
			t.Errorf("Transfer with the store failing = %v, want ErrUnavailable", err)
		}
		if a.e.IsLeader() {
			t.Errorf("a leads after a failed transfer")
		}
		cause := a.await(electortest.OnDemoted, 1).Cause
		if cause.Reason != elector.ReasonTransferred || !errors.Is(cause.Err, backends.ErrUnavailable) {
			t.Errorf("a's OnDemoted cause = %v, want transferred with the store's error", cause)
		}
		// Released without a reservation: b or c takes it now.
		w.stepUntil(1, 100*time.Millisecond, func() bool {
			return b.rec.Count(electortest.Elected)+c.rec.Count(electortest.Elected) > 0
		})
		for _, n := range []*node{b, c} {
			for _, ev := range n.rec.All(electortest.Elected) {
				if ev.Term.Token <= first.Token {
					t.Errorf("%s leads at token %d, want above %d", n.name, ev.Term.Token, first.Token)
				}
			}
		}
		if n := most(); n > 1 {
			t.Errorf("%d nodes reported IsLeader at once", n)
		}
	})
	t.Run("the store is down", func(t *testing.T) {
		w, a, b, c := transferWorld(t, transferModes[0].store)
		most := overlapWatch(w, a, b, c)
		first := a.rec.Nth(electortest.Elected, 1).Term
		a.f.Fail(faults.OpGet|faults.OpTxn|faults.OpCompareAndDelete|faults.OpKeepAlive|opAcquire, -1, backends.ErrUnavailable)
		if err := a.e.Transfer(w.ctx, "b"); !errors.Is(err, backends.ErrUnavailable) {
			t.Errorf("Transfer with the store down = %v, want ErrUnavailable", err)
		}
		w.stepUntil(1, 250*time.Millisecond, func() bool {
			return b.rec.Count(electortest.Elected)+c.rec.Count(electortest.Elected) > 0
		})
		for _, n := range []*node{b, c} {
			for _, ev := range n.rec.All(electortest.Elected) {
				if ev.Term.Token <= first.Token || ev.Term.AcquiredAt.Sub(epoch) < ttl {
					t.Errorf("%s leads at token %d at %v, want above %d and not before a's claim expired at %v", n.name, ev.Term.Token, ev.Term.AcquiredAt.Sub(epoch), first.Token, ttl)
				}
			}
		}
		if n := most(); n > 1 {
			t.Errorf("%d nodes reported IsLeader at once", n)
		}
	})
}

// TestFM38TwoTransfersAtOnce checks FM-38, two transfers at once name two
// targets: one of them leads, never both.
//
// Trigger: an operator's transfer command and a preference (or two
// operators) hand the same claim over at the same moment.
//
// A naive elector: each handover marks the claim for its own target; both
// targets believe it theirs.
//
// Tenure: the first Transfer ends the term and the second finds no term
// to hand over (ErrNotLeader); at the store, a transfer is conditioned on
// the claim's revision, so a stale claim cannot reserve for anyone
// (ErrNotHolder).
func TestFM38TwoTransfersAtOnce(t *testing.T) {
	for _, mode := range transferModes {
		t.Run(mode.name, func(t *testing.T) {
			w, a, b, c := transferWorld(t, mode.store)
			most := overlapWatch(w, a, b, c)
			stale := w.holders()
			errs := make(chan error, 2)
			for _, to := range []string{"b", "c"} {
				go func() { errs <- a.e.Transfer(w.ctx, to) }()
			}
			got := []error{recv(w, errs), recv(w, errs)}
			slices.SortFunc(got, func(x, y error) int {
				if x == nil {
					return -1
				}
				if y == nil {
					return 1
				}
				return 0
			})
			if got[0] != nil || !errors.Is(got[1], elector.ErrNotLeader) {
				t.Fatalf("two transfers at once = %v, want one nil and one ErrNotLeader", got)
			}
			w.stepUntil(1, 100*time.Millisecond, func() bool {
				return b.rec.Count(electortest.Elected)+c.rec.Count(electortest.Elected) > 0
			})
			w.step(1, ttl/2)
			if nb, nc := b.rec.Count(electortest.Elected), c.rec.Count(electortest.Elected); nb+nc != 1 {
				t.Errorf("b was elected %d times and c %d times, want one of them once", nb, nc)
			}
			// The stale claim a held cannot transfer at the store.
			if err := a.locker.(backends.Transferer).Transfer(w.ctx, stale[0], "a", ttl); !errors.Is(err, backends.ErrNotHolder) {
				t.Errorf("a transfer of the stale claim = %v, want ErrNotHolder", err)
			}
			if n := most(); n > 1 {
				t.Errorf("%d nodes reported IsLeader at once", n)
			}
		})
	}
}

// TestFM39RollingUpdateMovesLeadershipOnce checks FM-39, a rolling update
// bounces the leadership: replacing each of three candidates by a new
// process moves the claim once, to the first new process, not once per
// replaced process.
//
// Trigger: a deploy replaces p1, p2 and p3, one at a time, each by a new
// process started before the old one stops.
//
// A naive elector: the leader's replacement is a resign and a race; the
// winner is as likely an old process, replaced in turn, so the claim can
// move up to three times, each a drain and a race.
//
// Tenure: with Config.Candidacy, every candidate keeps a candidacy entry
// with its Priority; the new processes declare a higher one. The leader
// sees the first new process, waits SettleTime, and transfers to it; the
// later new processes have the same priority as the new leader, so
// nothing moves again, and stopping the old followers moves nothing. A
// leader stopped before the settle time has passed hands the claim to
// the preferred candidate too, instead of releasing it to a race.
func TestFM39RollingUpdateMovesLeadershipOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait int // renewal periods between a new process's start and its old one's stop
	}{
		{"each old process stopped after the settle time", 4},
		{"each old process stopped at once", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			const settle = 5 * time.Second
			cand := func(prio int64) nodeOption {
				return withConfig(func(c *elector.Config) {
					c.Candidacy, c.Priority, c.SettleTime = true, prio, settle
				})
			}
			old := []*node{
				w.newNode("p1", withWatch(), cand(1)).start(),
			}
			old[0].await(electortest.Elected, 1)
			old = append(old, w.newNode("p2", withWatch(), cand(1)).start(), w.newNode("p3", withWatch(), cand(1)).start())
			old[1].await(electortest.Lost, 1)
			old[2].await(electortest.Lost, 1)
			all := slices.Clone(old)
			// At rest: the leader's renewal and deadline timers and its
			// candidacy's, a follower's watch backstop and candidacy
			// timer, the store's expiry timer (a watch is open); a
			// leader that has just transferred holds off on one timer
			// instead of two.
			rest := func(nodes int) int { return 3 + 2*(nodes-1) + 1 }
			for i, o := range old {
				n := w.newNode(fmt.Sprintf("p%d'", i+1), withWatch(), cand(2)).start()
				all = append(all, n)
				n.await(electortest.Lost, 1)
				w.awaitDeclared(n)
				w.settle(rest(len(all) - i))
				for range tc.wait {
					w.step(rest(len(all)-i), renewPeriod)
				}
				stopped := make(chan error, 1)
				go func() { stopped <- o.e.Stop(w.ctx) }()
				if err := recv(w, stopped); err != nil {
					t.Fatalf("stopping %s: %v", o.name, err)
				}
				w.settle(rest(len(all) - i - 1))
			}
			all[3].await(electortest.Elected, 1) // p1'
			var elected []string
			for _, n := range all {
				for range n.rec.Count(electortest.Elected) {
					elected = append(elected, n.name)
				}
			}
			slices.Sort(elected)
			if want := []string{"p1", "p1'"}; !slices.Equal(elected, want) {
				t.Errorf("terms over the rolling update: %v, want %v (one change, to the first new process)", elected, want)
			}
		})
	}
}

// TestFM40FlappingPreferenceCannotBounce checks FM-40, flapping
// preferences bounce the claim: a preferred candidate that keeps coming
// and going, and candidates of equal priority, never move the claim.
//
// Trigger: a candidate that crash-loops, or a preference that changes
// faster than a handover is worth.
//
// A naive elector: a leader that hands over whenever it sees a better
// candidate moves the claim at each appearance, and two candidates that
// each prefer the other bounce it back and forth.
//
// Tenure: a candidate must stay present, at one priority, for SettleTime
// before the leader transfers to it; an absence or a new priority starts
// its time again. Only a strictly higher Priority moves the claim, so
// equals never do and no two candidates each outrank the other.
func TestFM40FlappingPreferenceCannotBounce(t *testing.T) {
	w := newWorld(t)
	const settle = 10 * time.Second
	cand := func(prio int64) nodeOption {
		return withConfig(func(c *elector.Config) {
			c.Candidacy, c.Priority, c.SettleTime = true, prio, settle
		})
	}
	a := w.newNode("a", withWatch(), cand(1)).start()
	a.await(electortest.Elected, 1)
	peer := w.newNode("peer", withWatch(), cand(1)).start() // equal: never preferred
	peer.await(electortest.Lost, 1)
	rest := func(nodes int) int { return 3 + 2*(nodes-1) + 1 }
	// A better candidate present for 6s of every 7 (its crash loop):
	// never the 10s it needs.
	for i := range 4 {
		b := w.newNode(fmt.Sprintf("b%d", i), withWatch(), cand(5)).start()
		b.await(electortest.Lost, 1)
		w.step(rest(3), 3*time.Second)
		w.step(rest(3), 3*time.Second)
		stopped := make(chan error, 1)
		go func() { stopped <- b.e.Stop(w.ctx) }()
		if err := recv(w, stopped); err != nil {
			t.Fatal(err)
		}
		w.step(rest(2), time.Second)
	}
	// Long after, with only the equal peer present, nothing has moved.
	for range 10 {
		w.step(rest(2), renewPeriod)
	}
	if n := a.rec.Count(electortest.OnDemoted); n != 0 {
		t.Errorf("a's term ended %d times (%v); want it leading still", n, a.rec.Nth(electortest.OnDemoted, 1).Cause)
	}
	if !a.e.IsLeader() {
		t.Errorf("a does not lead after flapping preferences")
	}
}

// TestTransferRequestedFromOutside checks the request a process that does
// not lead (the tenure command) leaves for the leader: at its next
// renewal the leader clears it and transfers to the named candidate, or,
// when none is named, to the candidate of highest priority; the next
// leader does not act on it again.
func TestTransferRequestedFromOutside(t *testing.T) {
	for _, tc := range []struct {
		name, to, want string
		prioB, prioC   int64 // both below a's, so no preference moves the claim
	}{{"named", "b", "b", 0, 0}, {"best", "", "c", -1, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			cand := func(prio int64) nodeOption {
				return withConfig(func(c *elector.Config) { c.Candidacy, c.Priority = true, prio })
			}
			a := w.newNode("a", withWatch(), cand(1)).start()
			first := a.await(electortest.Elected, 1).Term
			b := w.newNode("b", withWatch(), cand(tc.prioB)).start()
			c := w.newNode("c", withWatch(), cand(tc.prioC)).start()
			b.await(electortest.Lost, 1)
			c.await(electortest.Lost, 1)
			l, err := backends.NewLocker(w.store)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.RequestTransfer(w.ctx, key, tc.to, ttl); err != nil {
				t.Fatal(err)
			}
			next := map[string]*node{"b": b, "c": c}[tc.want]
			w.stepUntil(1, 250*time.Millisecond, func() bool { return next.rec.Count(electortest.Elected) > 0 })
			if got := next.await(electortest.Elected, 1).Term; got.Token <= first.Token {
				t.Errorf("%s leads at token %d, want above a's %d", tc.want, got.Token, first.Token)
			}
			if _, req, err := l.Candidates(w.ctx, key); err != nil || req != nil {
				t.Errorf("after the transfer, the request is %+v (%v), want cleared", req, err)
			}
			if cause := a.rec.Nth(electortest.OnDemoted, 1).Cause; cause.Reason != elector.ReasonTransferred {
				t.Errorf("a's term ended %v, want transferred", cause)
			}
		})
	}
}

// awaitDeclared returns once n's candidacy is listed in the store. The
// candidacy is written by a goroutine of n's Elector that reports nothing
// the recorders see, so this polls the store, yielding in between.
func (w *world) awaitDeclared(n *node) {
	w.t.Helper()
	l, err := backends.NewLocker(w.store)
	if err != nil {
		w.t.Fatal(err)
	}
	for w.ctx.Err() == nil {
		cs, _, err := l.Candidates(w.ctx, key)
		if err != nil {
			w.t.Fatal(err)
		}
		for _, c := range cs {
			if c.Holder.Nonce == n.e.Holder().Nonce {
				return
			}
		}
		runtime.Gosched()
	}
	w.t.Fatalf("%s's candidacy: not listed: %v", n.name, w.ctx.Err())
}
