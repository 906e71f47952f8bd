package elector_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
)

// fakeLocker is a minimal in-memory Locker with expiry judged by an injected
// clock, and an optional claim watch. It exists so that the elector's tests
// do not depend on one backend only; the same tests run over memstore.
type fakeLocker struct {
	clk clock.Clock

	mu       sync.Mutex
	rev      int64
	held     bool
	entry    backends.Claim // valid while held
	expires  time.Time
	watchers map[chan struct{}]bool
}

func newFakeLocker(clk clock.Clock) *fakeLocker {
	return &fakeLocker{clk: clk, watchers: map[chan struct{}]bool{}}
}

// live reports whether the claim is held now; f.mu held.
func (f *fakeLocker) live() bool {
	if f.held && !f.clk.Now().Before(f.expires) {
		f.held = false
		f.notify()
	}
	return f.held
}

func (f *fakeLocker) notify() {
	for ch := range f.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (f *fakeLocker) snapshot() backends.Claim {
	l := f.entry
	l.Remaining = f.expires.Sub(f.clk.Now())
	return l
}

func (f *fakeLocker) TryAcquire(ctx context.Context, key string, holder backends.Holder, ttl time.Duration) (backends.Claim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return backends.Claim{}, fmt.Errorf("fake: acquire: %w", err)
	}
	if f.live() {
		return backends.Claim{}, &backends.HeldError{Key: key, Holders: []backends.Claim{f.snapshot()}}
	}
	f.rev++
	f.held = true
	f.entry = backends.Claim{Key: key, Holder: holder, Token: f.rev, Revision: f.rev, TTL: ttl}
	f.expires = f.clk.Now().Add(ttl)
	f.notify()
	return f.snapshot(), nil
}

func (f *fakeLocker) Renew(ctx context.Context, lease backends.Claim) (backends.Claim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return backends.Claim{}, fmt.Errorf("fake: renew: %w", err)
	}
	if !f.live() || f.entry.Revision != lease.Revision {
		return backends.Claim{}, fmt.Errorf("fake: renew: %w", backends.ErrNotHolder)
	}
	f.expires = f.clk.Now().Add(lease.TTL)
	return f.snapshot(), nil
}

func (f *fakeLocker) Release(ctx context.Context, lease backends.Claim) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fake: release: %w", err)
	}
	if !f.live() {
		return nil
	}
	if f.entry.Revision != lease.Revision {
		return fmt.Errorf("fake: release: %w", backends.ErrNotHolder)
	}
	f.held = false
	f.notify()
	return nil
}

func (f *fakeLocker) Holders(ctx context.Context, key string) ([]backends.Claim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.live() {
		return nil, nil
	}
	return []backends.Claim{f.snapshot()}, nil
}

// holder returns the live holder, if any.
func (f *fakeLocker) holder() (backends.Claim, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.live() {
		return backends.Claim{}, false
	}
	return f.snapshot(), true
}

// watchingLocker adds WatchClaim to a fakeLocker.
type watchingLocker struct{ *fakeLocker }

func (watchingLocker) ExpiryEvents() bool { return false }

func (w watchingLocker) WatchClaim(ctx context.Context, key string) (<-chan struct{}, error) {
	f := w.fakeLocker
	in := make(chan struct{}, 1)
	out := make(chan struct{}, 1)
	f.mu.Lock()
	f.watchers[in] = true
	f.mu.Unlock()
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				f.mu.Lock()
				delete(f.watchers, in)
				f.mu.Unlock()
				return
			case <-in:
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out, nil
}

// steal hands the claim to another holder, as if this holder's lease had
// expired at the backend and another holder had taken it.
func (f *fakeLocker) steal(h backends.Holder) backends.Claim {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rev++
	f.held = true
	f.entry = backends.Claim{Key: f.entry.Key, Holder: h, Token: f.rev, Revision: f.rev, TTL: f.entry.TTL}
	f.expires = f.clk.Now().Add(f.entry.TTL)
	f.notify()
	return f.snapshot()
}
