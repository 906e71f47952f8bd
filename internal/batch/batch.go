// Package batch holds what the stores that answer KeepAlive calls in
// batches share: the calls waiting for the next batch with the time the
// earliest of them must be served by, when a call must be served, and a
// batch's context that ends once every caller in it has given up.
package batch

import (
	"context"
	"sync/atomic"
	"time"
)

// Queue is the calls waiting for a batch. It has no lock of its own: its
// owner guards it with the lock that guards the rest of the batcher's
// state, so that what the batcher reads together stays consistent.
type Queue[R any] struct {
	pending []R
	due     time.Time // the earliest time a pending call must be served
	stopped bool
}

// Add queues r, which must be served by due. ok is false, and nothing is
// queued, once the queue is stopped. wake reports that the batcher's next
// batch may have to come sooner than it planned: r is the only call, or
// the most urgent.
func (q *Queue[R]) Add(r R, due time.Time) (wake, ok bool) {
	if q.stopped {
		return false, false
	}
	q.pending = append(q.pending, r)
	wake = len(q.pending) == 1 || due.Before(q.due)
	if wake {
		q.due = due
	}
	return wake, true
}

// Len is how many calls wait.
func (q *Queue[R]) Len() int { return len(q.pending) }

// Due is when the most urgent waiting call must be served; meaningful only
// while Len is positive.
func (q *Queue[R]) Due() time.Time { return q.due }

// First is the call that has waited longest; Len must be positive.
func (q *Queue[R]) First() R { return q.pending[0] }

// Take removes every waiting call and returns them, oldest first.
func (q *Queue[R]) Take() []R {
	rs := q.pending
	q.pending = nil
	return rs
}

// Stop stops the queue, so that Add refuses every later call, and returns
// the calls that were waiting, for the owner to fail.
func (q *Queue[R]) Stop() []R {
	q.stopped = true
	return q.Take()
}

// CallDue is when a call begun at start, renewing for ttl, must be served
// by a batcher that runs at most every every: after every, but within a
// quarter of ttl, and within half the time ctx gives the call, so that a
// renewal bounded by its renew period, arriving just after a batch, gets
// its answer in time rather than waiting a whole interval for the next.
func CallDue(ctx context.Context, start time.Time, every, ttl time.Duration) time.Time {
	wait := min(every, ttl/4)
	if d, ok := ctx.Deadline(); ok && d.Sub(start)/2 < wait {
		wait = max(d.Sub(start)/2, 0)
	}
	return start.Add(wait)
}

// CancelWhenAllDone calls cancel once the context of every one of calls
// (ctxOf) is done: a batch's requests are for its callers, and when all of
// them have given up it stops. With no calls it never calls cancel. stop
// releases what it set up, and must be called when the batch ends.
func CancelWhenAllDone[R any](cancel context.CancelFunc, calls []R, ctxOf func(R) context.Context) (stop func()) {
	var live atomic.Int64
	live.Store(int64(len(calls)))
	stops := make([]func() bool, 0, len(calls))
	for _, c := range calls {
		stops = append(stops, context.AfterFunc(ctxOf(c), func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}
