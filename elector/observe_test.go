package elector_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
	"github.com/tenure-go/tenure/slots"
)

// observed is an observer's channel as the tests read it.
type observed struct {
	t      *testing.T
	ch     <-chan elector.Observation
	cancel context.CancelFunc
}

// observe starts an observer of key over l and ends it when the test
// ends, checking that its channel is then closed.
func observe(t *testing.T, l backends.Locker, cfg elector.ObserverConfig) *observed {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := elector.Observe(ctx, l, cfg)
	if err != nil {
		cancel()
		t.Fatalf("Observe: %v", err)
	}
	o := &observed{t: t, ch: ch, cancel: cancel}
	t.Cleanup(o.stop)
	return o
}

func observerConfig(clk *clocktest.Clock) elector.ObserverConfig {
	return elector.ObserverConfig{Key: key, RetryPeriod: retryPeriod, ReadTimeout: renewTimeout, DisableJitter: true, Clock: clk}
}

// stop cancels the observer and waits for its channel to close.
func (o *observed) stop() {
	o.t.Helper()
	o.cancel()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-o.ch:
			if !ok {
				return
			}
		case <-timer.C:
			o.t.Errorf("the observer's channel was not closed after its context was cancelled")
			return
		}
	}
}

// next returns the next observation, failing the test if none comes
// within a generous real-time bound.
func (o *observed) next(what string) elector.Observation {
	o.t.Helper()
	select {
	case obs, ok := <-o.ch:
		if !ok {
			o.t.Fatalf("%s: the observer's channel closed", what)
		}
		return obs
	case <-time.After(30 * time.Second):
		o.t.Fatalf("%s: no observation within 30s", what)
	}
	return elector.Observation{}
}

// want reads the next observation and checks its state and, when held,
// its holder.
func (o *observed) want(what string, state elector.ClaimState, h *backends.Holder) elector.Observation {
	o.t.Helper()
	obs := o.next(what)
	if obs.State != state {
		o.t.Fatalf("%s: observed %v (%+v), want %v", what, obs.State, obs, state)
	}
	if h != nil {
		ld, ok := obs.Leader()
		if !ok || ld.Holder != *h || len(obs.Leaders) != 1 {
			o.t.Fatalf("%s: observed leaders %+v, want %s", what, obs.Leaders, *h)
		}
	}
	return obs
}

// none checks that no observation is waiting.
func (o *observed) none(what string) {
	o.t.Helper()
	select {
	case obs := <-o.ch:
		o.t.Fatalf("%s: observed %v %+v, want nothing new", what, obs.State, obs.Leaders)
	default:
	}
}

func memLocker(t *testing.T, clk *clocktest.Clock) *backends.StoreLocker {
	t.Helper()
	store := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { store.Close() })
	sl, err := backends.NewLocker(store)
	if err != nil {
		t.Fatal(err)
	}
	return sl
}

func newHolder(t *testing.T, id string) backends.Holder {
	t.Helper()
	h, err := backends.NewHolder(id)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestObserveRejects(t *testing.T) {
	clk := clocktest.New(t0)
	if _, err := elector.Observe(t.Context(), nil, observerConfig(clk)); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("Observe(nil locker) = %v, want ErrInvalid", err)
	}
	cfg := observerConfig(clk)
	cfg.Key, cfg.RetryPeriod, cfg.Jitter = "", -time.Second, 0.5
	_, err := elector.Observe(t.Context(), memLocker(t, clk), cfg)
	for _, part := range []string{"key", "retry period", "jitter"} {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("Observe(bad config) = %v, want it to name %s", err, part)
		}
	}
}

