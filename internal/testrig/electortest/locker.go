package electortest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// Op names a Locker operation.
type Op string

// The operations of backends.Locker.
const (
	Acquire Op = "acquire"
	Renew   Op = "renew"
	Release Op = "release"
	Holders Op = "holders"
)

// Fault is what a Locker does to calls of one operation. The zero Fault
// passes calls through.
type Fault struct {
	Once  bool          // removed after the first call it acts on
	Err   error         // returned instead of calling the inner Locker
	Panic any           // panic with this
	Block chan struct{} // wait for it to be closed (ignoring ctx), then call the inner Locker
	// Entered is closed when a call starts waiting on Block, or, with
	// LostAnswer, when the inner Locker has answered.
	Entered  chan struct{}
	AfterErr error // call the inner Locker, then return this error anyway
	// LostAnswer makes a call go to the inner Locker (the backend applies
	// it), then wait for ctx and return its error: the answer is lost.
	LostAnswer bool
	// Before runs before the call reaches the inner Locker, After once it
	// answered, before the caller sees the answer (the claim is zero for
	// Holders). Either may ignore the caller's context: they model an
	// answer already received, or a loop wedged in code that does not look
	// at its context.
	Before func()
	After  func(backends.Claim, error)
}

// ErrCrashed is what a call blocked by Crash returns once Uncrash lets it go.
var ErrCrashed = errors.New("electortest: process crashed")

// Locker wraps a backends.Locker and injects the faults set on it: per
// operation (Set), a crash (every call blocks, ignoring its context, until
// Uncrash) and a partition (every call fails as unavailable). It counts the
// calls of each operation, and is a Source that changes at every call.
//
// Locker itself has no claim watch, whatever the inner Locker has; Watching
// adds one. It is safe for concurrent use.
type Locker struct {
	inner backends.Locker
	sig   Signal

	mu          sync.Mutex
	faults      map[Op]*Fault // guarded by mu
	calls       map[Op]int    // guarded by mu
	crashed     chan struct{} // guarded by mu; non-nil once crashed, closed by Uncrash
	partitioned bool          // guarded by mu
}

var _ backends.Locker = (*Locker)(nil)

// Wrap returns a Locker over inner with no fault set.
func Wrap(inner backends.Locker) *Locker {
	return &Locker{inner: inner, faults: map[Op]*Fault{}, calls: map[Op]int{}}
}

// Inner returns the wrapped Locker.
func (l *Locker) Inner() backends.Locker { return l.inner }

// Store returns the store of the inner Locker when it tells one (nil
// otherwise), so that an Elector over l renews on the grid of the store,
// as one over the inner Locker would.
func (l *Locker) Store() backends.Store {
	if so, ok := l.inner.(interface{ Store() backends.Store }); ok {
		return so.Store()
	}
	return nil
}

// Set makes f act on the calls of op from now on; nil removes it.
func (l *Locker) Set(op Op, f *Fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f == nil {
		delete(l.faults, op)
		return
	}
	l.faults[op] = f
}

// Crash blocks every call from now on until Uncrash.
func (l *Locker) Crash() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.crashed == nil {
		l.crashed = make(chan struct{})
	}
}

// Uncrash lets blocked calls return ErrCrashed: only for cleanup.
func (l *Locker) Uncrash() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.crashed != nil {
		close(l.crashed)
		l.crashed = nil
	}
}

// Partition makes every call fail as unavailable while on.
func (l *Locker) Partition(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partitioned = on
}

// Count returns how many calls of op were made.
func (l *Locker) Count(op Op) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[op]
}

// Changed returns a channel closed at the next call.
func (l *Locker) Changed() <-chan struct{} { return l.sig.Changed() }

// AwaitCount returns once at least n calls of op were made.
func (l *Locker) AwaitCount(ctx context.Context, op Op, n int) error {
	return Until(ctx, fmt.Sprintf("%s call #%d", op, n), func() bool { return l.Count(op) >= n }, l)
}

