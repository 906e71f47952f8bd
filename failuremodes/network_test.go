package failuremodes_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
	"github.com/tenure-go/tenure/lifecycle"
)

// advance moves the clock by d in steps of at most step, yielding between
// steps, and calls check after each. It does not wait for timers: it is for
// stretches where the participants' timer counts vary and the checks hold
// whatever their goroutines are doing.
func (w *world) advance(d, step time.Duration, check func()) {
	w.t.Helper()
	for end := w.clk.Now().Add(d); w.clk.Now().Before(end); {
		w.clk.Add(min(step, end.Sub(w.clk.Now())))
		runtime.Gosched()
		check()
	}
}

// TestFM15PartitionFromBackend checks FM-15, partition from the backend: a
// leader cut off from the backend leads until its term's end (CancelLead
// before its local deadline) and not a moment longer; a follower that can
// reach the backend takes over.
//
// Trigger: the leader loses connectivity to the backend: calls fail, or hang
// without an answer.
//
// A naive elector: failing calls demote the leader at once although its lease
// still runs (a leaderless gap until it expires); hanging calls, with no
// timeout, wedge it as a leader forever while another node takes over after
// the TTL.
//
// Tenure: each request is bounded by RenewTimeout; the leader keeps leading
// until its term's end (CancelLead before its local deadline) and stops
// exactly then, before the claim expires at the backend; a follower that can
// reach the backend takes over right after the expiry. When the partition
// heals the old leader follows.
func TestFM15PartitionFromBackend(t *testing.T) {
	t.Run("tenure leads to its term's end, then hands over", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a").start()
		term := a.await(electortest.Elected, 1).Term
		b := w.newNode("b").start()
		b.await(electortest.Lost, 1) // b tries next at the expiry it saw: 10.001s
		w.step(leaderTimers+followerTimers, time.Second)
		cut := a.f.Partition(faults.PartitionBlock)
		end := term.Deadline.Add(-cancelLead)
		// Until 50ms before its term's end a leads, renewals hanging and
		// retried.
		for w.clk.Now().Before(end.Add(-50 * time.Millisecond)) {
			w.step(leaderTimers+followerTimers, 50*time.Millisecond)
			onlyLeader(t, w, "a", a, b)
		}
		if cut.Hits() < 2 {
			t.Errorf("a tried to renew %d times while partitioned, want at least 2", cut.Hits())
		}
		// From its term's end on a does not lead; b takes over after the
		// claim's expiry, never overlapping a.
		w.advance(ttl+time.Second-w.elapsed(), 10*time.Millisecond, func() {
			if got := leaders(a, b); len(got) > 1 || (a.IsLeader() && !w.clk.Now().Before(end)) {
				t.Fatalf("at %v: leaders = %v (a's term ends at %v)", w.elapsed(), got, end.Sub(epoch))
			}
		})
		if ev := a.await(electortest.Demoted, 1); ev.Cause.Reason != elector.ReasonExpired {
			t.Errorf("a's term ended with %v, want expired", ev.Cause)
		}
		if ev := b.await(electortest.Elected, 1); ev.Term.AcquiredAt.Before(epoch.Add(ttl)) {
			t.Errorf("b acquired at %v, before a's claim expired", ev.Term.AcquiredAt.Sub(epoch))
		}
		// Healed, a follows.
		cut.Remove()
		w.stepUntil(0, 500*time.Millisecond, func() bool {
			for _, ev := range a.rec.All(electortest.Lost) {
				if ev.Class == backends.ClassLost {
					return true
				}
			}
			return false
		})
		onlyLeader(t, w, "b", a, b)
	})
	t.Run("naive demotes at the first failed call", func(t *testing.T) {
		w := newWorld(t)
		sa := w.naiveStore()
		na := w.newNaive("a", &epochLocker{store: sa, key: key, ttl: ttl, wall: w.clk})
		na.Start(w.ctx)
		w.awaitRec("a", na.rec, electortest.Acquired, 1)
		sa.Partition(faults.PartitionFail)
		w.clk.Add(renewPeriod)
		w.awaitRec("a", na.rec, electortest.Dropped, 1)
		if na.IsLeader() {
			t.Fatal("naive: still leader")
		}
		t.Logf("naive: leaderless from %v although its claim runs to 10s (the failure mode)", w.elapsed())
	})
	t.Run("naive hangs as leader", func(t *testing.T) {
		w := newWorld(t)
		sa := w.naiveStore()
		na := w.newNaive("a", &epochLocker{store: sa, key: key, ttl: ttl, wall: w.clk})
		na.Start(w.ctx)
		w.awaitRec("a", na.rec, electortest.Acquired, 1)
		cut := sa.Partition(faults.PartitionBlock)
		defer cut.Remove() // lets the hung call return at the end
		w.clk.Add(time.Second / 2)
		nb := w.newNaive("b", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		nb.Start(w.ctx) // ticks at 0.5s, 3.5s, ..., 12.5s
		w.awaitRec("b", nb.rec, electortest.Lost, 1)
		w.clk.Add(5 * time.Second / 2) // 3s: a's renewal hangs
		if err := cut.AwaitHolding(w.ctx, 1); err != nil {
			t.Fatal(err)
		}
		for i, d := range []time.Duration{time.Second / 2, 3 * time.Second, 3 * time.Second} { // 3.5s, 6.5s, 9.5s
			w.clk.Add(d)
			w.awaitRec("b", nb.rec, electortest.Lost, i+2)
		}
		w.clk.Add(3 * time.Second) // 12.5s
		w.awaitRec("b", nb.rec, electortest.Acquired, 1)
		if got := leaders(na, nb); len(got) != 2 {
			t.Fatalf("naive: leaders = %v, want the failure mode [a b]", got)
		}
	})
}

