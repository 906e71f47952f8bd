package elector_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/lifecycle"
)

func TestNewRejects(t *testing.T) {
	clk := clocktest.New(t0)
	if _, err := elector.New(nil, baseConfig(clk, "a")); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("New(nil locker) error = %v, want ErrInvalid", err)
	}
	cfg := baseConfig(clk, "")
	cfg.Key = ""
	_, err := elector.New(newFakeLocker(clk), cfg)
	if err == nil || !strings.Contains(err.Error(), "identity") || !strings.Contains(err.Error(), "key") {
		t.Errorf("New(empty key and identity) error = %v, want both reported", err)
	}
}

func TestStartStopRules(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)

	t.Run("start twice", func(t *testing.T) {
		e := startElector(t, newFakeLocker(clk), baseConfig(clk, "a"))
		if err := e.Start(ctx); !errors.Is(err, elector.ErrAlreadyStarted) {
			t.Errorf("second Start = %v, want ErrAlreadyStarted", err)
		}
		if err := e.Run(ctx); !errors.Is(err, elector.ErrAlreadyStarted) {
			t.Errorf("Run after Start = %v, want ErrAlreadyStarted", err)
		}
	})
	t.Run("start after stop", func(t *testing.T) {
		e := startElector(t, newFakeLocker(clk), baseConfig(clk, "a"))
		stopAndWait(t, e)
		if err := e.Start(ctx); err == nil {
			t.Errorf("Start after Stop = nil, want an error")
		}
		if err := e.Stop(ctx); err != nil {
			t.Errorf("second Stop = %v, want nil", err)
		}
	})
	t.Run("stop before start", func(t *testing.T) {
		e, err := elector.New(newFakeLocker(clk), baseConfig(clk, "a"))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Stop(ctx); err != nil {
			t.Errorf("Stop before Start = %v", err)
		}
		select {
		case <-e.Done():
		default:
			t.Errorf("Done not closed after Stop before Start")
		}
		if err := e.Start(ctx); !errors.Is(err, elector.ErrStopped) {
			t.Errorf("Start after Stop = %v, want ErrStopped", err)
		}
		if got := e.State(); got != lifecycle.Stopped {
			t.Errorf("State() = %v, want stopped", got)
		}
	})
}

func TestElectAndRenew(t *testing.T) {
	for _, kind := range lockerKinds {
		t.Run(kind, func(t *testing.T) { testElectAndRenew(t, kind) })
	}
}

func testElectAndRenew(t *testing.T, kind string) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec, o := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	o.InstallTrace(&cfg)
	e := startElector(t, newLocker(t, clk, kind), cfg)

	tm := rec.WaitElected(t, ctx, 1)
	want := elector.Term{Key: key, Holder: e.Holder(), Token: 1, AcquiredAt: t0, Deadline: t0.Add(ttl - margin)}
	if tm != want {
		t.Errorf("OnElected term = %+v, want %+v", tm, want)
	}
	if !e.IsLeader() {
		t.Errorf("IsLeader() = false after OnElected")
	}
	lctx := rec.Nth(electortest.Elected, 1).Ctx
	if d, ok := lctx.Deadline(); !ok || !d.Equal(want.Deadline.Add(-lead)) {
		t.Errorf("leader ctx Deadline() = %v, %v; want the term's end, %v before the deadline %v", d, ok, lead, want.Deadline)
	}
	if ld, ok := e.Leader(); !ok || ld.Holder != e.Holder() || ld.Token != 1 {
		t.Errorf("Leader() = %+v, %v; want this elector with token 1", ld, ok)
	}

	for i := 1; i <= 3; i++ {
		if err := clk.BlockUntil(ctx, 2); err != nil { // the deadline timer and the renew timer
			t.Fatal(err)
		}
		clk.Add(renewPeriod)
		eventually(t, ctx, "renewal", func() bool { return o.Count(electortest.Renewed) >= i }, o)
		wantDeadline := t0.Add(time.Duration(i)*renewPeriod + ttl - margin)
		got, ok := e.Term()
		if !ok || !got.Deadline.Equal(wantDeadline) || got.Token != 1 {
			t.Errorf("after renewal %d: Term() = %+v, %v; want token 1, deadline %v", i, got, ok, wantDeadline)
		}
		if d, _ := lctx.Deadline(); !d.Equal(wantDeadline.Add(-lead)) {
			t.Errorf("after renewal %d: leader ctx Deadline() = %v, want %v", i, d, wantDeadline.Add(-lead))
		}
		if lctx.Err() != nil {
			t.Errorf("leader ctx done while leading: %v", context.Cause(lctx))
		}
	}
}

// TestDeadlineWhileRenewBlocked checks that the term ends exactly CancelLead
// before the local deadline while the renewal is stuck in the backend:
// IsLeader turns false, the leader's context reports an error and its Done
// channel is closed, all before the deadline; the renewal's late success does
// not revive the term. With starved timers (the timer that ends the term
// never runs) the context still reports the end on time when asked: before,
// its Err stayed nil past the deadline, and it was cancelled at the deadline,
// not before it.
func TestDeadlineWhileRenewBlocked(t *testing.T) {
	for _, kind := range lockerKinds {
		for _, starved := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/starved=%v", kind, starved), func(t *testing.T) {
				testDeadlineWhileRenewBlocked(t, kind, starved)
			})
		}
	}
}

