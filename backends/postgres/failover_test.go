package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/crashtest"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/lifecycle"
)

// TestCrashFailoverWithinTTLAndRenewPeriod crashes a leader as its renewal
// is answered (the worst moment) and checks that the follower, a store of
// its own as another process would have, takes the claim after the
// leader's deadline and within TTL + RenewPeriod of the crash. Each process
// has its own fake clock, which its elector and its store run on, and the
// test moves both together; the follower's store judges the expiry on the
// follower's clock. A follower that read the claim only when the remaining
// time it saw ran out sighted each renewal up to a TTL late, and so took
// the claim up to two TTLs after the last renewal.
func TestCrashFailoverWithinTTLAndRenewPeriod(t *testing.T) {
	const (
		ttl         = 10 * time.Second
		renewPeriod = 3 * time.Second
		margin      = 100 * time.Millisecond
		step        = 100 * time.Millisecond
	)
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clkA, clkB := clocktest.New(t0), clocktest.New(t0)
	ctx := within(t, 2*time.Minute)
	crashing := crashtest.Wrap(open(t, dsn, tbl, postgres.WithClock(clkA)))
	follower := open(t, dsn, tbl, postgres.WithClock(clkB))

	start := func(s backends.Store, id string, clk *clocktest.Clock, rec *electortest.Recorder) *elector.Elector {
		cfg := elector.Config{
			Key: "leader", Identity: id, TTL: ttl, RenewPeriod: renewPeriod, RenewTimeout: time.Second,
			SafetyMargin: margin, RetryPeriod: time.Second, DisableJitter: true, Clock: clk,
		}
		rec.Install(&cfg)
		e, err := elector.New(newLocker(t, s), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			e.Stop(sctx) // the crashed leader's release fails
			<-e.Done()
		})
		return e
	}
	recA, recB := electortest.NewRecorder(t, clkA), electortest.NewRecorder(t, clkB)
	a := start(crashing, "a", clkA, recA)
	won := recA.Await(t, ctx, electortest.Won, 1)
	start(follower, "b", clkB, recB)
	recB.Await(t, ctx, electortest.Lost, 1)

	// attempts counts the follower's attempts begun and ended, from its
	// state changes.
	attempts := func() (begun, ended int) {
		for _, ev := range recB.All(electortest.Transition) {
			if ev.To == lifecycle.Acquiring {
				begun++
			}
			if ev.From == lifecycle.Acquiring {
				ended++
			}
		}
		return begun, ended
	}
	crashed := false
	// advance moves both clocks one step, then waits for what the step
	// set off: the leader's renewal when one was due (it renews exactly
	// every RenewPeriod from its acquisition), and an attempt of the
	// follower when its timer fired, then for the follower's next timer.
	advance := func() {
		t.Helper()
		renewals := recA.Count(electortest.Renewed)
		due := won.Term.AcquiredAt.Add(time.Duration(renewals+1) * renewPeriod)
		begun, _ := attempts()
		clkA.Add(step)
		clkB.Add(step)
		if !crashed && !clkA.Now().Before(due) {
			recA.Await(t, ctx, electortest.Renewed, renewals+1)
		}
		if b, _ := attempts(); clkB.Waiters() == 0 || b > begun {
			electortest.Await(t, ctx, "the follower's attempt", func() bool {
				_, e := attempts()
				return e > begun
			}, recB)
		}
		if recB.Count(electortest.Won) == 0 {
			if err := clkB.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := clkB.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	const renewals = 4
	for recA.Count(electortest.Renewed) < renewals {
		advance()
	}
	crashing.Crash()
	crashed = true
	crashedAt := clkA.Now()
	term, ok := a.Term()
	if !ok {
		t.Fatal("the leader has no term after its renewal")
	}
	for recB.Count(electortest.Won) == 0 {
		if clkB.Now().Sub(crashedAt) > 3*ttl {
			t.Fatalf("no takeover %v after the crash", clkB.Now().Sub(crashedAt))
		}
		advance()
	}
	next := recB.Nth(electortest.Won, 1).Term
	took := next.AcquiredAt.Sub(crashedAt)
	t.Logf("the follower took the claim %v after the crash, which came as the leader's renewal was answered (TTL %v, RenewPeriod %v)", took, ttl, renewPeriod)
	if !next.AcquiredAt.After(term.Deadline) {
		t.Errorf("the follower's term began at %v, not after the crashed leader's deadline %v", next.AcquiredAt.Sub(t0), term.Deadline.Sub(t0))
	}
	if limit := ttl + renewPeriod; took > limit {
		t.Errorf("the follower took the claim %v after the crash, want at most TTL + RenewPeriod (%v)", took, limit)
	}
	if next.Token <= term.Token {
		t.Errorf("the follower's token %d is not above the crashed leader's %d", next.Token, term.Token)
	}
}
