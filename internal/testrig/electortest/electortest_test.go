package electortest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestUntilWakesOnChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var s electortest.Signal
	var n atomic.Int32
	done := make(chan error)
	go func() { done <- electortest.Until(ctx, "n = 1", func() bool { return n.Load() == 1 }, &s) }()
	n.Store(1)
	s.Notify()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	expired, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	if err := electortest.Until(expired, "never", func() bool { return false }, &s); !errors.Is(err, context.Canceled) {
		t.Fatalf("Until on a done context = %v, want context.Canceled", err)
	}
}

func TestLockerFaults(t *testing.T) {
	clk := clocktest.New(time.Time{})
	store := memstore.New(memstore.WithClock(clk))
	defer store.Close()
	sl, err := backends.NewLocker(store)
	if err != nil {
		t.Fatal(err)
	}
	l := electortest.Wrap(sl)
	if _, ok := any(l).(backends.ClaimWatcher); ok {
		t.Error("the wrapper shows a claim watch it was not given")
	}
	if _, ok := l.Watching(electortest.WatchPass).(backends.ClaimWatcher); !ok {
		t.Error("Watching(WatchPass) shows no claim watch")
	}
	ctx := context.Background()
	h, _ := backends.NewHolder("a")
	boom := errors.New("boom")
	l.Set(electortest.Acquire, &electortest.Fault{Once: true, Err: boom})
	if _, err := l.TryAcquire(ctx, "k", h, time.Second); !errors.Is(err, boom) {
		t.Fatalf("TryAcquire with a fault = %v, want %v", err, boom)
	}
	var after backends.Claim
	l.Set(electortest.Acquire, &electortest.Fault{After: func(c backends.Claim, _ error) { after = c }})
	c, err := l.TryAcquire(ctx, "k", h, time.Second)
	if err != nil || after != c {
		t.Fatalf("TryAcquire = %v, %v; After saw %v", c, err, after)
	}
	l.Partition(true)
	if _, err := l.Renew(ctx, c); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("Renew while partitioned = %v, want ErrUnavailable", err)
	}
	if got := l.Count(electortest.Acquire); got != 2 {
		t.Errorf("Count(acquire) = %d, want 2", got)
	}
	if err := l.AwaitCount(ctx, electortest.Renew, 1); err != nil {
		t.Error(err)
	}
}

// errorsOf is a testing.TB that keeps what Errorf reports.
type errorsOf struct {
	testing.TB
	got []string
}

func (e *errorsOf) Helper() {}
func (e *errorsOf) Errorf(format string, args ...any) {
	e.got = append(e.got, fmt.Sprintf(format, args...))
}

// TestTermsCheck checks that Terms records terms and refused attempts as the
// callbacks it installs report them, and Check reports a term that began
// while another of its slot ran, with a lower token.
func TestTermsCheck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clk := clock.NewMock()
	ts := electortest.NewTerms(clk)
	var a, b elector.Config
	ts.Install(&a, "a")
	ts.Install(&b, "b")
	actx, aend := context.WithCancel(ctx)
	bctx, bend := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { a.OnElected(actx, elector.Term{Token: 5}) })
	if who := ts.Next(t, ctx); who != "a" {
		t.Fatalf("Next = %s, want a", who)
	}
	clk.Add(time.Second)
	wg.Go(func() { b.OnElected(bctx, elector.Term{Token: 4}) })
	ts.Next(t, ctx)
	if got := ts.Leading(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Leading = %v, want [a b]", got)
	}
	a.Trace.ElectionLost(backends.ClassLost, 0)
	if n := ts.Lost("a"); n != 1 {
		t.Errorf("Lost(a) = %d, want 1", n)
	}
	clk.Add(time.Second)
	aend()
	electortest.Await(t, ctx, "a's term ends", func() bool { return slices.Equal(ts.Leading(), []string{"b"}) }, ts)
	rec := &errorsOf{TB: t}
	all := ts.Check(rec)
	if len(rec.got) != 2 {
		t.Errorf("Check reported %q, want an overlap and a token going down", rec.got)
	}
	if len(all) != 2 || all[0].Who != "a" || all[0].End.IsZero() || all[1].Who != "b" || !all[1].End.IsZero() {
		t.Errorf("Check returned %+v, want a's ended term, then b's running one", all)
	}
	bend()
	wg.Wait()
}