func testDeadlineWhileRenewBlocked(t *testing.T, kind string, starved bool) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec, o := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	if starved {
		cfg.Clock = starvedTimers{Clock: clk, never: clocktest.New(t0)}
	}
	rec.InstallCallbacks(&cfg)
	o.InstallTrace(&cfg)
	fl := electortest.Wrap(newLocker(t, clk, kind))
	block, entered := make(chan struct{}), make(chan struct{})
	fl.Set(electortest.Renew, &electortest.Fault{Once: true, Block: block, Entered: entered})
	e := startElector(t, fl, cfg)

	rec.WaitElected(t, ctx, 1)
	waiters := 2 // the end-of-term timer and the renew timer
	if starved {
		waiters = 1 // the end-of-term timer is on the other clock
	}
	if err := clk.BlockUntil(ctx, waiters); err != nil {
		t.Fatal(err)
	}
	clk.Add(renewPeriod)
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("renewal never reached the backend")
	}

	deadline := t0.Add(ttl - margin)
	end := deadline.Add(-lead)
	lctx := rec.Nth(electortest.Elected, 1).Ctx
	clk.Set(end.Add(-time.Nanosecond))
	if !e.IsLeader() {
		t.Errorf("IsLeader() = false 1ns before the term's end")
	}
	if err := lctx.Err(); err != nil {
		t.Errorf("leader ctx Err() = %v 1ns before the term's end", err)
	}
	done := lctx.Done() // taken before the end: only the timer can close it
	clk.Add(time.Nanosecond)
	if !starved {
		// The timer closes Done at the end, CancelLead before the deadline.
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("leader ctx not done at the term's end, %v before the deadline", lead)
		}
	}
	if e.IsLeader() {
		t.Errorf("IsLeader() = true at the term's end while the renewal is blocked")
	}
	if _, ok := e.Term(); ok {
		t.Errorf("Term() reports a term at its end")
	}
	// Asked, the context reports the end at once, timer or not.
	if lctx.Err() == nil {
		t.Fatalf("at %v, %v before the deadline: leader ctx Err() = nil", clk.Now().Sub(t0), deadline.Sub(clk.Now()))
	}
	select {
	case <-lctx.Done():
	default:
		t.Errorf("leader ctx Err() = %v but Done() is not closed", lctx.Err())
	}
	if !clk.Now().Before(deadline) {
		t.Errorf("checked at %v, not before the deadline %v", clk.Now().Sub(t0), deadline.Sub(t0))
	}
	var c elector.Cause
	if !errors.As(context.Cause(lctx), &c) || c.Reason != elector.ReasonExpired || !errors.Is(c, elector.ErrDeadlinePassed) {
		t.Errorf("leader ctx cause = %v, want ReasonExpired wrapping ErrDeadlinePassed", context.Cause(lctx))
	}
	eventually(t, ctx, "state demoting", func() bool { return e.State() == lifecycle.Demoting }, rec)

	close(block) // the renewal succeeds at the backend, after the term's end
	if got := rec.WaitDemoted(t, ctx, 1); got.Reason != elector.ReasonExpired || !errors.Is(got, elector.ErrDeadlinePassed) {
		t.Errorf("OnDemoted cause = %v, want ReasonExpired wrapping ErrDeadlinePassed", got)
	}
	if n := o.Count(electortest.Renewed); n != 0 {
		t.Errorf("%d renewals counted as successful, want 0 (the answer was late)", n)
	}
	if tm := rec.Nth(electortest.Elected, 1).Term; !tm.Deadline.Equal(deadline) {
		t.Errorf("term 1 deadline = %v, want %v", tm.Deadline, deadline)
	}
	// The claim was released after OnElected returned, so the next attempt,
	// at the same instant, wins a new term.
	tm := rec.WaitElected(t, ctx, 2)
	if tm.Token <= 1 || !tm.AcquiredAt.Equal(end) {
		t.Errorf("second term = %+v, want a new token acquired at %v", tm, end)
	}
}

// TestLateAnswerEndsStarvedTerm checks that with starved timers and nobody
// asking the leader's context, the Elector's loop ends the term when the
// renewal answered after the term's end comes back, and the answer extends
// nothing.
func TestLateAnswerEndsStarvedTerm(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec, o := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	cfg.Clock = starvedTimers{Clock: clk, never: clocktest.New(t0)}
	rec.InstallCallbacks(&cfg)
	o.InstallTrace(&cfg)
	fl := electortest.Wrap(newFakeLocker(clk))
	block, entered := make(chan struct{}), make(chan struct{})
	fl.Set(electortest.Renew, &electortest.Fault{Once: true, Block: block, Entered: entered})
	e := startElector(t, fl, cfg)
	rec.WaitElected(t, ctx, 1)
	if err := clk.BlockUntil(ctx, 1); err != nil { // the renew timer
		t.Fatal(err)
	}
	clk.Add(renewPeriod)
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("renewal never reached the backend")
	}
	clk.Set(t0.Add(ttl - margin - lead))
	if e.IsLeader() {
		t.Errorf("IsLeader() = true at the term's end")
	}
	close(block)
	if got := rec.WaitDemoted(t, ctx, 1); got.Reason != elector.ReasonExpired {
		t.Errorf("OnDemoted cause = %v, want ReasonExpired", got)
	}
	if n := o.Count(electortest.Renewed); n != 0 {
		t.Errorf("%d renewals counted as successful, want 0 (the answer was late)", n)
	}
}

// TestLeaderCtxPastDeadlineWhenStarved checks that in a process whose timers
// never run, a leader that checks its context past the deadline is told the
// term is over. Before, Err stayed nil until the cancelling timer ran, so the
// leader's work went on past its deadline.
func TestLeaderCtxPastDeadlineWhenStarved(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec := electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	cfg.Clock = starvedTimers{Clock: clk, never: clocktest.New(t0)}
	rec.InstallCallbacks(&cfg)
	fl := electortest.Wrap(newFakeLocker(clk))
	block, entered := make(chan struct{}), make(chan struct{})
	fl.Set(electortest.Renew, &electortest.Fault{Once: true, Block: block, Entered: entered})
	e := startElector(t, fl, cfg)
	unblock := sync.OnceFunc(func() { close(block) })
	defer unblock() // before the cleanup stops the elector, whatever fails
	rec.WaitElected(t, ctx, 1)
	lctx := rec.Nth(electortest.Elected, 1).Ctx
	if err := clk.BlockUntil(ctx, 1); err != nil { // the renew timer
		t.Fatal(err)
	}
	clk.Add(renewPeriod)
	select {
	case <-entered: // the renewal hangs; the timer that would end the term never runs
	case <-ctx.Done():
		t.Fatal("renewal never reached the backend")
	}
	clk.Set(t0.Add(ttl - margin + time.Millisecond))
	if err := lctx.Err(); err == nil || e.IsLeader() {
		t.Fatalf("1ms past the deadline, timers starved: leader ctx Err() = %v, IsLeader() = %v; want an error and false", err, e.IsLeader())
	}
	select {
	case <-lctx.Done():
	default:
		t.Errorf("leader ctx Err() = %v but Done() is not closed", lctx.Err())
	}
	unblock() // the loop, stuck in the renewal until now, settles the term
	if c := rec.WaitDemoted(t, ctx, 1); c.Reason != elector.ReasonExpired {
		t.Errorf("OnDemoted cause = %v, want ReasonExpired", c)
	}
}

// starvedTimers is a clock whose AfterFunc callbacks never run, as if the
// goroutine that would run them were starved: the elector's deadline timer
// and request timeouts never fire.
type starvedTimers struct {
	*clocktest.Clock
	never *clocktest.Clock
}

func (c starvedTimers) AfterFunc(d time.Duration, f func()) *clock.Timer {
	return c.never.AfterFunc(d, f)
}

func TestTransientRenewErrorsRetriedUntilDeadline(t *testing.T) {
	for _, kind := range lockerKinds {
		t.Run(kind, func(t *testing.T) { testTransientRenewErrorsRetriedUntilDeadline(t, kind) })
	}
}

