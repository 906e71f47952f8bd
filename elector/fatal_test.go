package elector_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/lifecycle"
)

// fatalAttempts is the documented budget: the fourth attempt in a row that
// fails with a fatal error ends the Elector.
const fatalAttempts = 4

// runElector makes an Elector and runs it with Run on a goroutine of its
// own; Run's result arrives on the returned channel. The test's cleanup
// stops it (a no-op if it has ended) and waits for Run.
func runElector(t *testing.T, l backends.Locker, cfg elector.Config) (*elector.Elector, <-chan error) {
	t.Helper()
	e, err := elector.New(l, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ran, exited := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(exited)
		ran <- e.Run(context.Background())
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		select {
		case <-exited:
		case <-ctx.Done():
			t.Errorf("Run did not return after Stop")
		}
	})
	return e, ran
}

// followFatals steps a follower through its backoff after fatal attempts,
// RetryPeriod doubling, from the from-th fatal attempt in a row (which has
// failed already, and whose retry wait is all that is left to arm) to the
// attempts-th.
func followFatals(t *testing.T, ctx context.Context, clk *clocktest.Clock, o *electortest.Recorder, from, attempts int) {
	t.Helper()
	fatals := func() int {
		return o.CountClass(electortest.Lost, backends.ClassFatal) + o.CountClass(electortest.RenewFail, backends.ClassFatal)
	}
	base := fatals() - from
	for n := from; n < attempts; n++ {
		if err := clk.BlockUntil(ctx, 1); err != nil { // the wait before the next attempt
			t.Fatal(err)
		}
		clk.Add(retryPeriod << (n - 1))
		eventually(t, ctx, fmt.Sprintf("fatal attempt %d", n+1), func() bool { return fatals() >= base+n+1 }, o)
	}
}

// stepFollowerUntil moves the clock by step, each time once a timer is
// armed, until cond holds; after each step it waits for e to be at rest
// again (cond holds, or e is a follower waiting for its timer), with a
// change of cond or of e's state reported to one of srcs. A step shorter
// than the follower's next wait never fires two attempts.
func stepFollowerUntil(t *testing.T, ctx context.Context, clk *clocktest.Clock, e *elector.Elector, step time.Duration, what string, cond func() bool, srcs ...electortest.Source) {
	t.Helper()
	for !cond() {
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		clk.Add(step)
		waitRest(t, ctx, clk, e, what, cond, srcs...)
	}
}

// wantEnded checks that e ended on its own with an error wrapping want and
// naming the key, and behaves as after a stop. ran is Run's result.
func wantEnded(t *testing.T, ctx context.Context, clk *clocktest.Clock, e *elector.Elector, ran <-chan error, want error) {
	t.Helper()
	// Ended, it arms no timer; still campaigning, it arms its retry wait.
	eventuallyOrArmed(t, ctx, clk, 1, "the end, or another retry wait", func() bool {
		select {
		case <-e.Done():
			return true
		default:
			return false
		}
	}, electortest.Closed(e.Done()))
	select {
	case <-e.Done():
	default:
		t.Fatalf("after %d fatal attempts in a row the Elector still campaigns (state %v); want Run to end", fatalAttempts, e.State())
	}
	var err error
	select {
	case err = <-ran:
	case <-ctx.Done():
		t.Fatal("Done is closed but Run did not return")
	}
	if !errors.Is(err, want) || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) || backends.Classify(err) != backends.ClassFatal {
		t.Errorf("Run() = %v; want a fatal error wrapping %v that names the key %q", err, want, key)
	}
	if got := e.Err(); got != err {
		t.Errorf("Err() = %v, want Run's error %v", got, err)
	}
	if s := e.State(); s != lifecycle.Stopped {
		t.Errorf("State() = %v, want stopped", s)
	}
	if e.IsLeader() {
		t.Errorf("IsLeader() = true after the end")
	}
	if err := e.Start(context.Background()); !errors.Is(err, elector.ErrStopped) {
		t.Errorf("Start after the end = %v, want ErrStopped", err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Errorf("Stop after the end = %v, want nil", err)
	}
}

