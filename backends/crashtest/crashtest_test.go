package crashtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/crashtest"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	ttl         = 10 * time.Second
	renewPeriod = 3 * time.Second
	retryPeriod = time.Second
	margin      = 100 * time.Millisecond
	key         = "leader"
)

// barrier bounds a wait in real time, so a broken test fails instead of
// hanging.
func barrier(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func config(clk *clocktest.Clock, id string) elector.Config {
	return elector.Config{
		Key: key, Identity: id, TTL: ttl, RenewPeriod: renewPeriod, RenewTimeout: time.Second,
		SafetyMargin: margin, RetryPeriod: retryPeriod, DisableJitter: true, Clock: clk,
	}
}

func start(t *testing.T, s backends.Store, cfg elector.Config) *elector.Elector {
	t.Helper()
	l, err := backends.NewLocker(s)
	if err != nil {
		t.Fatal(err)
	}
	e, err := elector.New(l, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestCrashedLeaderIsTakenOverAfterTTL checks what a test relies on when it
// crashes a leader through the wrapper: the leader's calls no longer reach
// the store, so its claim is never released; its term ends by its own
// deadline (IsLeader false and the leader's context done from the term's
// end on, OnDemoted with ReasonExpired); and a follower on the same store
// takes the claim only once the store has let it expire, a TTL after the
// leader's last renewal, and then at once.
func TestCrashedLeaderIsTakenOverAfterTTL(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	ms := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { ms.Close() })
	counted := faults.Wrap(ms, clk) // counts what reaches the store from the leader
	crashing := crashtest.Wrap(counted)

	cfgA := config(clk, "a")
	recA := electortest.NewRecorder(t, clk)
	recA.Install(&cfgA)
	a := start(t, crashing, cfgA)
	elected := recA.Await(t, ctx, electortest.Elected, 1)
	cfgB := config(clk, "b")
	recB := electortest.NewRecorder(t, clk)
	recB.Install(&cfgB)
	b := start(t, ms, cfgB)
	recB.Await(t, ctx, electortest.Lost, 1)
	t.Cleanup(func() {
		for _, e := range []*elector.Elector{a, b} {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			e.Stop(sctx) // a's release fails: it crashed
			cancel()
			<-e.Done()
		}
	})

	// Let the leader renew once, so that its last renewal, not its
	// acquisition, is what the claim's expiry counts from.
	const step = 100 * time.Millisecond
	for recA.Count(electortest.Renewed) == 0 {
		if err := electortest.UntilOrArmed(ctx, clk, 2, "timers of both electors", func() bool { return false }); err != nil {
			t.Fatal(err)
		}
		clk.Add(step)
	}
	term, ok := a.Term()
	if !ok {
		t.Fatal("the leader has no term after its renewal")
	}
	crashing.Crash()
	crashedAt := clk.Now()
	reached := counted.Calls(faults.AllOps)
	// The store counts the claim's TTL from the renewal's arrival, which on
	// the fake clock is its send: the term's deadline plus the margin.
	expiry := term.Deadline.Add(margin)
	end := term.Deadline.Add(-cfgA.TTL / 100) // the default CancelLead

	for recB.Count(electortest.Won) == 0 {
		now := clk.Now()
		if now.Sub(crashedAt) > 3*ttl {
			t.Fatalf("no takeover %v after the crash", now.Sub(crashedAt))
		}
		if !now.Before(end) {
			if a.IsLeader() {
				t.Fatalf("at %v, after the term's end %v, the crashed elector still reports leading", now.Sub(t0), end.Sub(t0))
			}
			if elected.Ctx.Err() == nil {
				t.Fatalf("at %v, after the term's end %v, the crashed leader's context reports no error", now.Sub(t0), end.Sub(t0))
			}
		}
		if now.Before(expiry) {
			got, err := ms.Get(ctx, key)
			if err != nil || got.CreateRevision != term.Token {
				t.Fatalf("at %v, before the claim's expiry %v, the store holds %+v (err %v), want the crashed leader's token %d",
					now.Sub(t0), expiry.Sub(t0), got, err, term.Token)
			}
		}
		if err := electortest.UntilOrArmed(ctx, clk, 2, "the follower's takeover", func() bool { return recB.Count(electortest.Won) > 0 }, recB); err != nil {
			t.Fatal(err)
		}
		if recB.Count(electortest.Won) == 0 {
			clk.Add(step)
		}
	}
	won := recB.Nth(electortest.Won, 1)
	if won.At.Before(expiry) || won.At.After(expiry.Add(step)) {
		t.Errorf("the follower took the claim at %v, want at its expiry %v (a TTL after the last renewal), within %v",
			won.At.Sub(t0), expiry.Sub(t0), step)
	}
	if won.Term.Token <= term.Token {
		t.Errorf("the follower's token %d is not above the crashed leader's %d", won.Term.Token, term.Token)
	}
	if got := counted.Calls(faults.AllOps) - reached; got != 0 {
		t.Errorf("the crashed leader made %d calls that reached the store, want none", got)
	}
	demoted := recA.Await(t, ctx, electortest.OnDemoted, 1)
	if demoted.Cause.Reason != elector.ReasonExpired {
		t.Errorf("the crashed leader was demoted with %v, want %v", demoted.Cause, elector.ReasonExpired)
	}
	if demoted.At.After(won.At) {
		t.Errorf("the crashed leader's OnDemoted came at %v, after the takeover at %v", demoted.At.Sub(t0), won.At.Sub(t0))
	}
}

// TestCrashFailsEveryCall checks the wrapper's own promises: transparent
// before Crash; afterwards every call fails as unavailable without reaching
// the inner store, and open watches end.
func TestCrashFailsEveryCall(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	ms := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { ms.Close() })
	counted := faults.Wrap(ms, clk)
	s := crashtest.Wrap(counted)
	if got, want := s.Capabilities(), ms.Capabilities(); got != want {
		t.Errorf("Capabilities() = %+v, want the inner store's %+v", got, want)
	}
	if err := backends.Require(s, backends.CapWatch|backends.CapTxn); err != nil {
		t.Errorf("Require(watch|txn): %v", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := s.Watch(wctx, "")
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.CreateIfAbsent(ctx, "k", []byte("v"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.Kind != backends.EventPut || ev.Entry.Key != "k" {
		t.Errorf("first event %+v, want the put of k", ev)
	}

	if s.Crashed() {
		t.Fatal("Crashed() before Crash")
	}
	s.Crash()
	s.Crash() // idempotent
	if !s.Crashed() {
		t.Fatal("Crashed() false after Crash")
	}
	if _, ok := <-events; ok {
		t.Error("the watch delivered an event after the crash")
	}
	before := counted.Calls(faults.AllOps)
	_, err1 := s.Get(ctx, "k")
	_, err2 := s.List(ctx, "")
	_, err9 := s.Scan(ctx, "")
	_, err3 := s.CreateIfAbsent(ctx, "x", nil, ttl)
	_, err4 := s.CompareAndSet(ctx, "k", e.Revision, nil, ttl)
	err5 := s.CompareAndDelete(ctx, "k", e.Revision)
	_, err6 := s.KeepAlive(ctx, "k", e.Revision, ttl)
	_, err7 := s.Txn(ctx, []backends.Cond{{Key: "k", Revision: e.Revision}}, []backends.Op{{Kind: backends.OpDelete, Key: "k"}})
	_, err8 := s.Watch(ctx, "")
	for i, err := range []error{err1, err2, err3, err4, err5, err6, err7, err8, err9} {
		if !errors.Is(err, backends.ErrUnavailable) || backends.Classify(err) != backends.ClassTransient {
			t.Errorf("call %d after the crash: %v, want a transient error wrapping ErrUnavailable", i+1, err)
		}
	}
	if got := counted.Calls(faults.AllOps) - before; got != 0 {
		t.Errorf("%d calls reached the inner store after the crash, want none", got)
	}
	if got, err := ms.Get(ctx, "k"); err != nil || got.Revision != e.Revision {
		t.Errorf("inner Get(k) = %+v, %v; want the entry written before the crash", got, err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := ms.Get(ctx, "k"); err != nil {
		t.Errorf("the inner store after closing the wrapper: %v, want it open", err)
	}
}