func testTransientRenewErrorsRetriedUntilDeadline(t *testing.T, kind string) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec, o := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	o.InstallTrace(&cfg)
	fl := electortest.Wrap(newLocker(t, clk, kind))
	fl.Set(electortest.Renew, &electortest.Fault{Err: fmt.Errorf("flaky: %w", backends.ErrUnavailable)})
	e := startElector(t, fl, cfg)
	rec.WaitElected(t, ctx, 1)

	end := t0.Add(ttl - margin - lead)
	for now := clk.Now(); now.Before(end); now = clk.Now() {
		if err := clk.BlockUntil(ctx, 2); err != nil { // end-of-term timer + retry (or request) timer
			t.Fatal(err)
		}
		if !e.IsLeader() || e.State() != lifecycle.Leader {
			t.Fatalf("at %v (term's end %v): IsLeader() = %v, State() = %v; want leader until the term's end", now.Sub(t0), end.Sub(t0), e.IsLeader(), e.State())
		}
		clk.Add(min(100*time.Millisecond, end.Sub(now)))
	}
	if tm, ok := e.Term(); ok && tm.Token == 1 {
		t.Errorf("term 1 leads at its end")
	}
	if got := rec.WaitDemoted(t, ctx, 1); got.Reason != elector.ReasonExpired {
		t.Errorf("OnDemoted cause = %v, want ReasonExpired", got)
	}
	if n := o.CountClass(electortest.RenewFail, backends.ClassTransient); n < 3 {
		t.Errorf("%d transient renew failures, want several retries before the deadline", n)
	}
	fl.Set(electortest.Renew, nil)
	if tm := rec.WaitElected(t, ctx, 2); tm.Token <= 1 {
		t.Errorf("re-elected with token %d, want a new token", tm.Token)
	}
}

func TestLostRenewDemotesAtOnce(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec, o := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	o.InstallTrace(&cfg)
	fk := newFakeLocker(clk)
	fl := electortest.Wrap(fk)
	e := startElector(t, fl, cfg)
	rec.WaitElected(t, ctx, 1)
	if err := clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	thief := backends.Holder{ID: "thief", Nonce: "1"}
	stolen := fk.steal(thief)
	clk.Add(renewPeriod)

	c := rec.WaitDemoted(t, ctx, 1)
	if c.Reason != elector.ReasonLost || !errors.Is(c, backends.ErrNotHolder) {
		t.Errorf("OnDemoted cause = %v, want ReasonLost wrapping ErrNotHolder", c)
	}
	if now := clk.Now(); !now.Equal(t0.Add(renewPeriod)) {
		t.Errorf("demoted at %v, want at the failed renewal (%v)", now.Sub(t0), renewPeriod)
	}
	if e.IsLeader() {
		t.Errorf("IsLeader() = true after the claim was lost")
	}
	if n := fl.Count(electortest.Release); n != 0 {
		t.Errorf("Release called %d times for a lost claim, want 0", n)
	}
	if n := o.CountClass(electortest.RenewFail, backends.ClassLost); n != 1 {
		t.Errorf("lost renew failures observed = %d, want 1", n)
	}
	// It campaigns again and sees the thief.
	eventually(t, ctx, "the thief observed as leader", func() bool {
		ld, ok := e.Leader()
		return ok && ld.Holder == thief && ld.Token == stolen.Token
	}, rec)
}

func TestFatalRenewDemotesAndReports(t *testing.T) {
	for _, kind := range lockerKinds {
		t.Run(kind, func(t *testing.T) { testFatalRenewDemotesAndReports(t, kind) })
	}
}

func testFatalRenewDemotesAndReports(t *testing.T, kind string) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	cfg, rec, o, logs := loggedConfig(t, clk, "a")
	fl := electortest.Wrap(newLocker(t, clk, kind))
	fl.Set(electortest.Renew, &electortest.Fault{Once: true, Err: fmt.Errorf("denied: %w", backends.ErrPermission)})
	e := startElector(t, fl, cfg)
	rec.WaitElected(t, ctx, 1)
	if err := clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	clk.Add(renewPeriod)

	c := rec.WaitDemoted(t, ctx, 1)
	if c.Reason != elector.ReasonFatal || !errors.Is(c, backends.ErrPermission) {
		t.Errorf("OnDemoted cause = %v, want ReasonFatal wrapping ErrPermission", c)
	}
	if n := o.CountClass(electortest.RenewFail, backends.ClassFatal); n != 1 {
		t.Errorf("fatal renew failures observed = %d, want 1", n)
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "denied") {
		t.Errorf("no error-level log of the fatal error; logs:\n%s", l)
	}
	eventually(t, ctx, "release", func() bool { return fl.Count(electortest.Release) == 1 }, fl)
	wantReelectedAfterBackoff(t, ctx, clk, e, rec)
}

func TestReleaseOnlyAfterOnElectedReturns(t *testing.T) {
	for _, kind := range lockerKinds {
		t.Run(kind, func(t *testing.T) { testReleaseOnlyAfterOnElectedReturns(t, kind) })
	}
}

func testReleaseOnlyAfterOnElectedReturns(t *testing.T, kind string) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec := electortest.NewRecorder(t, nil)
	sawDone, allow := make(chan struct{}), make(chan struct{})
	rec.SetWork(func(ctx context.Context, _ elector.Term) {
		<-ctx.Done()
		close(sawDone)
		<-allow // the leader's work winds down slowly
	})
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	fl := electortest.Wrap(newLocker(t, clk, kind))
	e := startElector(t, fl, cfg)
	rec.WaitElected(t, ctx, 1)

	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop(ctx) }()
	<-sawDone
	if e.IsLeader() {
		t.Errorf("IsLeader() = true after Stop cancelled the leader ctx")
	}
	if err := clk.BlockUntil(ctx, 2); err != nil { // the drain timer and Stop's bound
		t.Fatal(err)
	}
	if n := fl.Count(electortest.Release); n != 0 {
		t.Fatalf("Release called %d times while OnElected still runs", n)
	}
	close(allow)
	if err := <-stopped; err != nil {
		t.Errorf("Stop = %v", err)
	}
	if n := fl.Count(electortest.Release); n != 1 {
		t.Errorf("Release called %d times after OnElected returned, want 1", n)
	}
	if hs, err := fl.Inner().Holders(ctx, key); err != nil || len(hs) != 0 {
		t.Errorf("Holders after Stop released the claim = %v, %v; want none", hs, err)
	}
	if c := rec.Nth(electortest.OnDemoted, 1).Cause; c.Reason != elector.ReasonStopped {
		t.Errorf("OnDemoted cause = %v, want ReasonStopped", c)
	}
}

