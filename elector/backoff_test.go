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
	"github.com/tenure-go/tenure/slots"
)

// failingLocker fails every acquisition with err and records when each was
// made; its claim watch signals whenever the test sends on sig (the test's
// send returns once the Elector has received the signal). It is an
// electortest.Source that changes at every attempt.
type failingLocker struct {
	*fakeLocker
	err error
	sig chan struct{}

	changed electortest.Signal
	mu      sync.Mutex
	at      []time.Time // guarded by mu; the clock at each attempt
}

func newFailingLocker(clk clock.Clock, err error) *failingLocker {
	return &failingLocker{fakeLocker: newFakeLocker(clk), err: err, sig: make(chan struct{})}
}

func (f *failingLocker) TryAcquire(ctx context.Context, key string, h backends.Holder, ttl time.Duration) (backends.Claim, error) {
	f.mu.Lock()
	f.at = append(f.at, f.clk.Now())
	f.mu.Unlock()
	f.changed.Notify()
	return backends.Claim{}, fmt.Errorf("test: acquire %q: %w", key, f.err)
}

func (f *failingLocker) attempts() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.at...)
}

func (f *failingLocker) Changed() <-chan struct{} { return f.changed.Changed() }

func (f *failingLocker) ExpiryEvents() bool { return false }

// WatchClaim hands the Elector each signal the test sends on sig, without
// buffering: the test's send completes when the Elector reads the watch.
func (f *failingLocker) WatchClaim(ctx context.Context, key string) (<-chan struct{}, error) {
	out := make(chan struct{})
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case <-f.sig:
			}
			select {
			case out <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// TestBackoffHoldsWhateverTheWatchSays checks that a backoff after an error
// holds whatever the claim watch says: with acquisitions failing (transient,
// then fatal) and the watch signalling again and again during each backoff,
// as the renewals and releases of other holders would, the attempts are
// spaced by the backoff (RetryPeriod, then twice, four times... that), never
// woken early by a signal.
func TestBackoffHoldsWhateverTheWatchSays(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		attempts int
	}{
		{"transient", backends.ErrUnavailable, 5},
		{"fatal", backends.ErrPermission, 4}, // the fourth ends the Elector
	} {
		t.Run(tc.name, func(t *testing.T) {
			const step = retryPeriod / 4
			clk := clocktest.New(t0)
			ctx := barrier(t)
			l := newFailingLocker(clk, tc.err)
			cfg, _, _, logs := loggedConfig(t, clk, "a")
			e := startElector(t, l, cfg)
			held := func() int { return strings.Count(logs.String(), "changed during a backoff") }

			for n := 1; n < tc.attempts; n++ {
				eventually(t, ctx, fmt.Sprintf("attempt %d", n), func() bool { return len(l.attempts()) >= n }, l)
				// Signal at every step of the clock until the next attempt.
				for len(l.attempts()) == n {
					seen := held()
					select {
					case l.sig <- struct{}{}:
					case <-e.Done():
					case <-ctx.Done():
						t.Fatalf("attempt %d: the Elector did not read its watch", n)
					}
					eventually(t, ctx, "the signal answered", func() bool {
						return len(l.attempts()) > n || held() > seen
					}, l, logs)
					if len(l.attempts()) > n {
						break // its spacing is checked below
					}
					if err := clk.BlockUntil(ctx, 1); err != nil { // the backoff's timer
						t.Fatal(err)
					}
					clk.Add(step)
					eventuallyOrArmed(t, ctx, clk, 1, "the next attempt or the backoff's timer", func() bool {
						return len(l.attempts()) > n
					}, l)
				}
			}
			eventually(t, ctx, "the last attempt", func() bool { return len(l.attempts()) >= tc.attempts }, l)

			at := l.attempts()
			want := retryPeriod
			for i := 1; i < len(at); i++ {
				if gap := at[i].Sub(at[i-1]); gap < want || gap > want+step {
					t.Errorf("attempt %d came %v after attempt %d, want the backoff %v (to a step of %v)", i+1, gap, i, want, step)
				}
				want = min(2*want, ttl)
			}
			if tc.err == backends.ErrPermission {
				select {
				case <-e.Done():
				case <-ctx.Done():
					t.Fatal("the Elector did not end after its fatal attempts")
				}
			}
		})
	}
}

// TestSingleClaimOnASlotGroupIsAUsageError checks that a single claim on a
// key that is a slot group is a usage error the store answers plainly: the
// Elector ends at its first attempt, and Err names the problem and wraps
// backends.ErrUsage, rather than ending after repeated attempts as if the
// backend were failing without an answer.
func TestSingleClaimOnASlotGroupIsAUsageError(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	store := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { store.Close() })
	g, err := slots.New(store, slots.Config{Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	worker, err := backends.NewHolder("worker")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.TryAcquire(ctx, key, worker, ttl); err != nil {
		t.Fatal(err)
	}
	sl, err := backends.NewLocker(store)
	if err != nil {
		t.Fatal(err)
	}
	fl := electortest.Wrap(sl)
	cfg, _, _, logs := loggedConfig(t, clk, "a")
	e := startElector(t, fl.Watching(electortest.WatchExpiry), cfg)

	ended := func() bool {
		select {
		case <-e.Done():
			return true
		default:
			return false
		}
	}
	retrying := func() bool { return strings.Contains(logs.String(), "retry_in") }
	eventually(t, ctx, "the Elector ends or backs off", func() bool {
		return ended() || retrying() || fl.Count(electortest.Acquire) > 1
	}, fl, logs, doneSource{e})
	if n := fl.Count(electortest.Acquire); n != 1 || !ended() || retrying() {
		t.Fatalf("after %d attempts: ended %v, backing off to retry %v; want it ended at the first attempt\n%s", n, ended(), retrying(), logs)
	}
	err = e.Err()
	if !errors.Is(err, backends.ErrUsage) || !strings.Contains(err.Error(), "slot group") || strings.Contains(err.Error(), "no answer") {
		t.Errorf("Err() = %v; want a usage error (backends.ErrUsage) naming the slot group", err)
	}
	if hs, err := store.Get(ctx, key); err == nil {
		t.Errorf("the refused claim is in the store: %+v", hs)
	}
}

// doneSource is an electortest.Source that changes when the Elector ends.
type doneSource struct{ e *elector.Elector }

func (d doneSource) Changed() <-chan struct{} { return d.e.Done() }
