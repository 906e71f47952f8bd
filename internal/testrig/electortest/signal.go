package electortest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/tenure-go/tenure/clocktest"
)

// Signal is a broadcast: Changed returns a channel that the next Notify
// closes. The zero Signal is ready to use.
type Signal struct {
	mu sync.Mutex
	ch chan struct{} // guarded by mu; closed at the next Notify
}

// Notify wakes every waiter.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// Changed returns a channel closed at the next Notify.
func (s *Signal) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Source is anything that says when it changed.
type Source interface {
	Changed() <-chan struct{}
}

// Until returns once cond holds, checking it at the start and after every
// change of one of srcs; it fails with what and ctx's error if ctx ends
// first. cond must only turn true through a change srcs report.
func Until(ctx context.Context, what string, cond func() bool, srcs ...Source) error {
	cases := make([]reflect.SelectCase, len(srcs)+1)
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	for {
		// Take the channels before checking, so a change between the check
		// and the wait is not missed.
		for i, s := range srcs {
			cases[i+1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.Changed())}
		}
		if cond() {
			return nil
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// Await is Until, failing the test if ctx ends first. At least one source
// is required: a condition nothing reports a change of is not a barrier.
func Await(t testing.TB, ctx context.Context, what string, cond func() bool, srcs ...Source) {
	t.Helper()
	if len(srcs) == 0 {
		t.Fatalf("waiting for %s: nothing to wait on", what)
	}
	if err := Until(ctx, what, cond, srcs...); err != nil {
		t.Fatal(err)
	}
}

// Closed is a Source that changes once, when ch is closed.
func Closed(ch <-chan struct{}) Source { return closed(ch) }

type closed <-chan struct{}

func (c closed) Changed() <-chan struct{} { return c }

// UntilOrArmed returns once cond holds (checked at the start and at every
// change of srcs) or n timers are armed on clk (clocktest BlockUntil),
// whichever comes first; it fails with what and ctx's error if ctx ends
// first. It arms no timer.
func UntilOrArmed(ctx context.Context, clk *clocktest.Clock, n int, what string, cond func() bool, srcs ...Source) error {
	bctx, cancel := context.WithCancel(ctx)
	armed := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if clk.BlockUntil(bctx, n) == nil {
			close(armed)
		}
	})
	defer wg.Wait()
	defer cancel()
	isArmed := func() bool {
		select {
		case <-armed:
			return true
		default:
			return false
		}
	}
	what = fmt.Sprintf("%s, or %d armed timers", what, n)
	return Until(ctx, what, func() bool { return isArmed() || cond() }, append(srcs, Closed(armed))...)
}