// do runs op through the faults; call is the inner call.
func (l *Locker) do(ctx context.Context, op Op, call func(ctx context.Context) (backends.Claim, error)) (backends.Claim, error) {
	l.mu.Lock()
	l.calls[op]++
	f := l.faults[op]
	if f != nil && f.Once {
		delete(l.faults, op)
	}
	crashed, partitioned := l.crashed, l.partitioned
	l.mu.Unlock()
	l.sig.Notify()
	if crashed != nil {
		<-crashed
		return backends.Claim{}, ErrCrashed
	}
	if partitioned {
		return backends.Claim{}, fmt.Errorf("electortest: partitioned: %w", backends.ErrUnavailable)
	}
	if f == nil {
		return call(ctx)
	}
	if f.Panic != nil {
		panic(f.Panic)
	}
	if f.Block != nil {
		if f.Entered != nil {
			close(f.Entered)
		}
		<-f.Block
		ctx = context.WithoutCancel(ctx) // the backend applies it, however late
	}
	if f.Err != nil {
		return backends.Claim{}, f.Err
	}
	if f.Before != nil {
		f.Before()
	}
	c, err := call(ctx)
	if f.After != nil {
		f.After(c, err)
	}
	if err != nil {
		return c, err
	}
	if f.LostAnswer {
		if f.Entered != nil {
			close(f.Entered)
		}
		<-ctx.Done()
		return backends.Claim{}, ctx.Err()
	}
	if f.AfterErr != nil {
		return backends.Claim{}, f.AfterErr
	}
	return c, nil
}

// TryAcquire implements backends.Locker.
func (l *Locker) TryAcquire(ctx context.Context, key string, h backends.Holder, ttl time.Duration) (backends.Claim, error) {
	return l.do(ctx, Acquire, func(ctx context.Context) (backends.Claim, error) {
		return l.inner.TryAcquire(ctx, key, h, ttl)
	})
}

// Renew implements backends.Locker.
func (l *Locker) Renew(ctx context.Context, c backends.Claim) (backends.Claim, error) {
	got, err := l.do(ctx, Renew, func(ctx context.Context) (backends.Claim, error) {
		return l.inner.Renew(ctx, c)
	})
	if err != nil {
		return backends.Claim{}, err
	}
	return got, nil
}

// Release implements backends.Locker.
func (l *Locker) Release(ctx context.Context, c backends.Claim) error {
	_, err := l.do(ctx, Release, func(ctx context.Context) (backends.Claim, error) {
		return backends.Claim{}, l.inner.Release(ctx, c)
	})
	return err
}

// Holders implements backends.Locker.
func (l *Locker) Holders(ctx context.Context, key string) ([]backends.Claim, error) {
	var out []backends.Claim
	_, err := l.do(ctx, Holders, func(ctx context.Context) (c backends.Claim, err error) {
		out, err = l.inner.Holders(ctx, key)
		return c, err
	})
	return out, err
}

// Watch is the claim watch Watching adds.
type Watch int

const (
	// WatchPass passes the inner Locker's watch through, declaring that it
	// does not signal expiry.
	WatchPass Watch = iota + 1
	// WatchExpiry passes the watch through, and whether it signals expiry.
	WatchExpiry
	// WatchSilent declares a watch that signals expiry and never signals
	// anything, as a stream that stalled without breaking would.
	WatchSilent
)

// Watching returns l with the claim watch w; for WatchPass and WatchExpiry
// the inner Locker must be a backends.ClaimWatcher.
func (l *Locker) Watching(w Watch) backends.Locker {
	return &watching{Locker: l, w: w}
}

type watching struct {
	*Locker
	w Watch
}

var _ backends.ClaimWatcher = (*watching)(nil)

func (l *watching) WatchClaim(ctx context.Context, key string) (<-chan struct{}, error) {
	if l.w == WatchSilent {
		ch := make(chan struct{})
		context.AfterFunc(ctx, func() { close(ch) })
		return ch, nil
	}
	return l.inner.(backends.ClaimWatcher).WatchClaim(ctx, key)
}

func (l *watching) ExpiryEvents() bool {
	switch l.w {
	case WatchExpiry:
		return l.inner.(backends.ClaimWatcher).ExpiryEvents()
	case WatchSilent:
		return true
	}
	return false
}