func TestDrainTimeoutLeavesClaimToExpire(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec := electortest.NewRecorder(t, nil)
	allow := make(chan struct{})
	rec.SetWork(func(ctx context.Context, tm elector.Term) {
		if tm.Token == 1 {
			<-allow // stuck work that ignores its context
			return
		}
		<-ctx.Done()
	})
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	fk := newFakeLocker(clk)
	fl := electortest.Wrap(fk)
	fl.Set(electortest.Renew, &electortest.Fault{Once: true, Err: fmt.Errorf("denied: %w", backends.ErrPermission)})
	e := startElector(t, fl, cfg)
	rec.WaitElected(t, ctx, 1)
	if err := clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	clk.Add(renewPeriod) // fatal: demote, then drain

	for i := 0; e.State() != lifecycle.Follower; i++ {
		if i == 10 {
			t.Fatalf("state %v after %d drain timeouts, want follower", e.State(), i)
		}
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Add(drainTimeout)
		eventually(t, ctx, "demoting or follower", func() bool {
			s := e.State()
			return s == lifecycle.Demoting || s == lifecycle.Follower
		}, rec)
	}
	if n := fl.Count(electortest.Release); n != 0 {
		t.Errorf("Release called %d times while OnElected still runs, want 0", n)
	}
	if h, held := fk.holder(); !held || h.Holder != e.Holder() {
		t.Errorf("claim after the drain timeout = %+v (held %v), want still ours until it expires", h, held)
	}
	if _, d := rec.Counts(); d != 0 {
		t.Errorf("OnDemoted delivered while OnElected still runs")
	}
	clk.Add(3 * ttl) // long past expiry: still no campaign while OnElected runs
	if n := fl.Count(electortest.Acquire); n != 1 {
		t.Errorf("%d acquire attempts while the old term's OnElected runs, want 1", n)
	}
	if e.IsLeader() {
		t.Errorf("IsLeader() = true after demotion")
	}

	close(allow)
	if c := rec.WaitDemoted(t, ctx, 1); c.Reason != elector.ReasonFatal {
		t.Errorf("OnDemoted cause = %v, want ReasonFatal", c)
	}
	wantReelectedAfterBackoff(t, ctx, clk, e, rec)
}

func TestLoopPanicRecovered(t *testing.T) {
	for _, kind := range lockerKinds {
		t.Run(kind, func(t *testing.T) { testLoopPanicRecovered(t, kind) })
	}
}

func testLoopPanicRecovered(t *testing.T, kind string) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec, o := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	o.InstallTrace(&cfg)
	fl := electortest.Wrap(newLocker(t, clk, kind))
	fl.Set(electortest.Renew, &electortest.Fault{Once: true, Panic: "boom"})
	e := startElector(t, fl, cfg)
	rec.WaitElected(t, ctx, 1)
	if err := clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	clk.Add(renewPeriod)

	c := rec.WaitDemoted(t, ctx, 1)
	var pe *elector.PanicError
	if c.Reason != elector.ReasonPanic || !errors.As(c, &pe) || pe.Where != "loop" || pe.Value != "boom" {
		t.Errorf("OnDemoted cause = %v, want ReasonPanic from the loop with value boom", c)
	}
	if e.IsLeader() {
		t.Errorf("IsLeader() = true after a panic demoted the term")
	}
	eventually(t, ctx, "release", func() bool { return fl.Count(electortest.Release) == 1 }, fl)
	if got := o.Count(electortest.Panicked); got != 1 {
		t.Errorf("panics observed = %d, want 1", got)
	}
	wantReelectedAfterBackoff(t, ctx, clk, e, rec)
}

func TestAcquirePanicRecovered(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec, o := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	o.InstallTrace(&cfg)
	fl := electortest.Wrap(newFakeLocker(clk))
	fl.Set(electortest.Acquire, &electortest.Fault{Once: true, Panic: "acquire boom"})
	e := startElector(t, fl, cfg)
	waitFollowing(t, ctx, clk, e, rec) // back to follower, backing off
	if got := o.Count(electortest.Panicked); got != 1 {
		t.Errorf("panics observed = %d, want 1", got)
	}
	clk.Add(retryPeriod)
	rec.WaitElected(t, ctx, 1)
	if e, d := rec.Counts(); e != 1 || d != 0 {
		t.Errorf("callbacks: %d OnElected, %d OnDemoted; want 1, 0", e, d)
	}
}

func TestTracePanicsRecovered(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec, logs := electortest.NewRecorder(t, nil), &logBuffer{}
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	cfg.Trace.StateChanged = func(from, to lifecycle.State) { panic("trace boom") }
	cfg.Trace.ElectionWon = func(elector.Term, time.Duration) { panic("trace boom") }
	cfg.Logger = logs.logger()
	e := startElector(t, newFakeLocker(clk), cfg)
	rec.WaitElected(t, ctx, 1)
	if !e.IsLeader() {
		t.Errorf("IsLeader() = false: a panicking Trace hook disturbed the election")
	}
	// The hooks run on the loop, the callbacks on their own goroutine: wait
	// for the log rather than assume it came before OnElected.
	for _, hook := range []string{"StateChanged", "ElectionWon"} {
		eventually(t, ctx, "a panic in the "+hook+" hook logged", func() bool {
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "trace hook panicked") && strings.Contains(line, " hook="+hook+" ") {
					return true
				}
			}
			return false
		}, logs)
	}
}

func TestCallbackPanics(t *testing.T) {
	t.Run("OnElected", func(t *testing.T) {
		clk := clocktest.New(t0)
		ctx := barrier(t)
		rec := electortest.NewRecorder(t, nil)
		rec.SetWork(func(ctx context.Context, tm elector.Term) {
			if tm.Token == 1 {
				panic("elected boom")
			}
			<-ctx.Done()
		})
		cfg := baseConfig(clk, "a")
		rec.InstallCallbacks(&cfg)
		fl := electortest.Wrap(newFakeLocker(clk))
		e := startElector(t, fl, cfg)
		c := rec.WaitDemoted(t, ctx, 1)
		var pe *elector.PanicError
		if c.Reason != elector.ReasonPanic || !errors.As(c, &pe) || pe.Where != "OnElected" {
			t.Errorf("OnDemoted cause = %v, want ReasonPanic in OnElected", c)
		}
		if e.IsLeader() {
			t.Errorf("IsLeader() = true after OnElected panicked")
		}
		waitFollowing(t, ctx, clk, e, rec)
		if n := fl.Count(electortest.Release); n != 1 {
			t.Errorf("Release called %d times after OnElected panicked, want 1", n)
		}
		clk.Add(retryPeriod)
		rec.WaitElected(t, ctx, 2)
	})

	// A panic in a callback queued before OnElected (OnNewLeader for this
	// Elector itself) ends the term before OnElected's turn.
	t.Run("OnNewLeader while leading", func(t *testing.T) {
		clk := clocktest.New(t0)
		ctx := barrier(t)
		rec, o := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
		cfg := baseConfig(clk, "a")
		rec.InstallCallbacks(&cfg)
		o.InstallTrace(&cfg)
		inner := cfg.OnNewLeader
		var once sync.Once
		cfg.OnNewLeader = func(ld elector.Leader) {
			inner(ld)
			once.Do(func() { panic("leader boom") })
		}
		e := startElector(t, newFakeLocker(clk), cfg)
		eventually(t, ctx, "a demotion", func() bool { return o.Count(electortest.Demoted) == 1 }, o)
		c := o.Nth(electortest.Demoted, 1).Cause
		var pe *elector.PanicError
		if c.Reason != elector.ReasonPanic || !errors.As(c, &pe) || pe.Where != "OnNewLeader" {
			t.Errorf("demotion cause = %v, want ReasonPanic in OnNewLeader", c)
		}
		// The term ended before its OnElected could run: neither OnElected
		// nor OnDemoted is delivered for it.
		waitFollowing(t, ctx, clk, e, rec)
		clk.Add(retryPeriod)
		tm := rec.WaitElected(t, ctx, 1)
		if tm.Token <= 1 {
			t.Errorf("first OnElected for token %d, want the second term's", tm.Token)
		}
		if _, d := rec.Counts(); d != 0 {
			t.Errorf("OnDemoted delivered for a term whose OnElected was skipped")
		}
		if !e.IsLeader() {
			t.Errorf("IsLeader() = false in the second term")
		}
	})

	t.Run("OnNewLeader while following", func(t *testing.T) {
		clk := clocktest.New(t0)
		ctx := barrier(t)
		fk := newFakeLocker(clk)
		ra := electortest.NewRecorder(t, nil)
		cfgA := baseConfig(clk, "a")
		ra.InstallCallbacks(&cfgA)
		startElector(t, fk, cfgA)
		ra.WaitElected(t, ctx, 1)

		o := electortest.NewRecorder(t, nil)
		cfgB := baseConfig(clk, "b")
		o.InstallTrace(&cfgB)
		cfgB.OnNewLeader = func(elector.Leader) { panic("leader boom") }
		b := startElector(t, fk, cfgB)
		eventually(t, ctx, "the panic reported", func() bool { return o.Count(electortest.Panicked) == 1 }, o)
		if n := o.Count(electortest.Demoted); n != 0 || b.IsLeader() {
			t.Errorf("follower demoted %d times (IsLeader %v) by a callback panic, want nothing", n, b.IsLeader())
		}
	})
}

