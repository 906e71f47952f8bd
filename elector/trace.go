package elector

import (
	"fmt"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/lifecycle"
)

// Trace is the set of instrumentation hooks (metrics, tracing), set in
// Config.Trace. Every hook is optional: a nil hook costs nothing, and new
// hooks may be added without breaking callers that set some.
//
// Hooks report; they do not steer. Unlike the callbacks (OnElected,
// OnDemoted, OnNewLeader), they are called synchronously where the event
// happens, so a hook must be quick, must not block, must not call Stop or
// the leader's context's Err or Done, must not take a lock that code calling
// the leader's context may hold (a term ended from Err or Done delivers its
// StateChanged on that caller's goroutine), and must be safe for concurrent
// use: different hooks may run at the same time on different goroutines,
// and at the same time as a callback. A hook may call the Elector's query
// methods. A panicking hook is recovered and logged; it changes nothing
// else. Who calls each hook:
//
//	hook                   goroutine                          order
//	StateChanged           any that moves the state (1)       one at a time, in transition order
//	Demoted                the one that ends the term (1)     once per term, as it ends
//	Panicked               the one that recovered it (2)      -
//	ElectionWon,           the Elector's campaign goroutine   event order, among these five
//	  ElectionLost,
//	  Renewed,
//	  RenewFailed,
//	  DuplicateIdentity
//
// Notes to the table:
//
//  1. A term ends, and the state moves, on the Elector's campaign
//     goroutine (a lost, fatal or late renewal; an attempt; a stop), on
//     the clock timer armed for the term's end, on the goroutine calling
//     Stop (or cancelling Start's context, through the Elector's own
//     goroutine), on the callback goroutine when a callback panics, or on
//     the goroutine calling the leader's context's Err or Done when that
//     call finds the term past its end. StateChanged is called by that
//     goroutine, or by another one delivering the transitions queued
//     before it; it never runs concurrently with itself.
//  2. The campaign goroutine (a panicking Locker), the callback goroutine
//     (a panicking callback), or the one ending a term at its end (the
//     timer, or a caller of the leader's context's Err or Done).
type Trace struct {
	// StateChanged is called when the Elector has moved from one lifecycle
	// state to another (a row of the table in package lifecycle).
	// StateChanged calls never overlap one another and come in the order of
	// the transitions, so a gauge set from to is always the current state
	// once calls settle.
	StateChanged func(from, to lifecycle.State)

	// ElectionWon is called when an attempt took the claim and term begins;
	// latency is the attempt's round trip.
	ElectionWon func(term Term, latency time.Duration)

	// ElectionLost is called when an attempt did not take the claim: class is
	// backends.ClassLost when another holder has it, else the class of the
	// backend error (ClassTransient for a claim won too late to lead).
	// latency is the attempt's round trip.
	ElectionLost func(class backends.Class, latency time.Duration)

	// Renewed is called when a renewal extended term (term.Deadline is the
	// new local deadline); latency is its round trip, left the time from its
	// answer to the new local deadline.
	Renewed func(term Term, latency, left time.Duration)

	// RenewFailed is called when a renewal of term failed after latency with
	// an error of class; left is the time from its answer to the local
	// deadline (it may be negative). Transient failures are retried until the
	// term ends.
	RenewFailed func(term Term, class backends.Class, latency, left time.Duration)

	// Demoted is called when term has ended, for cause. It comes as the term
	// ends, before the leader's work has drained and before OnDemoted.
	Demoted func(term Term, cause Cause)

	// DuplicateIdentity is called when another holder with this Elector's
	// Identity (and another nonce) was seen holding the claim.
	DuplicateIdentity func(other backends.Holder)

	// Panicked is called when a panic was recovered in where ("loop",
	// "OnElected", "Release", ...; PanicError.Where).
	Panicked func(where string)
}

// hook runs one Trace hook, recovering and logging its panic.
func (e *Elector) hook(name string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			e.log.Error("elector: trace hook panicked", "hook", name, "panic", fmt.Sprint(r))
		}
	}()
	f()
}

// flushStates calls StateChanged for every transition queued by fireLocked,
// in order. One caller at a time delivers (traceMu); a transition queued
// while another goroutine delivers is delivered by that goroutine or by its
// own firer's flush, whichever comes first, and never twice.
func (e *Elector) flushStates() {
	h := e.cfg.Trace.StateChanged
	if h == nil {
		return
	}
	e.traceMu.Lock()
	defer e.traceMu.Unlock()
	for {
		e.mu.Lock()
		batch := e.states
		e.states = nil
		e.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		for _, s := range batch {
			e.hook("StateChanged", func() { h(s[0], s[1]) })
		}
	}
}
