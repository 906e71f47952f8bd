package crashtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// Store is a backends.Store that passes calls to an inner store until it is
// crashed. Make one with Wrap. It is safe for concurrent use.
//
// Store has Watch and Txn methods whatever the inner store is; Capabilities
// declares CapWatch and CapTxn only when the inner store declares them and
// implements Watcher and Txner, and the methods fail with an error wrapping
// backends.ErrUnsupported otherwise.
type Store struct {
	inner backends.Store
	caps  backends.Capabilities

	crashed   chan struct{} // closed by Crash
	crashOnce sync.Once
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
}

var (
	_ backends.Store   = (*Store)(nil)
	_ backends.Watcher = (*Store)(nil)
	_ backends.Txner   = (*Store)(nil)
	_ backends.Scanner = (*Store)(nil)
)

// Wrap returns a Store over inner that has not crashed.
func Wrap(inner backends.Store) *Store {
	caps := inner.Capabilities()
	if _, ok := inner.(backends.Watcher); !ok {
		caps.Atomic &^= backends.CapWatch
		caps.ExpiryEvents = false
	}
	if _, ok := inner.(backends.Txner); !ok {
		caps.Atomic &^= backends.CapTxn
	}
	return &Store{inner: inner, caps: caps, crashed: make(chan struct{}), closed: make(chan struct{})}
}

// Crash makes s answer nothing from now on: every later call fails without
// reaching the inner store, calls in flight fail when the inner store
// answers them, and the watches opened through s end.
func (s *Store) Crash() { s.crashOnce.Do(func() { close(s.crashed) }) }

// Crashed reports whether Crash has been called.
func (s *Store) Crashed() bool {
	select {
	case <-s.crashed:
		return true
	default:
		return false
	}
}

// refuse returns the error of a call that s does not pass on, or nil.
func (s *Store) refuse(op, key string) error {
	if s.Crashed() {
		return fmt.Errorf("crashtest: %s %q: the process crashed: %w", op, key, backends.ErrUnavailable)
	}
	select {
	case <-s.closed:
		return fmt.Errorf("crashtest: %s %q: %w", op, key, backends.ErrClosed)
	default:
		return nil
	}
}

// run passes one call to the inner store unless s has crashed, and hides
// the answer of a call that was in flight when s crashed.
func run[T any](s *Store, op, key string, call func() (T, error)) (T, error) {
	var zero T
	if err := s.refuse(op, key); err != nil {
		return zero, err
	}
	v, err := call()
	if s.Crashed() {
		return zero, fmt.Errorf("crashtest: %s %q: the process crashed before the answer came: %w", op, key, backends.ErrUnavailable)
	}
	return v, err
}

// Capabilities implements backends.Store.
func (s *Store) Capabilities() backends.Capabilities { return s.caps }

// Get implements backends.Store.
func (s *Store) Get(ctx context.Context, key string) (backends.Entry, error) {
	return run(s, "get", key, func() (backends.Entry, error) { return s.inner.Get(ctx, key) })
}

// List implements backends.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]backends.Entry, error) {
	return run(s, "list", prefix, func() ([]backends.Entry, error) { return s.inner.List(ctx, prefix) })
}

// Scan implements backends.Scanner: it is the inner store's Scan, or its
// List where the inner store has no Scan.
func (s *Store) Scan(ctx context.Context, prefix string) ([]backends.Entry, error) {
	return run(s, "scan", prefix, func() ([]backends.Entry, error) {
		if sc, ok := s.inner.(backends.Scanner); ok {
			return sc.Scan(ctx, prefix)
		}
		return s.inner.List(ctx, prefix)
	})
}

// CreateIfAbsent implements backends.Store.
func (s *Store) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	return run(s, "create", key, func() (backends.Entry, error) { return s.inner.CreateIfAbsent(ctx, key, value, ttl) })
}

// CompareAndSet implements backends.Store.
func (s *Store) CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	return run(s, "cas", key, func() (backends.Entry, error) { return s.inner.CompareAndSet(ctx, key, rev, value, ttl) })
}

// CompareAndDelete implements backends.Store.
func (s *Store) CompareAndDelete(ctx context.Context, key string, rev int64) error {
	_, err := run(s, "delete", key, func() (struct{}, error) { return struct{}{}, s.inner.CompareAndDelete(ctx, key, rev) })
	return err
}

// KeepAlive implements backends.Store.
func (s *Store) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	return run(s, "keepalive", key, func() (backends.Entry, error) { return s.inner.KeepAlive(ctx, key, rev, ttl) })
}

// Txn implements backends.Txner. It fails with an error wrapping
// backends.ErrUnsupported unless the inner store declares and implements
// transactions.
func (s *Store) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	key := ""
	switch {
	case len(ops) > 0:
		key = ops[0].Key
	case len(conds) > 0:
		key = conds[0].Key
	}
	if !s.caps.Has(backends.CapTxn) {
		return backends.TxnResult{}, fmt.Errorf("crashtest: txn %q: inner store %T cannot run transactions: %w", key, s.inner, backends.ErrUnsupported)
	}
	return run(s, "txn", key, func() (backends.TxnResult, error) { return s.inner.(backends.Txner).Txn(ctx, conds, ops) })
}

// Watch implements backends.Watcher. It fails with an error wrapping
// backends.ErrUnsupported unless the inner store declares and implements
// watch. The returned channel delivers the inner watch's events until ctx
// is done, the inner watch ends, or s crashes or is closed.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	if !s.caps.Has(backends.CapWatch) {
		return nil, fmt.Errorf("crashtest: watch %q: inner store %T cannot watch: %w", prefix, s.inner, backends.ErrUnsupported)
	}
	ctx, cancel := context.WithCancel(ctx)
	in, err := run(s, "watch", prefix, func() (<-chan backends.Event, error) {
		return s.inner.(backends.Watcher).Watch(ctx, prefix)
	})
	if err != nil {
		cancel() // ends an inner watch opened as s crashed
		return nil, err
	}
	out := make(chan backends.Event)
	go s.forward(ctx, cancel, in, out)
	return out, nil
}

// forward copies events from in to out until ctx is done, in is closed, or
// s crashes or is closed, then closes out, ends the inner watch and waits for in to be
// closed, so that nothing of the watch outlives its context.
func (s *Store) forward(ctx context.Context, cancel context.CancelFunc, in <-chan backends.Event, out chan<- backends.Event) {
	defer func() {
		close(out)
		cancel()
		for range in {
		}
	}()
	for {
		select {
		case ev, ok := <-in:
			if !ok {
				return
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			case <-s.crashed:
				return
			case <-s.closed:
				return
			}
		case <-ctx.Done():
			return
		case <-s.crashed:
			return
		case <-s.closed:
			return
		}
	}
}

// Close implements backends.Store. It closes s, not the inner store: the
// watches opened through s end, and later calls fail with an error wrapping
// backends.ErrClosed (or, once s has crashed, ErrUnavailable).
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return nil
}
