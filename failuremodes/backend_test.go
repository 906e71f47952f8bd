package failuremodes_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// TestFM10StaleReadCannotSteal checks FM-10, stale read lets an acquire steal
// a live claim: a stale read must never let an acquisition succeed.
//
// Trigger: a read answered from a stale replica (Route53's eventual
// consistency): it shows the claim expired although its holder renewed it,
// with the revision still current (a keep-alive does not change it).
//
// A naive elector: acquiring is read-then-write: the stale read says
// "expired", the write is conditioned on the revision read, which still
// matches, and it succeeds. Two leaders.
//
// Tenure: acquiring is one conditional write (create-if-absent); reads only
// time the next attempt. A stale read can delay an attempt, never make one
// succeed.
func TestFM10StaleReadCannotSteal(t *testing.T) {
	t.Run("tenure acquires by one conditional write", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a").start()
		a.await(electortest.Elected, 1)
		w.step(leaderTimers, time.Second/2)
		b := w.newNode("b")
		stale, err := b.f.StaleReads(w.ctx) // b's replica stops at 0.5s
		if err != nil {
			t.Fatal(err)
		}
		b.start()
		b.await(electortest.Lost, 1)
		for range 3 * ttl / time.Second {
			w.step(leaderTimers+followerTimers, time.Second)
			onlyLeader(t, w, "a", a, b)
		}
		// What b's replica says: a's claim, at its current revision,
		// expired long ago.
		hs, err := b.locker.Holders(w.ctx, key)
		if err != nil || len(hs) != 1 || hs[0].Remaining > 0 || hs[0].Revision != w.holders()[0].Revision {
			t.Fatalf("b's stale Holders = %+v, %v; want a's claim at its current revision, expired", hs, err)
		}
		if _, err := b.locker.TryAcquire(w.ctx, key, b.e.Holder(), ttl); !errors.Is(err, backends.ErrHeld) {
			t.Errorf("b's TryAcquire after a stale read = %v, want ErrHeld", err)
		}
		if stale.Hits() == 0 {
			t.Error("the stale snapshot was never read")
		}
	})
	t.Run("naive read-then-write steals", func(t *testing.T) {
		w := newWorld(t)
		na := w.newNaive("a", &ttlLocker{store: w.naiveStore(), key: key, ttl: ttl})
		na.Start(w.ctx) // ticks at 0s, 3s, 6s, ...: keep-alives, revision unchanged
		w.awaitRec("a", na.rec, electortest.Acquired, 1)
		w.clk.Add(time.Second / 2)
		sb := w.naiveStore()
		if _, err := sb.StaleReads(w.ctx); err != nil {
			t.Fatal(err)
		}
		nb := w.newNaive("b", &ttlLocker{store: sb, key: key, ttl: ttl})
		nb.Start(w.ctx) // ticks at 0.5s, 3.5s, ...
		w.awaitRec("b", nb.rec, electortest.Lost, 1)
		for i := 1; i <= 4 && !nb.IsLeader(); i++ {
			w.clk.Add(5 * time.Second / 2) // a renews at 3i s
			w.awaitRec("a", na.rec, electortest.Renewed, i)
			w.clk.Add(time.Second / 2) // b reads its replica at 3i+0.5 s
			if _, err := nb.rec.WaitAny(w.ctx, []electortest.Kind{electortest.Lost, electortest.Acquired}, i+1); err != nil {
				t.Fatal(err)
			}
		}
		if got := leaders(na, nb); len(got) != 2 {
			t.Fatalf("naive at %v: leaders = %v, want the failure mode [a b]", w.elapsed(), got)
		}
	})
}