// TestFatalAcquireErrorsEndRun checks that an error no retry can fix is
// retried with backoff a few times, then Run returns it. Before, acquire
// errors of every class were retried for ever and Run never returned.
func TestFatalAcquireErrorsEndRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error // returned by every acquire; nil: a malformed record in the store
		want error
	}{
		{"permission denied", fmt.Errorf("test: denied: %w", backends.ErrPermission), backends.ErrPermission},
		{"EACCES", fmt.Errorf("test: %w", &fs.PathError{Op: "open", Path: "/claims/leader", Err: syscall.EACCES}), fs.ErrPermission},
		{"missing resource", fmt.Errorf("test: no namespace: %w", backends.ErrMissingResource), backends.ErrMissingResource},
		{"unsupported", fmt.Errorf("test: %w", errors.ErrUnsupported), errors.ErrUnsupported},
		{"invalid argument", fmt.Errorf("test: %w", backends.ErrInvalid), backends.ErrInvalid},
		{"malformed record", nil, backends.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.New(t0)
			ctx := barrier(t)
			cfg, rec, o, logs := loggedConfig(t, clk, "a")
			var inner backends.Locker
			if tc.err == nil {
				store := memstore.New(memstore.WithClock(clk))
				t.Cleanup(func() { store.Close() })
				if _, err := store.CreateIfAbsent(ctx, key, []byte("not a claim"), 0); err != nil {
					t.Fatal(err)
				}
				sl, err := backends.NewLocker(store)
				if err != nil {
					t.Fatal(err)
				}
				inner = sl
			} else {
				inner = newFakeLocker(clk)
			}
			fl := electortest.Wrap(inner)
			if tc.err != nil {
				fl.Set(electortest.Acquire, &electortest.Fault{Err: tc.err})
			}
			e, ran := runElector(t, fl, cfg)
			eventually(t, ctx, "the first attempt", func() bool { return o.CountClass(electortest.Lost, backends.ClassFatal) >= 1 }, o)
			followFatals(t, ctx, clk, o, 1, fatalAttempts)
			wantEnded(t, ctx, clk, e, ran, tc.want)
			if n := fl.Count(electortest.Acquire); n != fatalAttempts {
				t.Errorf("%d attempts, want %d", n, fatalAttempts)
			}
			if el, _ := rec.Counts(); el != 0 {
				t.Errorf("elected %d times, want never", el)
			}
			if !strings.Contains(logs.String(), "level=ERROR") {
				t.Errorf("no error log; logs:\n%s", logs)
			}
		})
	}
}

// TestFatalRenewErrorEndsTermThenRun checks that a leader whose renewal fails
// with a fatal error demotes at once, OnDemoted pairing its OnElected; the
// attempts that follow fail alike, and after the budget Run returns.
func TestFatalRenewErrorEndsTermThenRun(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec, o := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	o.InstallTrace(&cfg)
	fl := electortest.Wrap(newFakeLocker(clk))
	e, ran := runElector(t, fl, cfg)
	rec.WaitElected(t, ctx, 1)
	revoked := fmt.Errorf("test: revoked: %w", backends.ErrPermission)
	fl.Set(electortest.Renew, &electortest.Fault{Err: revoked})
	fl.Set(electortest.Acquire, &electortest.Fault{Err: revoked})
	if err := clk.BlockUntil(ctx, 2); err != nil { // the end-of-term timer and the renew timer
		t.Fatal(err)
	}
	clk.Add(renewPeriod)
	if c := rec.WaitDemoted(t, ctx, 1); c.Reason != elector.ReasonFatal || !errors.Is(c, backends.ErrPermission) {
		t.Errorf("OnDemoted cause = %v, want ReasonFatal wrapping ErrPermission", c)
	}
	followFatals(t, ctx, clk, o, 1, fatalAttempts)
	wantEnded(t, ctx, clk, e, ran, backends.ErrPermission)
	if el, de := rec.Counts(); el != 1 || de != 1 {
		t.Errorf("OnElected %d times, OnDemoted %d times; want one each", el, de)
	}
	if n := fl.Count(electortest.Acquire); n != 1+fatalAttempts-1 { // the first, won, and three refused
		t.Errorf("%d acquire attempts, want %d", n, fatalAttempts)
	}
}

