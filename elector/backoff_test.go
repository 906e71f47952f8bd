package elector_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/internal/electortest"
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

// A backoff after an error holds whatever the claim watch says: with
// acquisitions failing (transient, then fatal) and the watch signalling
// again and again during each backoff, as the renewals and releases of
// other holders would, the attempts are spaced by the backoff (RetryPeriod,
// then twice, four times... that), never woken early by a signal.
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