// TestCallbacksQueueBehindOnElected checks that a demotion while OnElected
// runs is delivered to OnDemoted after it returns, in order, while
// StateChanged reports it at once.
func TestCallbacksQueueBehindOnElected(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec := electortest.NewRecorder(t, nil)
	allow := make(chan struct{})
	rec.SetWork(func(ctx context.Context, _ elector.Term) { <-ctx.Done(); <-allow })
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	e := startElector(t, newFakeLocker(clk), cfg)
	rec.WaitElected(t, ctx, 1)

	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop(ctx) }()
	eventually(t, ctx, "StateChanged(leader, demoting) while OnElected runs", func() bool {
		return rec.SawState(lifecycle.Leader, lifecycle.Demoting)
	}, rec)
	if _, d := rec.Counts(); d != 0 {
		t.Errorf("OnDemoted delivered while OnElected runs")
	}
	close(allow)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if got, want := rec.EventLog(), "leader 1; elected 1; demoted 1 stopped"; got != want {
		t.Errorf("callbacks:\n got %s\nwant %s", got, want)
	}
	if got, want := rec.StateLog(), "follower->acquiring; acquiring->leader; leader->demoting; demoting->stopped"; got != want {
		t.Errorf("states:\n got %s\nwant %s", got, want)
	}
}

func TestNeverLeaderGetsNoOnDemoted(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	fk := newFakeLocker(clk)
	ra, rb := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfgA, cfgB := baseConfig(clk, "a"), baseConfig(clk, "b")
	ra.InstallCallbacks(&cfgA)
	rb.InstallCallbacks(&cfgB)
	startElector(t, fk, cfgA)
	ra.WaitElected(t, ctx, 1)
	b := startElector(t, fk, cfgB)
	eventually(t, ctx, "b follows", func() bool { return rb.SawState(lifecycle.Acquiring, lifecycle.Follower) }, rb)
	stopAndWait(t, b)
	eventually(t, ctx, "b's last callback", func() bool { return rb.LastState() == lifecycle.Stopped }, rb)
	if e, d := rb.Counts(); e != 0 || d != 0 {
		t.Errorf("never-leader got %d OnElected, %d OnDemoted; want 0, 0", e, d)
	}
	if got, want := rb.EventLog(), "leader 1"; got != want {
		t.Errorf("never-leader callbacks:\n got %s\nwant %s", got, want)
	}
	if got, want := rb.StateLog(), "follower->acquiring; acquiring->follower; follower->stopped"; got != want {
		t.Errorf("never-leader states:\n got %s\nwant %s", got, want)
	}
}

// TestParentCancelIsStop checks that cancelling Run's context demotes,
// releases and stops, and a watching follower takes over without the clock
// moving.
func TestParentCancelIsStop(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	wl := watchingLocker{newFakeLocker(clk)}
	ra, rb := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfgA, cfgB := baseConfig(clk, "a"), baseConfig(clk, "b")
	ra.InstallCallbacks(&cfgA)
	rb.InstallCallbacks(&cfgB)

	a, err := elector.New(wl, cfgA)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- a.Run(runCtx) }()
	ra.WaitElected(t, ctx, 1)
	startElector(t, wl, cfgB)
	eventually(t, ctx, "b follows", func() bool { return rb.SawState(lifecycle.Acquiring, lifecycle.Follower) }, rb)

	cancel()
	if err := <-ran; err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	<-a.Done()
	if a.State() != lifecycle.Stopped || a.IsLeader() {
		t.Errorf("after cancel: State() = %v, IsLeader() = %v; want stopped, false", a.State(), a.IsLeader())
	}
	if c := ra.Nth(electortest.OnDemoted, 1).Cause; c.Reason != elector.ReasonStopped {
		t.Errorf("OnDemoted cause = %v, want ReasonStopped", c)
	}
	tm := rb.WaitElected(t, ctx, 1)
	if !tm.AcquiredAt.Equal(t0) {
		t.Errorf("follower took over at %v, want at once (the clock never moved)", tm.AcquiredAt.Sub(t0))
	}
	if err := a.Start(ctx); err == nil {
		t.Errorf("Start after Run = nil, want an error")
	}
}

func TestStopBoundedWhenBackendHangs(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	fl := electortest.Wrap(newFakeLocker(clk))
	rec := electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	e := startElector(t, fl, cfg)
	t.Cleanup(fl.Uncrash) // runs before the elector's cleanup
	rec.WaitElected(t, ctx, 1)
	if err := clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	fl.Crash()

	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop(context.Background()) }()
	eventually(t, ctx, "release to hang", func() bool { return fl.Count(electortest.Release) == 1 }, fl)
	if e.IsLeader() {
		t.Errorf("IsLeader() = true during Stop")
	}
	if err := clk.BlockUntil(ctx, 2); err != nil { // Stop's bound and the release timeout
		t.Fatal(err)
	}
	clk.Add(renewTimeout + drainTimeout + releaseTimeout)
	select {
	case err := <-stopped:
		if !errors.Is(err, elector.ErrStopTimeout) {
			t.Errorf("Stop with a hung backend = %v, want ErrStopTimeout", err)
		}
		wantPrefixOnce(t, "Stop with a hung backend", err)
	case <-ctx.Done():
		t.Fatal("Stop did not return with the backend hung")
	}
	select {
	case <-e.Done():
		t.Errorf("Done closed while the release still hangs")
	default:
	}
	fl.Uncrash()
	select {
	case <-e.Done():
	case <-ctx.Done():
		t.Fatal("Done not closed after the backend came back")
	}

	t.Run("ctx", func(t *testing.T) {
		fl := electortest.Wrap(newFakeLocker(clk))
		states := electortest.NewRecorder(t, nil)
		cfg := baseConfig(clk, "b")
		states.InstallStates(&cfg)
		e := startElector(t, fl, cfg)
		t.Cleanup(fl.Uncrash)
		eventually(t, ctx, "leader", e.IsLeader, states)
		fl.Crash()
		sctx, cancel := context.WithCancel(ctx)
		stopped := make(chan error, 1)
		go func() { stopped <- e.Stop(sctx) }()
		eventually(t, ctx, "release to hang", func() bool { return fl.Count(electortest.Release) == 1 }, fl)
		cancel()
		if err := <-stopped; !errors.Is(err, context.Canceled) {
			t.Errorf("Stop with a cancelled ctx = %v, want context.Canceled", err)
		}
	})
}