// TestFM16StopBoundedWhenReleaseHangs checks FM-16, Stop hangs on a slow
// Release: Stop must return in bounded time when the backend does not answer.
//
// Trigger: Stop while the backend is slow or unreachable.
//
// A naive elector: Release has no timeout of its own: Stop blocks as long as
// the backend does.
//
// Tenure: Stop, and every Release, are bounded (ReleaseTimeout, and Stop's
// own bound of RenewTimeout + DrainTimeout + ReleaseTimeout); an unreleased
// claim is left to expire.
func TestFM16StopBoundedWhenReleaseHangs(t *testing.T) {
	t.Run("tenure: release times out", func(t *testing.T) {
		w := newWorld(t)
		a := w.newNode("a").start()
		a.await(electortest.Elected, 1)
		cut := a.f.Partition(faults.PartitionBlock)
		stopped := make(chan error, 1)
		go func() { stopped <- a.e.Stop(w.ctx) }()
		if err := cut.AwaitHolding(w.ctx, 1); err != nil { // the release hangs
			t.Fatal(err)
		}
		start := w.elapsed()
		w.step(2, relTimeout) // the release's timeout and Stop's bound
		if err := recv(w, stopped); err != nil {
			t.Errorf("Stop = %v, want nil once the release timed out", err)
		}
		if took := w.elapsed() - start; took > relTimeout {
			t.Errorf("Stop took %v of fake time, want at most ReleaseTimeout %v", took, relTimeout)
		}
		if hs := w.holders(); len(hs) != 1 {
			t.Errorf("holders = %v, want the unreleased claim, left to expire", hs)
		}
	})
	t.Run("tenure: a Locker deaf to its context", func(t *testing.T) {
		w := newWorld(t)
		wedge := make(chan struct{})
		defer close(wedge)
		inRelease := make(chan struct{})
		a := w.newNode("a", withFault(electortest.Release, &electortest.Fault{Before: func() {
			close(inRelease)
			<-wedge
		}})).start()
		a.await(electortest.Elected, 1)
		stopped := make(chan error, 1)
		go func() { stopped <- a.e.Stop(w.ctx) }()
		recv(w, inRelease)
		// The release's timeout and Stop's bound.
		w.step(2, renewTimeout+drainTimeout+relTimeout)
		if err := recv(w, stopped); !errors.Is(err, elector.ErrStopTimeout) {
			t.Errorf("Stop = %v, want ErrStopTimeout after its bound", err)
		}
	})
	t.Run("naive: Stop blocks as long as the backend", func(t *testing.T) {
		w := newWorld(t)
		s := w.naiveStore()
		n := w.newNaive("n", &epochLocker{store: s, key: key, ttl: ttl, wall: w.clk})
		n.Start(w.ctx)
		w.awaitRec("n", n.rec, electortest.Acquired, 1)
		cut := s.Partition(faults.PartitionBlock)
		stopped := make(chan error, 1)
		go func() { stopped <- n.Stop(w.ctx) }()
		if err := cut.AwaitHolding(w.ctx, 1); err != nil {
			t.Fatal(err)
		}
		w.clk.Add(time.Hour)
		select {
		case err := <-stopped:
			t.Fatalf("naive: Stop returned (%v), want the failure mode (still blocked)", err)
		default:
		}
		cut.Remove() // the hung release fails; Stop returns
		recv(w, stopped)
	})
}