// TestFatalBudgetResetsOnAnswer checks that fatal errors that clear before
// the budget runs out cost nothing: the Elector leads again, and a later run
// of fatal errors gets the whole budget again. An answer from the backend
// (here a claim held by another) resets the count too.
func TestFatalBudgetResetsOnAnswer(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec, o := electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	o.InstallTrace(&cfg)
	fk := newFakeLocker(clk)
	fl := electortest.Wrap(fk)
	denied := &electortest.Fault{Err: fmt.Errorf("test: denied: %w", backends.ErrPermission)}
	fl.Set(electortest.Acquire, denied)
	e, ran := runElector(t, fl, cfg)
	eventually(t, ctx, "the first attempt", func() bool { return o.CountClass(electortest.Lost, backends.ClassFatal) >= 1 }, o)
	followFatals(t, ctx, clk, o, 1, fatalAttempts-1)
	fl.Set(electortest.Acquire, nil) // repaired within the budget
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Add(retryPeriod << (fatalAttempts - 2))
	rec.WaitElected(t, ctx, 1)

	// Another run of fatal errors, interrupted by an answer: the claim is
	// held by someone else.
	before := o.CountClass(electortest.Lost, backends.ClassFatal)
	fl.Set(electortest.Renew, &electortest.Fault{Once: true, Err: fmt.Errorf("test: revoked: %w", backends.ErrPermission)})
	fl.Set(electortest.Acquire, denied)
	if err := clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	clk.Add(renewPeriod)
	rec.WaitDemoted(t, ctx, 1)
	followFatals(t, ctx, clk, o, 1, fatalAttempts-1) // the renewal, then two acquisitions
	fk.steal(backends.Holder{ID: "thief", Nonce: "1"})
	fl.Set(electortest.Acquire, nil)
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Add(retryPeriod << (fatalAttempts - 2))
	eventually(t, ctx, "the claim seen held", func() bool { return o.CountClass(electortest.Lost, backends.ClassLost) >= 1 }, o)
	fl.Set(electortest.Acquire, denied)
	// The next attempt is timed to the thief's expiry.
	stepFollowerUntil(t, ctx, clk, e, 100*time.Millisecond, "a fatal attempt after the answer", func() bool {
		return o.CountClass(electortest.Lost, backends.ClassFatal) >= before+fatalAttempts-1
	}, o, rec)
	followFatals(t, ctx, clk, o, 1, fatalAttempts-1)
	select {
	case err := <-ran:
		t.Fatalf("Run returned %v after %d fatal attempts in a row, want it to go on", err, fatalAttempts-1)
	default:
	}
	if err := e.Err(); err != nil {
		t.Errorf("Err() = %v while running", err)
	}
}

// TestTransientErrorsNeverEndRun checks that errors whose outcome is unknown
// are retried for as long as the Elector runs: it never gives up on them.
func TestTransientErrorsNeverEndRun(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	o := electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	o.InstallTrace(&cfg)
	o.InstallStates(&cfg)
	fl := electortest.Wrap(newFakeLocker(clk))
	fl.Set(electortest.Acquire, &electortest.Fault{Err: fmt.Errorf("test: %w", backends.ErrUnavailable)})
	e, ran := runElector(t, fl, cfg)
	stepFollowerUntil(t, ctx, clk, e, retryPeriod, "attempts", func() bool {
		return o.CountClass(electortest.Lost, backends.ClassTransient) >= 3*fatalAttempts
	}, o)
	select {
	case err := <-ran:
		t.Fatalf("Run returned %v on transient errors", err)
	case <-e.Done():
		t.Fatalf("Done closed on transient errors")
	default:
	}
	fl.Set(electortest.Acquire, nil)
	stepFollowerUntil(t, ctx, clk, e, retryPeriod, "elected once the backend answers", e.IsLeader, o)
}