// TestFM11SustainedThrottling checks FM-11, rate limits exhausted: throttling
// of every call for less than a lease must neither demote the leader nor make
// anyone hammer the backend.
//
// Trigger: the backend throttles every call for a while (Route53's five
// changes per second per zone).
//
// A naive elector: every node's renewal fails and every leader demotes:
// nobody leads until the throttling stops.
//
// Tenure: throttling (backends.ErrThrottled) is transient: the leader retries
// with backoff, at a bounded rate, and keeps leading if a retry succeeds
// before its deadline; followers back off too.
func TestFM11SustainedThrottling(t *testing.T) {
	const from, until = time.Second, 15 * time.Second / 2
	t.Run("tenure backs off and keeps leading", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a").start()
		a.await(electortest.Elected, 1)
		w.step(leaderTimers, from)
		throttleA := a.f.Fail(faults.AllOps, 0, backends.ErrThrottled)
		b := w.newNode("b")
		throttleB := b.f.Fail(faults.AllOps, 0, backends.ErrThrottled)
		b.start()
		b.await(electortest.Lost, 1)
		for w.elapsed() < 12*time.Second {
			w.step(leaderTimers+followerTimers, 50*time.Millisecond)
			if w.elapsed() >= until && throttleA.Hits() > 0 {
				throttleA.Remove()
				throttleB.Remove()
			}
			onlyLeader(t, w, "a", a, b)
		}
		if n := a.rec.Count(electortest.Demoted); n != 0 {
			t.Errorf("a demoted %d times under throttling shorter than its lease", n)
		}
		for _, ev := range append(a.rec.All(electortest.RenewFail), b.rec.All(electortest.Lost)...) {
			if ev.At.Sub(epoch) < until && ev.Class != backends.ClassTransient {
				t.Errorf("a throttled call was classified %v at %v, want transient", ev.Class, ev.At.Sub(epoch))
			}
		}
		// Renewals at 3s, 4s and 6s were refused, the one at 7.95s passed;
		// b tried at 1s, 2s, 4s, then waited for the expiry.
		if got := throttleA.Hits(); got > 4 {
			t.Errorf("a made %d throttled calls in %v, want at most 4", got, until-from)
		}
		if got := throttleB.Hits(); got > 4 {
			t.Errorf("b made %d throttled calls in %v, want at most 4", got, until-from)
		}
	})
	t.Run("naive goes leaderless", func(t *testing.T) {
		w := newWorld(t)
		sa, sb := w.naiveStore(), w.naiveStore()
		na := w.newNaive("a", &epochLocker{store: sa, key: key, ttl: ttl, wall: w.clk})
		na.Start(w.ctx)
		w.awaitRec("a", na.rec, electortest.Acquired, 1)
		w.clk.Add(from)
		sa.Fail(faults.AllOps, 0, backends.ErrThrottled)
		sb.Fail(faults.AllOps, 0, backends.ErrThrottled)
		nb := w.newNaive("b", &epochLocker{store: sb, key: key, ttl: ttl, wall: w.clk})
		nb.Start(w.ctx)
		w.awaitRec("b", nb.rec, electortest.Lost, 1)
		w.clk.Add(2 * time.Second) // 3s
		w.awaitRec("a", na.rec, electortest.Dropped, 1)
		if got := leaders(na, nb); len(got) != 0 {
			t.Fatalf("naive: leaders = %v, want the failure mode (none)", got)
		}
	})
}

// holderIDs are ids a record format might split on or mangle.
var holderIDs = []string{
	"node 1",
	"host-1 pid 42",
	"日本/ノード",
	"a/b/c",
	`quote " and \ backslash`,
	"tab\tand\nnewline",
	"emoji 🚀",
	"'single' `back`",
	strings.Repeat("é", 200),
}

