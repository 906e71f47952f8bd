package clocktest

import (
	"context"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// deadlineCtx is the context WithDeadline and WithTimeout return.
//
// It replaces the mock's own, whose Err reads its error without the lock
// its cancel writes it under (a data race whenever code polls ctx.Err()
// while the clock is advanced), and which is cancelled only from a
// goroutine the mock starts, so it may still be live when Add returns.
// Here the error is guarded, and Add cancels every context it has carried
// past its deadline before returning.
type deadlineCtx struct {
	parent   context.Context
	clock    *Clock
	deadline time.Time // what Deadline reports: the view's reading for a Skewed view
	due      time.Time // the base clock's instant at which it expires
	seq      uint64    // creation order, to break ties between equal dues
	done     chan struct{}

	// mu is taken before the mock's mutex and the Clock's, never after.
	mu         sync.Mutex
	err        error        // mu; set once
	timer      *clock.Timer // mu; the mock timer that cancels at due, nil once done
	stopParent func() bool  // mu; undoes the registration with parent, nil once done
	funcs      []*afterFunc // mu; registered by the context package for derived contexts
}

// afterFunc is one function registered through deadlineCtx.AfterFunc.
type afterFunc struct{ f func() }

// withDeadline returns a context reporting deadline that expires when the
// base clock reaches due.
func (c *Clock) withDeadline(parent context.Context, deadline, due time.Time) (context.Context, context.CancelFunc) {
	if cur, ok := parent.Deadline(); ok && cur.Before(deadline) {
		return context.WithCancel(parent)
	}
	x := &deadlineCtx{parent: parent, clock: c, deadline: deadline, due: due, done: make(chan struct{})}
	cancel := func() { x.cancel(context.Canceled) }
	if err := parent.Err(); err != nil {
		x.cancel(err)
		return x, cancel
	}
	now := c.Now()
	if !due.After(now) {
		x.cancel(context.DeadlineExceeded)
		return x, cancel
	}
	// Tracked before the timer is armed, so that an Add that runs between
	// reading now and arming (which would arm the timer late) still
	// expires the context, in its expire or in the check below.
	c.track(x)
	x.mu.Lock()
	if x.err == nil {
		x.timer = c.mock.AfterFunc(due.Sub(now), func() { x.cancel(context.DeadlineExceeded) })
	}
	x.mu.Unlock()
	c.notify()
	stop := context.AfterFunc(parent, func() { x.cancel(parent.Err()) })
	x.mu.Lock()
	if x.err == nil {
		x.stopParent, stop = stop, nil
	}
	x.mu.Unlock()
	if stop != nil { // done meanwhile
		stop()
	}
	if !due.After(c.Now()) {
		x.cancel(context.DeadlineExceeded)
	}
	return x, cancel
}

// cancel makes x done with err, unless it already is. It stops x's timer,
// releases its parent, and runs the functions the context package
// registered for derived contexts before it returns.
func (x *deadlineCtx) cancel(err error) {
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		return
	}
	// Disarm before closing done: a done context never counts in Waiters.
	if x.timer != nil {
		x.timer.Stop()
	}
	x.clock.untrack(x)
	x.err = err
	close(x.done)
	stop, funcs := x.stopParent, x.funcs
	x.timer, x.stopParent, x.funcs = nil, nil, nil
	x.mu.Unlock()

	if stop != nil {
		stop()
	}
	for _, a := range funcs {
		a.f()
	}
}

func (x *deadlineCtx) Deadline() (time.Time, bool) { return x.deadline, true }

func (x *deadlineCtx) Done() <-chan struct{} { return x.done }

func (x *deadlineCtx) Err() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.err
}

func (x *deadlineCtx) Value(key any) any { return x.parent.Value(key) }

func (x *deadlineCtx) String() string {
	return "clocktest.WithDeadline(" + x.deadline.String() + ")"
}

// AfterFunc lets the context package attach derived contexts (and
// context.AfterFunc) to x without a goroutine each, and cancel them before
// x's cancel returns. It arranges to call f once x is done and returns a
// stop function that reports whether it prevented that call.
func (x *deadlineCtx) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	x.mu.Lock()
	if x.err != nil {
		x.mu.Unlock()
		// Called by the context package with its own lock held; f takes
		// that lock, so it must not run here.
		go f()
		return func() bool { return false }
	}
	x.funcs = append(x.funcs, a)
	x.mu.Unlock()
	return func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		for i, b := range x.funcs {
			if b == a {
				x.funcs = append(x.funcs[:i], x.funcs[i+1:]...)
				return true
			}
		}
		return false
	}
}