// TestFM17CrashedHolderTakeover checks FM-17, crash without Stop: after a
// holder crashes, a follower takes over right after the claim expires, with
// no polling period on top.
//
// Trigger: the leader is killed (OOM, SIGKILL, power loss).
//
// A naive elector: the claim stays until its TTL; followers notice on their
// next tick, so the leaderless gap is the remaining TTL plus up to a whole
// renew period.
//
// Tenure: the claim also stays until its TTL (nothing can tell a crash from a
// pause), but followers time their next attempt to the expiry the backend
// reported, so one takes over right after it, with no polling period on top.
func TestFM17CrashedHolderTakeover(t *testing.T) {
	crash := func(w *world) {
		w.t.Helper()
		l, err := backends.NewLocker(w.store)
		if err != nil {
			w.t.Fatal(err)
		}
		h, _ := backends.NewHolder("crashed")
		if _, err := l.TryAcquire(w.ctx, key, h, ttl); err != nil {
			w.t.Fatal(err)
		}
	}
	t.Run("tenure without jitter: at the expiry plus 1ms", func(t *testing.T) {
		w := newWorld(t)
		crash(w) // at 0s, never renewed
		w.clk.Add(time.Second / 2)
		b := w.newNode("b").start()
		b.await(electortest.Lost, 1)
		w.step(followerTimers, ttl-time.Second/2+time.Millisecond)
		if ev := b.await(electortest.Elected, 1); ev.Term.AcquiredAt.Sub(epoch) != ttl+time.Millisecond {
			t.Errorf("b acquired at %v, want %v", ev.Term.AcquiredAt.Sub(epoch), ttl+time.Millisecond)
		}
	})
	t.Run("tenure with jitter: within 11ms of the expiry", func(t *testing.T) {
		w := newWorld(t)
		crash(w)
		w.clk.Add(time.Second / 2)
		b := w.newNode("b", withConfig(func(c *elector.Config) { c.DisableJitter = false })).start()
		b.await(electortest.Lost, 1)
		w.step(followerTimers, ttl-time.Second/2)
		w.stepUntil(followerTimers, time.Millisecond, func() bool { return b.rec.Count(electortest.Elected) > 0 })
		if at := b.await(electortest.Elected, 1).Term.AcquiredAt.Sub(epoch); at > ttl+11*time.Millisecond {
			t.Errorf("b acquired at %v, want within 11ms of the expiry at %v", at, ttl)
		}
	})
	t.Run("naive: up to a renew period late", func(t *testing.T) {
		w := newWorld(t)
		if ok, err := (&epochLocker{store: w.store, key: key, ttl: ttl, wall: w.clk}).tryAcquire(w.ctx, "crashed"); !ok || err != nil {
			t.Fatal(ok, err)
		}
		w.clk.Add(time.Second / 2)
		nb := w.newNaive("b", &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		nb.Start(w.ctx) // ticks at 0.5s, 3.5s, ...
		w.awaitRec("b", nb.rec, electortest.Lost, 1)
		for i := 2; i <= 4; i++ { // 3.5s, 6.5s, 9.5s
			w.clk.Add(3 * time.Second)
			w.awaitRec("b", nb.rec, electortest.Lost, i)
		}
		w.clk.Add(3 * time.Second) // 12.5s
		w.awaitRec("b", nb.rec, electortest.Acquired, 1)
		if gap := w.elapsed() - ttl; gap < time.Second {
			t.Fatalf("naive took over %v after the expiry, want the failure mode (a polling gap)", gap)
		}
	})
}

// TestFM18FatalBackendError checks FM-18, backend resource deleted or
// permission revoked: a deleted backend resource or revoked permission is
// fatal: the leader demotes at once and the error is reported; the elector
// tries again a few times with backoff, leads again if the backend is
// restored by then, and otherwise ends: Run returns the error.
//
// Trigger: the table, namespace or directory is deleted, or the credentials
// lose their rights.
//
// A naive elector: every call fails with an infrastructure error that the
// loop swallows: nodes sit leaderless with nothing reported.
//
// Tenure: backends.ErrPermission and backends.ErrMissingResource are fatal:
// the leader demotes at once (ReasonFatal in OnDemoted, the error in
// Cause.Err, the Trace.RenewFailed hook with ClassFatal, an error log line).
// It campaigns again with backoff (RetryPeriod, twice, four times that) and
// leads again if the backend is restored by then. If it is not, the fourth
// fatal error in a row ends the elector as if stopped: Run returns the error
// (wrapped, naming the key), Done is closed and Err returns it, so a
// supervisor or a health check sees it instead of a node retrying in silence.
func TestFM18FatalBackendError(t *testing.T) {
	for _, sentinel := range []error{backends.ErrPermission, backends.ErrMissingResource} {
		t.Run("tenure restored in time/"+sentinel.Error(), func(t *testing.T) {
			w := newWorld(t)
			log := &logs{}
			a := w.newNode("a", withConfig(func(c *elector.Config) { c.Logger = slog.New(log) })).start()
			term := a.await(electortest.Elected, 1).Term
			revoked := a.f.Fail(faults.AllOps, 0, sentinel)
			w.step(leaderTimers, renewPeriod)
			if ev := a.await(electortest.RenewFail, 1); ev.Class != backends.ClassFatal {
				t.Errorf("renew failure class = %v, want fatal", ev.Class)
			}
			ev := a.await(electortest.OnDemoted, 1)
			if ev.Cause.Reason != elector.ReasonFatal || !errors.Is(ev.Cause.Err, sentinel) {
				t.Errorf("OnDemoted cause = %v, want fatal wrapping %v", ev.Cause, sentinel)
			}
			if a.IsLeader() || !w.clk.Now().Before(term.Deadline) {
				t.Errorf("at %v: IsLeader = %v; want demoted before the deadline %v", w.elapsed(), a.IsLeader(), term.Deadline.Sub(epoch))
			}
			if line, ok := log.find(slog.LevelError, "fatal"); !ok {
				t.Errorf("no error log line about the fatal error")
			} else {
				t.Logf("logged: %s", line)
			}
			// It campaigns again, with backoff (1s, 2s, ...), and leads once
			// restored: here before its fourth fatal error in a row.
			w.step(followerTimers, retryPeriod)
			a.await(electortest.Lost, 1)
			w.step(followerTimers, 2*retryPeriod)
			a.await(electortest.Lost, 2)
			revoked.Remove()
			w.stepUntil(followerTimers, 500*time.Millisecond, func() bool { return a.rec.Count(electortest.Elected) > 1 })
			for _, ev := range a.rec.All(electortest.Lost)[:1] {
				if ev.Class != backends.ClassFatal {
					t.Errorf("attempt while revoked classified %v, want fatal", ev.Class)
				}
			}
		})
	}
	for _, sentinel := range []error{backends.ErrPermission, backends.ErrMissingResource} {
		t.Run("tenure not restored: Run ends/"+sentinel.Error(), func(t *testing.T) {
			w := newWorld(t)
			a := w.newNode("a")
			ran, exited := make(chan error, 1), make(chan struct{})
			go func() {
				defer close(exited)
				ran <- a.e.Run(context.Background())
			}()
			t.Cleanup(func() { // before the world's shutdown, whatever failed
				a.e.Stop(w.ctx)
				<-exited
			})
			a.await(electortest.Elected, 1)
			a.f.Fail(faults.AllOps, 0, sentinel)
			w.step(leaderTimers, renewPeriod) // fatal error 1: the renewal
			if ev := a.await(electortest.OnDemoted, 1); ev.Cause.Reason != elector.ReasonFatal {
				t.Errorf("OnDemoted cause = %v, want fatal", ev.Cause)
			}
			for i, wait := range []time.Duration{retryPeriod, 2 * retryPeriod, 4 * retryPeriod} { // fatal errors 2 to 4
				w.step(followerTimers, wait)
				if ev := a.await(electortest.Lost, i+1); ev.Class != backends.ClassFatal {
					t.Errorf("attempt %d while revoked classified %v, want fatal", i+1, ev.Class)
				}
			}
			var err error
			select {
			case err = <-ran:
			case <-w.ctx.Done():
				t.Fatalf("Run still running after four fatal errors in a row (state %v)", a.e.State())
			}
			if !errors.Is(err, sentinel) || !strings.Contains(err.Error(), strconv.Quote(key)) {
				t.Errorf("Run() = %v; want an error wrapping %v that names %q", err, sentinel, key)
			}
			if a.e.Err() != err || a.e.State() != lifecycle.Stopped || a.IsLeader() {
				t.Errorf("after Run returned: Err() = %v, State() = %v, IsLeader() = %v; want Run's error, stopped, false", a.e.Err(), a.e.State(), a.IsLeader())
			}
			select {
			case <-a.e.Done():
			default:
				t.Errorf("Done not closed after Run returned")
			}
			if el, de := a.rec.Count(electortest.Elected), a.rec.Count(electortest.OnDemoted); el != 1 || de != 1 {
				t.Errorf("OnElected %d times, OnDemoted %d times; want one each", el, de)
			}
			t.Logf("Run returned after %v: %v", w.elapsed(), err)
		})
	}
	t.Run("naive: leaderless, nothing reported", func(t *testing.T) {
		w := newWorld(t)
		s := w.naiveStore()
		n := w.newNaive("n", &epochLocker{store: s, key: key, ttl: ttl, wall: w.clk})
		n.Start(w.ctx)
		w.awaitRec("n", n.rec, electortest.Acquired, 1)
		s.Fail(faults.AllOps, 0, backends.ErrPermission)
		w.clk.Add(renewPeriod) // the renewal fails: dropped
		w.awaitRec("n", n.rec, electortest.Dropped, 1)
		for i := 1; i <= 10; i++ { // every attempt after fails alike
			w.clk.Add(renewPeriod)
			w.awaitRec("n", n.rec, electortest.Lost, i)
		}
		for _, ev := range n.rec.Snapshot() {
			if ev.Cause.Err != nil || ev.Class != backends.ClassNone {
				t.Fatalf("naive reported %+v", ev)
			}
		}
		if n.IsLeader() {
			t.Fatal("naive: still leader")
		}
		t.Logf("naive: %d attempts, every %v, and no error surfaced (the failure mode)", n.rec.Count(electortest.Attempt), renewPeriod)
	})
}