// TestFM12AnyHolderIDRoundTrips checks FM-12, owner id with a space: a holder
// id with spaces (or any other character) must round-trip through every
// backend.
//
// Trigger: an owner id with a space (from a host name), or any other
// character a record format splits on.
//
// A naive elector: the record parser splits on the space; the owner it reads
// back is not the one it wrote, so the claim can never be renewed or
// released.
//
// Tenure: a holder id may be any valid UTF-8 (spaces, unicode, slashes,
// quotes): claims are encoded as JSON and every id round-trips on every
// backend available in-process (memstore, filestore).
func TestFM12AnyHolderIDRoundTrips(t *testing.T) {
	stores := []struct {
		name string
		open func(t *testing.T, clk *clocktest.Clock) backends.Store
	}{
		{"memstore", func(t *testing.T, clk *clocktest.Clock) backends.Store { return memstore.New(memstore.WithClock(clk)) }},
		{"filestore", func(t *testing.T, clk *clocktest.Clock) backends.Store {
			s, err := filestore.Open(context.Background(), t.TempDir(), filestore.WithClock("fm-boot", clk))
			if err != nil {
				t.Fatal(err)
			}
			return s
		}},
	}
	for _, st := range stores {
		for _, id := range holderIDs {
			t.Run(st.name+"/"+id, func(t *testing.T) {
				w := newWorldOn(t, func(clk *clocktest.Clock) backends.Store { return st.open(t, clk) })
				a := w.newNode(id).start()
				term := a.await(electortest.Elected, 1).Term
				if term.Holder.ID != id {
					t.Errorf("term holder id = %q, want %q", term.Holder.ID, id)
				}
				if hs := w.holders(); len(hs) != 1 || hs[0].Holder != a.e.Holder() {
					t.Fatalf("stored holders = %+v, want %v", hs, a.e.Holder())
				}
				obs := w.newNode("observer").start()
				obs.await(electortest.Lost, 1)
				if ev := obs.await(electortest.NewLeader, 1); ev.Other != a.e.Holder() {
					t.Errorf("observer saw leader %v, want %v", ev.Other, a.e.Holder())
				}
				w.step(leaderTimers+followerTimers, renewPeriod)
				a.await(electortest.Renewed, 1)
				if err := a.e.Stop(w.ctx); err != nil {
					t.Fatalf("Stop: %v", err)
				}
				if hs := w.holders(); len(hs) != 0 {
					t.Errorf("holders after Stop = %+v, want released", hs)
				}
			})
		}
	}
	t.Run("naive cannot renew or release node 1", func(t *testing.T) {
		w := newWorld(t)
		s := w.naiveStore()
		n := w.newNaive("node 1", &epochLocker{store: s, key: key, ttl: ttl, wall: w.clk})
		n.Start(w.ctx)
		w.awaitRec("node 1", n.rec, electortest.Acquired, 1)
		w.clk.Add(renewPeriod)
		w.awaitRec("node 1", n.rec, electortest.Dropped, 1)
		n.mu.Lock()
		n.leader = true // as if Stop had read "leader": it tries to release
		n.mu.Unlock()
		if err := n.Stop(w.ctx); err == nil {
			t.Fatalf("naive: Stop released a claim it cannot parse")
		}
		w.clk.Add(10 * ttl)
		other := w.newNaive("other", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		other.Start(w.ctx)
		w.awaitRec("other", other.rec, electortest.Lost, 1)
		if _, err := s.Inner().Get(w.ctx, key); err != nil {
			t.Fatalf("naive: the claim is gone (%v), want the failure mode: stuck for good", err)
		}
	})
}

// TestFM13ThrottledRenewal checks FM-13, throttling causes a false demotion:
// a throttled renewal must not demote.
//
// Trigger: one throttled renewal (DynamoDB's
// ProvisionedThroughputExceededException).
//
// A naive elector: treated as a failed renewal: the leader demotes.
//
// Tenure: transient; retried; no demotion before the deadline.
func TestFM13ThrottledRenewal(t *testing.T) {
	t.Run("tenure retries", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a").start()
		a.await(electortest.Elected, 1)
		a.f.Fail(faults.OpKeepAlive, 1, backends.ErrThrottled)
		w.step(leaderTimers, renewPeriod)
		if ev := a.await(electortest.RenewFail, 1); ev.Class != backends.ClassTransient {
			t.Errorf("throttled renewal class = %v, want transient", ev.Class)
		}
		w.step(leaderTimers, retryPeriod)
		a.await(electortest.Renewed, 1)
		if n := a.rec.Count(electortest.Demoted); n != 0 || !a.IsLeader() {
			t.Errorf("after one throttled renewal: demotions = %d, IsLeader = %v; want 0, true", n, a.IsLeader())
		}
	})
	t.Run("naive demotes", func(t *testing.T) {
		w := newWorld(t)
		s := w.naiveStore()
		n := w.newNaive("n", &epochLocker{store: s, key: key, ttl: ttl, wall: w.clk})
		n.Start(w.ctx)
		w.awaitRec("n", n.rec, electortest.Acquired, 1)
		s.Fail(faults.Reads, 1, backends.ErrThrottled)
		w.clk.Add(renewPeriod)
		w.awaitRec("n", n.rec, electortest.Dropped, 1)
		if n.IsLeader() {
			t.Fatal("naive: still leader")
		}
	})
}

