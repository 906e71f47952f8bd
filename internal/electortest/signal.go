package electortest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
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