// TestObserveTransitions follows a claim over memstore, whose watch
// signals writes, releases and expiry, through every transition: free,
// elected, released, held by a holder that stops renewing, expired, and
// elected again with a greater token.
func TestObserveTransitions(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	sl := memLocker(t, clk)
	o := observe(t, sl, observerConfig(clk))
	o.want("before anyone campaigns", elector.ClaimFree, nil)

	ra := electortest.NewRecorder(t, nil)
	cfgA := baseConfig(clk, "a")
	cfgA.Advertise = "10.0.0.1:7000"
	ra.InstallCallbacks(&cfgA)
	a := startElector(t, sl, cfgA)
	termA := ra.WaitElected(t, ctx, 1)
	ha := a.Holder()
	obs := o.want("a elected", elector.ClaimHeld, &ha)
	if ld, _ := obs.Leader(); ld.Token != termA.Token || ld.Holder.Advertised != "10.0.0.1:7000" || ld.Slot != 0 {
		t.Errorf("observed leader %+v, want token %d advertising 10.0.0.1:7000 in slot 0", ld, termA.Token)
	}

	stopAndWait(t, a)
	o.want("a stopped and released", elector.ClaimFree, nil)

	// A holder that takes the claim and never renews it.
	x := newHolder(t, "x")
	cx, err := sl.TryAcquire(ctx, key, x, ttl)
	if err != nil {
		t.Fatal(err)
	}
	o.want("x took the claim", elector.ClaimHeld, &x)
	clk.Add(ttl - time.Millisecond)
	o.none("x's claim has a millisecond left")
	clk.Add(time.Millisecond)
	o.want("x's claim expired", elector.ClaimFree, nil)

	rb := electortest.NewRecorder(t, nil)
	cfgB := baseConfig(clk, "b")
	rb.InstallCallbacks(&cfgB)
	b := startElector(t, sl, cfgB)
	termB := rb.WaitElected(t, ctx, 1)
	hb := b.Holder()
	obs = o.want("b elected", elector.ClaimHeld, &hb)
	if ld, _ := obs.Leader(); ld.Token != termB.Token || ld.Token <= cx.Token {
		t.Errorf("observed token %d, want b's %d, above x's %d", ld.Token, termB.Token, cx.Token)
	}
}

// TestObserveUnknownDuringOutage checks that a read that fails is reported
// as unknown at once, that a holder is not reported past its claim's
// expiry while the store cannot be read, and that the first read after
// the outage reports what the store holds then.
func TestObserveUnknownDuringOutage(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	sl := memLocker(t, clk)
	fl := electortest.Wrap(sl)
	o := observe(t, fl.Watching(electortest.WatchExpiry), observerConfig(clk))
	o.want("start", elector.ClaimFree, nil)

	x := newHolder(t, "x")
	if _, err := sl.TryAcquire(ctx, key, x, ttl); err != nil {
		t.Fatal(err)
	}
	o.want("x took the claim", elector.ClaimHeld, &x)

	// The store stops answering the observer; x's claim runs out. The
	// read due at its expiry fails: unknown, never x.
	fl.Partition(true)
	clk.Add(ttl + time.Millisecond)
	obs := o.want("x's claim ran out during the outage", elector.ClaimUnknown, nil)
	if !errors.Is(obs.Err, backends.ErrUnavailable) || !strings.Contains(obs.Err.Error(), key) {
		t.Errorf("unknown observation's error = %v, want one naming the key and wrapping ErrUnavailable", obs.Err)
	}

	// y takes the claim meanwhile; the watch signals it, but the observer
	// waits out its backoff (RetryPeriod) before reading.
	y := newHolder(t, "y")
	if _, err := sl.TryAcquire(ctx, key, y, ttl); err != nil {
		t.Fatal(err)
	}
	fl.Partition(false)
	o.none("the backoff after the failed read runs")
	clk.Add(retryPeriod)
	o.want("the store answers again", elector.ClaimHeld, &y)

	// A read that a watch signal calls for and that fails is unknown at
	// once, however long the claim has left.
	fl.Partition(true)
	if err := sl.Release(ctx, mustHolders(t, sl)[0]); err != nil {
		t.Fatal(err)
	}
	o.want("released while the store cannot be read", elector.ClaimUnknown, nil)
	fl.Partition(false)
	clk.Add(retryPeriod)
	o.want("after the outage", elector.ClaimFree, nil)
}