func TestDuplicateIdentityReported(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	fk := newFakeLocker(clk)
	ra := electortest.NewRecorder(t, nil)
	cfgA := baseConfig(clk, "same")
	ra.InstallCallbacks(&cfgA)
	a := startElector(t, fk, cfgA)
	ra.WaitElected(t, ctx, 1)

	o, logs := electortest.NewRecorder(t, nil), &logBuffer{}
	cfgB := baseConfig(clk, "same")
	o.InstallTrace(&cfgB)
	cfgB.Logger = logs.logger()
	b := startElector(t, fk, cfgB)
	eventually(t, ctx, "duplicate reported", func() bool { return o.Count(electortest.Duplicate) == 1 }, o)
	dup := o.Nth(electortest.Duplicate, 1).Other
	if dup != a.Holder() || dup == b.Holder() {
		t.Errorf("duplicate reported = %v, want the other holder %v", dup, a.Holder())
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("duplicate identity not logged as a warning:\n%s", logs.String())
	}
	if b.IsLeader() {
		t.Errorf("the duplicate leads too")
	}
}

// TestTimedOutAcquireReleased checks that an attempt that took the claim but
// answered with a timeout leaves a claim whose deadline is unknown; the next
// attempt finds it and releases it instead of leading it.
func TestTimedOutAcquireReleased(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec := electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	fl := electortest.Wrap(newFakeLocker(clk))
	fl.Set(electortest.Acquire, &electortest.Fault{Once: true, AfterErr: context.DeadlineExceeded})
	e := startElector(t, fl, cfg)
	for i := 0; ; i++ {
		waitRest(t, ctx, clk, e, "elected", func() bool { n, _ := rec.Counts(); return n == 1 }, rec)
		if n, _ := rec.Counts(); n == 1 {
			break
		}
		if i == 10 {
			t.Fatal("not elected after 10 retries")
		}
		clk.Add(4 * retryPeriod)
	}
	tm := rec.Nth(electortest.Elected, 1).Term
	if tm.Token != 2 || fl.Count(electortest.Release) != 1 {
		t.Errorf("elected with token %d after %d releases; want token 2 after releasing the timed-out claim once", tm.Token, fl.Count(electortest.Release))
	}
}

func TestLateAcquireNotLed(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec := electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	fl := electortest.Wrap(newFakeLocker(clk))
	block, entered := make(chan struct{}), make(chan struct{})
	fl.Set(electortest.Acquire, &electortest.Fault{Once: true, Block: block, Entered: entered})
	e := startElector(t, fl, cfg)
	<-entered
	clk.Add(ttl) // the answer will come after the deadline it would grant
	close(block)
	eventually(t, ctx, "the late claim released", func() bool { return fl.Count(electortest.Release) == 1 }, fl)
	if e.IsLeader() {
		t.Errorf("IsLeader() = true on a late acquisition")
	}
	waitFollowing(t, ctx, clk, e, rec)
	clk.Add(retryPeriod)
	tm := rec.WaitElected(t, ctx, 1)
	if tm.Token != 2 {
		t.Errorf("first OnElected for token %d, want 2 (the late claim was never led)", tm.Token)
	}
}

// TestFollowerTimesAttemptToExpiry checks that without a watch, a follower's
// next attempt is timed to the holder's observed expiry, not to RetryPeriod.
func TestFollowerTimesAttemptToExpiry(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	fk := newFakeLocker(clk)
	fa := electortest.Wrap(fk)
	ra, rb := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfgA, cfgB := baseConfig(clk, "a"), baseConfig(clk, "b")
	cfgB.RetryPeriod = 4 * time.Second // a poll would come at 12s
	ra.InstallCallbacks(&cfgA)
	rb.InstallCallbacks(&cfgB)
	startElector(t, fa, cfgA)
	t.Cleanup(fa.Uncrash)
	ra.WaitElected(t, ctx, 1)
	b := startElector(t, fk, cfgB)
	eventually(t, ctx, "b follows", func() bool { return rb.SawState(lifecycle.Acquiring, lifecycle.Follower) }, rb)
	fa.Crash() // a's next renewal never returns

	if err := clk.BlockUntil(ctx, 3); err != nil { // a: deadline + renew; b: retry
		t.Fatal(err)
	}
	clk.Add(ttl)
	if b.IsLeader() {
		t.Fatalf("b leads at the claim's expiry, before its attempt")
	}
	clk.Add(time.Millisecond)
	tm := rb.WaitElected(t, ctx, 1)
	if want := t0.Add(ttl + time.Millisecond); !tm.AcquiredAt.Equal(want) {
		t.Errorf("b acquired at %v, want %v (the observed expiry + 1ms)", tm.AcquiredAt.Sub(t0), want.Sub(t0))
	}
}

// wantReelectedAfterBackoff: e, back to follower, campaigns again once its
// backoff of RetryPeriod has passed, and wins a new token.
func wantReelectedAfterBackoff(t *testing.T, ctx context.Context, clk *clocktest.Clock, e *elector.Elector, rec *electortest.Recorder) {
	t.Helper()
	waitFollowing(t, ctx, clk, e, rec)
	clk.Add(retryPeriod)
	if tm := rec.WaitElected(t, ctx, 2); tm.Token <= 1 {
		t.Errorf("re-elected with token %d, want a new token", tm.Token)
	}
}

// waitFollowing waits until e is a follower with its retry timer armed (the
// only timer a follower of a fakeLocker arms).
func waitFollowing(t *testing.T, ctx context.Context, clk *clocktest.Clock, e *elector.Elector, rec *electortest.Recorder) {
	t.Helper()
	waitRest(t, ctx, clk, e, "nothing", func() bool { return false }, rec)
}

// waitRest waits until cond holds or e is a follower with a timer armed,
// with every change of cond and of e's state reported to one of srcs.
func waitRest(t *testing.T, ctx context.Context, clk *clocktest.Clock, e *elector.Elector, what string, cond func() bool, srcs ...electortest.Source) {
	t.Helper()
	for {
		eventually(t, ctx, what+", or a follower", func() bool { return cond() || e.State() == lifecycle.Follower }, srcs...)
		if cond() || following(ctx, clk, e) {
			return
		}
	}
}