// TestFM14DuplicateIdentity checks FM-14, duplicate owner ids: two processes
// configured with the same identity must be two holders, and the duplicate
// must be reported.
//
// Trigger: two processes configured with the same owner id.
//
// A naive elector: each one's condition "owner = me" is satisfied by the
// other's claim: both renew it, both lead. No mutual exclusion.
//
// Tenure: a holder is the configured identity plus a per-instance nonce. The
// two are different holders: exactly one leads, neither can renew or release
// the other's claim, and the follower reports the duplicate (the
// Trace.DuplicateIdentity hook and a log line).
func TestFM14DuplicateIdentity(t *testing.T) {
	const id = "same"
	t.Run("tenure tells them apart", func(t *testing.T) {
		w := newWorld(t)
		same := withConfig(func(c *elector.Config) { c.Identity = id })
		a := w.newNode("a", same).start()
		a.await(electortest.Elected, 1)
		b := w.newNode("b", same).start()
		b.await(electortest.Lost, 1)
		if ev := b.await(electortest.Duplicate, 1); ev.Other != a.e.Holder() {
			t.Errorf("b reported duplicate %v, want %v", ev.Other, a.e.Holder())
		}
		if a.e.Holder() == b.e.Holder() {
			t.Fatalf("two electors with identity %q share holder %v", id, a.e.Holder())
		}
		for range 3 * ttl / time.Second {
			w.step(leaderTimers+followerTimers, time.Second)
			onlyLeader(t, w, "a", a, b)
		}
		if n := b.rec.Count(electortest.Duplicate); n != 1 {
			t.Errorf("b reported the duplicate %d times, want once", n)
		}
		if n := b.f.Calls(faults.OpKeepAlive | faults.OpCompareAndDelete); n != 0 {
			t.Errorf("b renewed or released %d times while a held the claim", n)
		}
		if err := a.e.Stop(w.ctx); err != nil {
			t.Fatal(err)
		}
		// b's next attempt is timed to the expiry it last observed.
		w.stepUntil(followerTimers, 100*time.Millisecond, func() bool { return b.rec.Count(electortest.Elected) > 0 })
		second := b.await(electortest.Elected, 1).Term
		if second.Holder != b.e.Holder() || second.Token <= a.rec.All(electortest.Elected)[0].Term.Token {
			t.Errorf("b's term = %+v, want b's holder and a higher token", second)
		}
	})
	t.Run("naive: both lead", func(t *testing.T) {
		w := newWorld(t)
		na := w.newNaive(id, &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		na.Start(w.ctx)
		w.awaitRec("a", na.rec, electortest.Acquired, 1)
		nb := w.newNaive(id, &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		nb.Start(w.ctx)
		w.awaitRec("b", nb.rec, electortest.Acquired, 1)
		if !na.IsLeader() || !nb.IsLeader() {
			t.Fatalf("naive: IsLeader a=%v b=%v, want the failure mode (both)", na.IsLeader(), nb.IsLeader())
		}
	})
}