func mustHolders(t *testing.T, l backends.Locker) []backends.Claim {
	t.Helper()
	hs, err := l.Holders(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// TestObserveReadBoundedByTimeout checks that a read that never answers is
// given up after ReadTimeout and reported as unknown: a holder whose claim
// has run out is not reported for as long as the store hangs.
func TestObserveReadBoundedByTimeout(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	sl := memLocker(t, clk)
	hl := &hangingLocker{Locker: sl, entered: make(chan struct{}, 1)}
	o := observe(t, hl, observerConfig(clk))
	o.want("start", elector.ClaimFree, nil)
	x := newHolder(t, "x")
	if _, err := sl.TryAcquire(ctx, key, x, ttl); err != nil {
		t.Fatal(err)
	}
	clk.Add(retryPeriod)
	o.want("x seen at the next poll", elector.ClaimHeld, &x)

	hl.hang.Store(true)
	clk.Add(ttl)
	select {
	case <-hl.entered:
	case <-ctx.Done():
		t.Fatal("the read due at x's expiry was not made")
	}
	clk.Add(renewTimeout)
	o.want("the read hangs past its timeout", elector.ClaimUnknown, nil)
}

// hangingLocker is a Locker whose Holders, once hang is set, waits for
// its context to end (a store that takes the request and never answers).
type hangingLocker struct {
	backends.Locker
	hang    atomic.Bool
	entered chan struct{}
}

func (l *hangingLocker) Holders(ctx context.Context, key string) ([]backends.Claim, error) {
	if !l.hang.Load() {
		return l.Locker.Holders(ctx, key)
	}
	select {
	case l.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestObservePollsWithoutWatch checks that over a Locker that cannot
// watch, reads are timed like a follower's attempts: a free claim is read
// every RetryPeriod, a held one at the expiry the store reported.
func TestObservePollsWithoutWatch(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	sl := memLocker(t, clk)
	fl := electortest.Wrap(sl)
	o := observe(t, fl, observerConfig(clk))
	o.want("start", elector.ClaimFree, nil)
	if err := fl.AwaitCount(ctx, electortest.Holders, 1); err != nil {
		t.Fatal(err)
	}

	x := newHolder(t, "x")
	cx, err := sl.TryAcquire(ctx, key, x, ttl)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(retryPeriod - time.Millisecond)
	o.none("before the next poll")
	clk.Add(time.Millisecond)
	o.want("the poll after RetryPeriod", elector.ClaimHeld, &x)
	if got := fl.Count(electortest.Holders); got != 2 {
		t.Errorf("%d reads, want 2", got)
	}

	// Released: without a watch this is seen at the read due at the
	// expiry the store reported (TTL after the read).
	if err := sl.Release(ctx, cx); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl - retryPeriod)
	o.none("a millisecond before the read due at expiry")
	clk.Add(time.Millisecond)
	o.want("the read at expiry", elector.ClaimFree, nil)
	if got := fl.Count(electortest.Holders); got != 3 {
		t.Errorf("%d reads, want 3: one at start, one per RetryPeriod while free, one at the expiry", got)
	}
}

// TestObserveSlowConsumer checks that a consumer that does not read while
// the claim changes twice receives the latest state, not the one in
// between, and that a change undone before it reads is not delivered.
func TestObserveSlowConsumer(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	sl := memLocker(t, clk)
	fl := electortest.Wrap(sl)
	o := observe(t, fl.Watching(electortest.WatchExpiry), observerConfig(clk))
	o.want("start", elector.ClaimFree, nil)

	x, y := newHolder(t, "x"), newHolder(t, "y")
	cx, err := sl.TryAcquire(ctx, key, x, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := fl.AwaitCount(ctx, electortest.Holders, 2); err != nil {
		t.Fatal(err)
	}
	if err := sl.Release(ctx, cx); err != nil {
		t.Fatal(err)
	}
	if err := fl.AwaitCount(ctx, electortest.Holders, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := sl.TryAcquire(ctx, key, y, ttl); err != nil {
		t.Fatal(err)
	}
	if err := fl.AwaitCount(ctx, electortest.Holders, 4); err != nil {
		t.Fatal(err)
	}
	o.want("after x came and went and y came", elector.ClaimHeld, &y)
	o.none("nothing in between")
}

// TestObserveObservedExpiryReadsEveryThirdTTL checks that on a store that
// judges expiry by local observation and whose watch does not signal
// expiry (as PostgreSQL's), an observer reads a held claim at least every
// TTL/3, however much time the store reported left, so that it sights the
// holder's last renewal within that and reports a crashed holder's claim
// gone within TTL + TTL/3 of it; on a store that judges expiry itself it
// reads at the reported expiry, about once per TTL less a renew period.
func TestObserveObservedExpiryReadsEveryThirdTTL(t *testing.T) {
	for _, tc := range []struct {
		name     string
		observed bool
		min, max int // the observer's reads over the window
	}{
		{"observed", true, 7, 10},
		{"judged by the store", false, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.New(t0)
			ctx := barrier(t)
			ms := memstore.New(memstore.WithClock(clk))
			t.Cleanup(func() { ms.Close() })
			counted := faults.Wrap(ms, clk)
			lo, err := backends.NewLocker(noExpiryEvents{counted, tc.observed})
			if err != nil {
				t.Fatal(err)
			}
			la, err := backends.NewLocker(ms)
			if err != nil {
				t.Fatal(err)
			}
			ra := electortest.NewRecorder(t, nil)
			cfgA := baseConfig(clk, "a")
			ra.InstallCallbacks(&cfgA)
			a := startElector(t, la, cfgA)
			ra.WaitElected(t, ctx, 1)
			o := observe(t, lo, observerConfig(clk))
			ha := a.Holder()
			o.want("a leads", elector.ClaimHeld, &ha)

			const window = 3 * ttl
			before := counted.Calls(faults.OpGet | faults.OpList)
			for start := clk.Now(); clk.Now().Sub(start) < window; {
				// The leader's two timers and the observer's.
				if err := clk.AdvanceWhenBlocked(ctx, 3, 100*time.Millisecond); err != nil {
					t.Fatal(err)
				}
			}
			got := counted.Calls(faults.OpGet|faults.OpList) - before
			t.Logf("over %v the observer made %d reads (TTL %v)", window, got, ttl)
			if got < tc.min || got > tc.max {
				t.Errorf("over %v the observer made %d reads, want %d to %d", window, got, tc.min, tc.max)
			}
			o.none("a led throughout")
		})
	}
}

// TestObserveSlotGroup checks that an observer of a slot group's key
// reports every live slot's holder, by slot, and each change of one.
func TestObserveSlotGroup(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	store := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { store.Close() })
	g, err := slots.New(store, slots.Config{Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	o := observe(t, g, observerConfig(clk))
	o.want("start", elector.ClaimFree, nil)
	x, y := newHolder(t, "x"), newHolder(t, "y")
	cx, err := g.TryAcquire(ctx, key, x, ttl)
	if err != nil {
		t.Fatal(err)
	}
	o.want("x holds a slot", elector.ClaimHeld, &x)
	cy, err := g.TryAcquire(ctx, key, y, ttl)
	if err != nil {
		t.Fatal(err)
	}
	obs := o.next("y holds the other")
	want := []elector.Leader{{Holder: x, Token: cx.Token, Slot: cx.Slot}, {Holder: y, Token: cy.Token, Slot: cy.Slot}}
	if want[0].Slot > want[1].Slot {
		want[0], want[1] = want[1], want[0]
	}
	if obs.State != elector.ClaimHeld || !slices.Equal(obs.Leaders, want) {
		t.Fatalf("observed %v %+v, want %+v (by slot)", obs.State, obs.Leaders, want)
	}
	if err := g.Release(ctx, cx); err != nil {
		t.Fatal(err)
	}
	o.want("x released its slot", elector.ClaimHeld, &y)
}
