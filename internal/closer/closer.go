// Package closer is the close-once rule every store's Close follows: the
// first Close marks the store closed and then tears it down; a Close after
// it returns nil at once, without waiting for the first to finish; and a
// store refuses every call that comes after the mark with an error
// wrapping backends.ErrClosed (the store words that error itself).
//
// The mark is set while the store's own mutex is held, so that a
// critical section of the store that reads Closed runs either wholly
// before the mark or wholly after it: one that starts a goroutine the
// teardown waits for can never start it once the teardown has begun.
// The teardown runs without the mutex.
package closer

import (
	"sync"
	"sync/atomic"
)

// Once is a store's closed state. The zero Once is open; a Once must not
// be copied after first use.
type Once struct {
	closed atomic.Bool
}

// Close marks o closed while holding mu (nil: a store with no mutex of
// its own to order with the mark), unless o already is, and then runs
// teardown, if not nil, without mu, and returns its error. A Close after
// the first returns nil without running anything.
func (o *Once) Close(mu sync.Locker, teardown func() error) error {
	if mu != nil {
		mu.Lock()
	}
	first := o.closed.CompareAndSwap(false, true)
	if mu != nil {
		mu.Unlock()
	}
	if !first || teardown == nil {
		return nil
	}
	return teardown()
}

// Closed reports whether Close has been called. It is safe to call at any
// time; a caller that must not race with the mark holds the mutex it
// passes to Close.
func (o *Once) Closed() bool { return o.closed.Load() }