// following reports whether e is a follower with a timer armed, once one is.
func following(ctx context.Context, clk *clocktest.Clock, e *elector.Elector) bool {
	if err := clk.BlockUntil(ctx, 1); err != nil {
		return false
	}
	return e.State() == lifecycle.Follower && clk.Waiters() >= 1
}

// TestStopDuringAcquireReleases checks Stop while an attempt is in flight
// that then wins the claim (the TOCTOU of the failure-mode table): the claim
// is released, never led, and never left to expire.
func TestStopDuringAcquireReleases(t *testing.T) {
	for _, kind := range lockerKinds {
		t.Run(kind, func(t *testing.T) {
			clk := clocktest.New(t0)
			ctx := barrier(t)
			rec := electortest.NewRecorder(t, nil)
			cfg := baseConfig(clk, "a")
			rec.InstallCallbacks(&cfg)
			fl := electortest.Wrap(newLocker(t, clk, kind))
			block, entered := make(chan struct{}), make(chan struct{})
			fl.Set(electortest.Acquire, &electortest.Fault{Once: true, Block: block, Entered: entered})
			e := startElector(t, fl, cfg)
			<-entered
			stopped := make(chan error, 1)
			go func() { stopped <- e.Stop(ctx) }()
			// The attempt's timeout and Stop's bound: Stop has begun.
			if err := clk.BlockUntil(ctx, 2); err != nil {
				t.Fatalf("waiting for Stop to begin: %v", err)
			}
			close(block) // the attempt wins the claim at the backend
			if err := <-stopped; err != nil {
				t.Fatalf("Stop = %v", err)
			}
			wantReleasedNeverLed(t, ctx, fl, rec)
		})
	}
}

// wantReleasedNeverLed checks, after Stop, that the claim an interrupted
// attempt took was released once and never led.
func wantReleasedNeverLed(t *testing.T, ctx context.Context, fl *electortest.Locker, rec *electortest.Recorder) {
	t.Helper()
	if n := fl.Count(electortest.Release); n != 1 {
		t.Errorf("Release called %d times for a claim taken while stopping, want 1", n)
	}
	if hs, err := fl.Inner().Holders(ctx, key); err != nil || len(hs) != 0 {
		t.Errorf("Holders after Stop = %v, %v; want none", hs, err)
	}
	if got := rec.EventLog(); got != "" {
		t.Errorf("callbacks: %s, want none", got)
	}
	if got, want := rec.StateLog(), "follower->acquiring; acquiring->stopped"; got != want {
		t.Errorf("states:\n got %s\nwant %s", got, want)
	}
}

// TestFollowerWaitsForExpirySignal checks that over a store whose watch
// reports expiry, a follower sends nothing while the leader renews (no timer
// of its own, so no attempt at each observed expiry), and takes the claim at
// the instant the watch reports that the crashed leader's claim expired.
func TestFollowerWaitsForExpirySignal(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	store := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { store.Close() }) // after the electors stop
	sl, err := backends.NewLocker(store)
	if err != nil {
		t.Fatal(err)
	}
	fa, fb := electortest.Wrap(sl), electortest.Wrap(sl)
	ra, rb, oa := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfgA, cfgB := baseConfig(clk, "a"), baseConfig(clk, "b")
	ra.InstallCallbacks(&cfgA)
	rb.InstallCallbacks(&cfgB)
	oa.InstallTrace(&cfgA)
	startElector(t, fa, cfgA)
	t.Cleanup(fa.Uncrash)
	ra.WaitElected(t, ctx, 1)
	b := startElector(t, fb.Watching(electortest.WatchExpiry), cfgB)
	eventually(t, ctx, "b follows", func() bool { return rb.SawState(lifecycle.Acquiring, lifecycle.Follower) }, rb)

	// Five renewals span 15s: a follower timing its attempts to the expiry
	// it observed would have tried again at 10s.
	const renewals = 5
	for i := 1; i <= renewals; i++ {
		if err := clk.BlockUntil(ctx, 3); err != nil { // a: deadline + renew; the store's expiry timer
			t.Fatal(err)
		}
		clk.Add(renewPeriod)
		eventually(t, ctx, "renewal", func() bool { return oa.Count(electortest.Renewed) >= i }, oa)
	}
	fa.Crash() // a's next renewal never returns
	if err := clk.BlockUntil(ctx, 3); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl) // to the expiry of a's last renewal
	tm := rb.WaitElected(t, ctx, 1)
	if want := t0.Add(renewals*renewPeriod + ttl); !tm.AcquiredAt.Equal(want) {
		t.Errorf("b acquired at %v, want %v (the instant the claim expired)", tm.AcquiredAt.Sub(t0), want.Sub(t0))
	}
	if !b.IsLeader() {
		t.Errorf("b does not lead after OnElected")
	}
	if n := fb.Count(electortest.Acquire); n != 2 {
		t.Errorf("b made %d attempts, want 2: one on start and one on the expiry signal", n)
	}
	if n := fb.Count(electortest.Holders); n != 0 {
		t.Errorf("b listed holders %d times, want 0", n)
	}
}

// TestFollowerBackstopWhenWatchIsSilent checks that a follower waiting on a
// watch that signals expiry still has a bound of its own. The watch here
// never signals (a stream stalled without breaking); the holder dies at once,
// so its claim expires at 10s. The follower tries ten TTLs past that expiry,
// not earlier (it sends nothing while it trusts the watch) and not never:
// before the backstop it waited for good, and this test timed out.
func TestFollowerBackstopWhenWatchIsSilent(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	store := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { store.Close() }) // after the electors stop
	sl, err := backends.NewLocker(store)
	if err != nil {
		t.Fatal(err)
	}
	fa, fb := electortest.Wrap(sl), electortest.Wrap(sl)
	ra, rb := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfgA, cfgB := baseConfig(clk, "a"), baseConfig(clk, "b")
	ra.InstallCallbacks(&cfgA)
	rb.InstallCallbacks(&cfgB)
	startElector(t, fa, cfgA)
	t.Cleanup(fa.Uncrash)
	ra.WaitElected(t, ctx, 1)
	fa.Crash() // a's renewals never return: its claim expires at ttl
	startElector(t, fb.Watching(electortest.WatchSilent), cfgB)
	eventually(t, ctx, "b follows", func() bool { return rb.SawState(lifecycle.Acquiring, lifecycle.Follower) }, rb)
	// a: deadline and renewal timers; b: the backstop (the store arms no
	// expiry timer, as nobody watches it).
	if err := clk.BlockUntil(ctx, 3); err != nil {
		t.Fatal(err)
	}
	backstop := ttl + time.Millisecond + 10*ttl // the expiry b observed, its 1ms step, ten TTLs (no jitter)
	clk.Add(backstop)
	tm := rb.WaitElected(t, ctx, 1)
	if want := t0.Add(backstop); !tm.AcquiredAt.Equal(want) {
		t.Errorf("b acquired at %v, want %v (ten TTLs past the expiry it observed)", tm.AcquiredAt.Sub(t0), want.Sub(t0))
	}
	if n := fb.Count(electortest.Acquire); n != 2 {
		t.Errorf("b made %d attempts, want 2: one on start and one at the backstop", n)
	}
}

