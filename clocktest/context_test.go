package clocktest

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

func TestWithTimeoutExpiresOnAdd(t *testing.T) {
	c := New(start)
	ctx, cancel := c.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()
	ran := make(chan struct{})
	context.AfterFunc(ctx, func() { close(ran) })

	if d, ok := ctx.Deadline(); !ok || !d.Equal(start.Add(5*time.Second)) {
		t.Errorf("Deadline() = %v, %v; want %v, true", d, ok, start.Add(5*time.Second))
	}
	if got := c.Waiters(); got != 1 {
		t.Errorf("Waiters() = %d, want 1 (the context's timer)", got)
	}
	c.Add(5*time.Second - 1)
	if isDone(ctx) || ctx.Err() != nil || isDone(child) {
		t.Fatalf("done 1ns before the deadline: Err() = %v, child Err() = %v", ctx.Err(), child.Err())
	}
	c.Add(1)
	// No waiting: Add returns only once the contexts it expired are done,
	// and those derived from them with the context package.
	if !isDone(ctx) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("at the deadline: Err() = %v, want context.DeadlineExceeded", ctx.Err())
	}
	if !isDone(child) || !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Errorf("derived context at the deadline: Err() = %v, want context.DeadlineExceeded", child.Err())
	}
	if got := context.Cause(ctx); !errors.Is(got, context.DeadlineExceeded) {
		t.Errorf("Cause() = %v, want context.DeadlineExceeded", got)
	}
	<-ran
	if got := c.Waiters(); got != 0 {
		t.Errorf("Waiters() after expiry = %d, want 0", got)
	}
	cancel()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("cancel after expiry changed Err() to %v", ctx.Err())
	}
}

func TestWithDeadlineCancel(t *testing.T) {
	c := New(start)
	ctx, cancel := c.WithDeadline(t.Context(), start.Add(time.Minute))
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()
	stopped := context.AfterFunc(ctx, func() { t.Error("stopped AfterFunc ran") })
	if !stopped() {
		t.Error("stopping a context.AfterFunc before cancel = false, want true")
	}
	cancel()
	cancel()
	if !errors.Is(ctx.Err(), context.Canceled) || !errors.Is(child.Err(), context.Canceled) {
		t.Errorf("after cancel: Err() = %v, child Err() = %v; want context.Canceled", ctx.Err(), child.Err())
	}
	if got := c.Waiters(); got != 0 {
		t.Errorf("Waiters() after cancel = %d, want 0", got)
	}
	c.Add(time.Hour)
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("after the deadline passed: Err() = %v, want context.Canceled still", ctx.Err())
	}
}

func TestWithDeadlineParent(t *testing.T) {
	c := New(start)

	parent, cancelParent := context.WithCancel(t.Context())
	ctx, cancel := c.WithTimeout(parent, time.Minute)
	defer cancel()
	cancelParent()
	<-ctx.Done() // the parent's cancellation arrives from the context package's goroutine
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("after parent cancel: Err() = %v, want context.Canceled", ctx.Err())
	}
	if got := c.Waiters(); got != 0 {
		t.Errorf("Waiters() = %d, want 0", got)
	}

	// A parent with an earlier deadline wins, as with context.WithDeadline.
	early, cancelEarly := c.WithTimeout(t.Context(), time.Second)
	defer cancelEarly()
	late, cancelLate := c.WithTimeout(early, time.Hour)
	defer cancelLate()
	if d, _ := late.Deadline(); !d.Equal(start.Add(time.Second)) {
		t.Errorf("Deadline() under an earlier parent = %v, want the parent's %v", d, start.Add(time.Second))
	}
	c.Add(time.Second)
	if !errors.Is(early.Err(), context.DeadlineExceeded) || !errors.Is(late.Err(), context.DeadlineExceeded) {
		t.Errorf("after the parent's deadline: Err() = %v, child Err() = %v", early.Err(), late.Err())
	}

	// An already-cancelled parent.
	gone, cancelGone := context.WithCancel(t.Context())
	cancelGone()
	ctx, cancel = c.WithTimeout(gone, time.Minute)
	defer cancel()
	if !errors.Is(ctx.Err(), context.Canceled) {
		t.Errorf("under a cancelled parent: Err() = %v, want context.Canceled", ctx.Err())
	}
}

func TestWithDeadlineInThePast(t *testing.T) {
	c := New(start)
	for _, d := range []time.Time{start, start.Add(-time.Second)} {
		ctx, cancel := c.WithDeadline(t.Context(), d)
		if !isDone(ctx) || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("WithDeadline(now%+v): Err() = %v, want context.DeadlineExceeded at once", d.Sub(start), ctx.Err())
		}
		cancel()
	}
	if got := c.Waiters(); got != 0 {
		t.Errorf("Waiters() = %d, want 0", got)
	}
}

// TestContextErrWhileAdvancing polls Err from other goroutines while the
// clock expires the contexts: the race detector must see nothing (the
// dependency's own context reads its error without a lock).
func TestContextErrWhileAdvancing(t *testing.T) {
	c := New(start)
	var wg sync.WaitGroup
	for i := range 8 {
		ctx, cancel := c.WithTimeout(t.Context(), time.Duration(i+1)*time.Second)
		defer cancel()
		wg.Go(func() {
			for ctx.Err() == nil {
				runtime.Gosched()
			}
		})
	}
	c.Add(8 * time.Second)
	wg.Wait()
}

// TestContextsExpireStepByStep checks that after each Add, exactly the
// contexts whose deadline has been reached are done.
func TestContextsExpireStepByStep(t *testing.T) {
	c := New(start)
	secs := []int{3, 1, 2, 2}
	ctxs := make([]context.Context, len(secs))
	for i, s := range secs {
		ctx, cancel := c.WithTimeout(t.Context(), time.Duration(s)*time.Second)
		defer cancel()
		ctxs[i] = ctx
	}
	for now := 1; now <= 3; now++ {
		c.Add(time.Second)
		for i, s := range secs {
			if got, want := isDone(ctxs[i]), s <= now; got != want {
				t.Errorf("at %ds: context with deadline %ds done = %v, want %v", now, s, got, want)
			}
		}
	}
}