// TestStopDuringLostAnswerReleases checks Stop while an attempt is in flight
// that the backend has applied but whose answer never comes. Stop does not
// cancel the attempt; when it times out, the outcome is unknown, so the
// Elector looks for its own claim and releases it rather than leave it to
// expire.
func TestStopDuringLostAnswerReleases(t *testing.T) {
	for _, kind := range lockerKinds {
		t.Run(kind, func(t *testing.T) {
			clk := clocktest.New(t0)
			ctx := barrier(t)
			rec := electortest.NewRecorder(t, nil)
			cfg := baseConfig(clk, "a")
			rec.InstallCallbacks(&cfg)
			fl := electortest.Wrap(newLocker(t, clk, kind))
			entered := make(chan struct{})
			fl.Set(electortest.Acquire, &electortest.Fault{Once: true, LostAnswer: true, Entered: entered})
			e := startElector(t, fl, cfg)
			<-entered // the claim is taken at the backend
			stopped := make(chan error, 1)
			go func() { stopped <- e.Stop(ctx) }()
			if err := clk.BlockUntil(ctx, 2); err != nil { // the attempt's timeout and Stop's bound
				t.Fatal(err)
			}
			clk.Add(renewTimeout)
			if err := <-stopped; err != nil {
				t.Fatalf("Stop = %v", err)
			}
			wantReleasedNeverLed(t, ctx, fl, rec)
		})
	}
}

// TestRenewalTimedFromSend checks that each renewal goes out RenewPeriod
// after the send time of the request the deadline counts from, not after its
// answer, so a backend that answers every renewal just within RenewTimeout
// never ends a term whose timings Validate accepts. Timed from the answer, as
// before, the second renewal went out at 17.4s and was answered at 18.8s,
// after the deadline of 17.9s: the term ended although nothing failed.
func TestRenewalTimedFromSend(t *testing.T) {
	const period, timeout, latency = 8 * time.Second, 1500 * time.Millisecond, 1400 * time.Millisecond
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec, o := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	cfg.RenewPeriod, cfg.RenewTimeout = period, timeout
	rec.InstallCallbacks(&cfg)
	o.InstallTrace(&cfg)
	fl := electortest.Wrap(newLocker(t, clk, "fake"))
	e := startElector(t, fl, cfg)
	rec.WaitElected(t, ctx, 1)

	sent := t0 // the acquisition, answered at once
	for i := 1; i <= 4; i++ {
		block, entered := make(chan struct{}), make(chan struct{})
		fl.Set(electortest.Renew, &electortest.Fault{Once: true, Block: block, Entered: entered})
		if err := clk.BlockUntil(ctx, 2); err != nil { // the deadline timer and the renew timer
			t.Fatal(err)
		}
		want := sent.Add(period)
		clk.Set(want)
		select {
		case <-entered:
		case <-ctx.Done():
			t.Fatalf("renewal %d not sent at %v (RenewPeriod after the last send, %v)", i, want.Sub(t0), sent.Sub(t0))
		}
		if err := clk.BlockUntil(ctx, 2); err != nil { // the deadline timer and the request timeout
			t.Fatal(err)
		}
		clk.Add(latency)
		close(block)
		eventually(t, ctx, fmt.Sprintf("renewal %d answered", i), func() bool { return o.Count(electortest.Renewed) >= i }, o)
		tm, ok := e.Term()
		if wantDeadline := want.Add(ttl - margin); !ok || !tm.Deadline.Equal(wantDeadline) {
			t.Fatalf("after renewal %d answered at %v: Term() = %+v, %v; want the deadline %v", i, clk.Now().Sub(t0), tm, ok, wantDeadline.Sub(t0))
		}
		sent = want
	}
	if _, d := rec.Counts(); d != 0 {
		t.Errorf("demoted %d times (%s), want a term that never ends", d, rec.EventLog())
	}
}

// TestEarlierHolderNotDuplicate checks that a claim held by one of this
// process's own earlier Electors (Config.EarlierHolders), such as one whose
// release failed in an outage, is not reported as a duplicate identity.
func TestEarlierHolderNotDuplicate(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	fk := newFakeLocker(clk)
	ra := electortest.NewRecorder(t, nil)
	cfgA := baseConfig(clk, "same")
	ra.InstallCallbacks(&cfgA)
	a := startElector(t, fk, cfgA)
	ra.WaitElected(t, ctx, 1)

	o, logs := electortest.NewRecorder(t, nil), &logBuffer{}
	cfgB := baseConfig(clk, "same")
	cfgB.EarlierHolders = []backends.Holder{a.Holder()}
	o.InstallCallbacks(&cfgB)
	o.InstallTrace(&cfgB)
	cfgB.Logger = logs.logger()
	b := startElector(t, fk, cfgB)
	eventually(t, ctx, "b saw a lead", func() bool { return o.Count(electortest.NewLeader) == 1 }, o)
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if n := o.Count(electortest.Duplicate); n != 0 || strings.Contains(logs.String(), "another holder with this identity") {
		t.Errorf("b reported its earlier holder %v as a duplicate identity (%d reports):\n%s", a.Holder(), n, logs.String())
	}
}

// TestExpiredCauseNamesRenewError checks that a term that ends because
// renewals kept failing until the deadline ends as expired with the last
// renewal's error in its cause, the store's own words for the outage, and
// still wrapping ErrDeadlinePassed.
func TestExpiredCauseNamesRenewError(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	cfg, rec, o, _ := loggedConfig(t, clk, "a")
	fl := electortest.Wrap(newFakeLocker(clk))
	startElector(t, fl, cfg)
	rec.WaitElected(t, ctx, 1)
	down := errors.New("dial tcp 127.0.0.1:4222: connect: connection refused")
	fl.Set(electortest.Renew, &electortest.Fault{Err: &backends.ClassError{Class: backends.ClassTransient, Err: down}})
	if err := clk.BlockUntil(ctx, 2); err != nil { // the deadline timer and the renew timer
		t.Fatal(err)
	}
	clk.Add(renewPeriod)
	eventually(t, ctx, "a renewal failed", func() bool { return o.Count(electortest.RenewFail) >= 1 }, o)
	// The retry's timer is armed once the failure is recorded.
	if err := clk.BlockUntil(ctx, 2); err != nil { // the deadline timer and the retry timer
		t.Fatal(err)
	}
	clk.Add(ttl)
	got := rec.WaitDemoted(t, ctx, 1)
	if got.Reason != elector.ReasonExpired || !errors.Is(got, elector.ErrDeadlinePassed) || !errors.Is(got, down) {
		t.Errorf("OnDemoted cause = %v, want ReasonExpired wrapping ErrDeadlinePassed and the renewal's error", got)
	}
}
