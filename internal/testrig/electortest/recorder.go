package electortest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/fsm"
	"github.com/tenure-go/tenure/lifecycle"
)

// Kind is the kind of an Event.
type Kind string

// Event kinds.
const (
	Won        Kind = "won"         // Trace.ElectionWon
	Lost       Kind = "lost"        // Trace.ElectionLost
	Renewed    Kind = "renewed"     // Trace.Renewed
	RenewFail  Kind = "renew-fail"  // Trace.RenewFailed
	Demoted    Kind = "demoted"     // Trace.Demoted
	Duplicate  Kind = "duplicate"   // Trace.DuplicateIdentity
	Panicked   Kind = "panicked"    // Trace.Panicked
	Transition Kind = "transition"  // Trace.StateChanged
	Elected    Kind = "on-elected"  // OnElected started
	WorkDone   Kind = "work-done"   // OnElected returned
	OnDemoted  Kind = "on-demoted"  // OnDemoted
	NewLeader  Kind = "new-leader"  // OnNewLeader
	Acquired   Kind = "acquired"    // a naive participant took the claim
	Dropped    Kind = "dropped"     // a naive participant stopped leading
	Attempt    Kind = "attempt"     // a naive participant tried to take the claim
	StopCalled Kind = "stop-called" // a naive participant's OnDemoted-like callback at Stop
)

// Event is one thing a participant reported.
type Event struct {
	Kind  Kind
	At    time.Time // the recorder's clock when it was recorded
	Term  elector.Term
	Ctx   context.Context // Elected: the term's context
	Cause elector.Cause
	Class backends.Class
	Other backends.Holder // NewLeader, Duplicate
	From  lifecycle.State // Transition
	To    lifecycle.State // Transition
	Left  time.Duration   // Renewed
	Where string          // Panicked
}

// Recorder records what an Elector reports through the callbacks and the
// Trace hooks it installs, with the time of its clock, and lets a test wait
// for events. It checks the rules the elector promises its callbacks, and
// reports a broken one as a test error: never two callbacks at once,
// OnElected and OnDemoted alternating and pairing by token, starting with
// OnElected, OnNewLeader tokens of one slot never going down, state changes
// reported one at a time and forming a path of the lifecycle table.
//
// A Recorder is a Source that changes at every event.
type Recorder struct {
	t   testing.TB
	clk clock.Clock
	sig Signal

	in      atomic.Int32  // callbacks running
	inState atomic.Int32  // StateChanged calls running
	release chan struct{} // closed by Unblock

	mu     sync.Mutex
	events []Event                                   // guarded by mu
	work   func(ctx context.Context, t elector.Term) // guarded by mu; the body of OnElected
	check  func(where string)                        // guarded by mu; runs inside every callback
	// NewLeaderGate, if set before the Elector starts, holds OnNewLeader
	// (and so every callback queued after it) until it is closed or
	// Unblock is called.
	NewLeaderGate chan struct{}
}

// NewRecorder returns a Recorder that reports broken rules to t and
// timestamps events with clk (the zero time if nil).
func NewRecorder(t testing.TB, clk clock.Clock) *Recorder {
	return &Recorder{t: t, clk: clk, release: make(chan struct{})}
}

// Add records ev, as of now.
func (r *Recorder) Add(ev Event) {
	if r.clk != nil {
		ev.At = r.clk.Now()
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	r.sig.Notify()
}

// Changed returns a channel closed at the next event.
func (r *Recorder) Changed() <-chan struct{} { return r.sig.Changed() }

// SetWork replaces the body of OnElected for terms elected from now on; by
// default OnElected blocks until its context is done.
func (r *Recorder) SetWork(f func(ctx context.Context, t elector.Term)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.work = f
}

// SetCheck makes f run inside every callback, with the callback's name.
func (r *Recorder) SetCheck(f func(where string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.check = f
}

// Unblock closes the channel Released returns, and opens NewLeaderGate.
func (r *Recorder) Unblock() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.release:
	default:
		close(r.release)
	}
}

// Released is closed by Unblock: work that waits on it ends at cleanup.
func (r *Recorder) Released() <-chan struct{} { return r.release }

func (r *Recorder) enter(where string) {
	if n := r.in.Add(1); n != 1 {
		r.t.Errorf("%s runs while %d other callbacks run", where, n-1)
	}
	r.mu.Lock()
	check := r.check
	r.mu.Unlock()
	if check != nil {
		check(where)
	}
}

func (r *Recorder) exit() { r.in.Add(-1) }

// Install points cfg's callbacks and every Trace hook at r.
func (r *Recorder) Install(cfg *elector.Config) {
	r.InstallCallbacks(cfg)
	r.InstallTrace(cfg)
}

// InstallCallbacks points cfg's callbacks and Trace.StateChanged at r.
func (r *Recorder) InstallCallbacks(cfg *elector.Config) {
	cfg.OnElected = func(ctx context.Context, tm elector.Term) {
		r.enter("OnElected")
		defer r.exit()
		r.mu.Lock()
		if e, d := r.countLocked(Elected), r.countLocked(OnDemoted); e != d {
			r.t.Errorf("OnElected(token %d) while term %d was not demoted", tm.Token, r.nthLocked(Elected, e).Term.Token)
		}
		work := r.work
		r.mu.Unlock()
		r.Add(Event{Kind: Elected, Term: tm, Ctx: ctx})
		defer r.Add(Event{Kind: WorkDone, Term: tm})
		if work != nil {
			work(ctx, tm)
			return
		}
		<-ctx.Done()
	}
	cfg.OnDemoted = func(tm elector.Term, c elector.Cause) {
		r.enter("OnDemoted")
		defer r.exit()
		r.mu.Lock()
		if e, d := r.countLocked(Elected), r.countLocked(OnDemoted); e != d+1 {
			r.t.Errorf("OnDemoted(token %d, %v) without an OnElected to pair with (%d elected, %d demoted)", tm.Token, c, e, d)
		} else if want := r.nthLocked(Elected, e).Term.Token; tm.Token != want {
			r.t.Errorf("OnDemoted for token %d, want the last elected token %d", tm.Token, want)
		}
		r.mu.Unlock()
		r.Add(Event{Kind: OnDemoted, Term: tm, Cause: c})
	}
	cfg.OnNewLeader = func(ld elector.Leader) {
		r.enter("OnNewLeader")
		defer r.exit()
		r.mu.Lock()
		for i := len(r.events) - 1; i >= 0; i-- { // tokens of different slots are not comparable
			if ev := r.events[i]; ev.Kind == NewLeader && ev.Term.Slot == ld.Slot {
				if ld.Token < ev.Term.Token {
					r.t.Errorf("OnNewLeader(token %d, slot %d) after token %d: out of order", ld.Token, ld.Slot, ev.Term.Token)
				}
				break
			}
		}
		gate := r.NewLeaderGate
		r.mu.Unlock()
		r.Add(Event{Kind: NewLeader, Other: ld.Holder, Term: elector.Term{Token: ld.Token, Slot: ld.Slot}})
		if gate != nil {
			select {
			case <-gate:
			case <-r.release:
			}
		}
	}
	r.InstallStates(cfg)
}

// InstallStates points cfg's Trace.StateChanged, and nothing else, at r.
func (r *Recorder) InstallStates(cfg *elector.Config) {
	cfg.Trace.StateChanged = func(from, to lifecycle.State) {
		if n := r.inState.Add(1); n != 1 {
			r.t.Errorf("StateChanged(%v, %v) runs while %d other StateChanged calls run", from, to, n-1)
		}
		defer r.inState.Add(-1)
		if prev := r.LastState(); from != prev {
			r.t.Errorf("StateChanged(%v, %v) after a change to %v", from, to, prev)
		}
		if !validTransition(from, to) {
			r.t.Errorf("StateChanged(%v, %v) is not a transition of the table", from, to)
		}
		r.Add(Event{Kind: Transition, From: from, To: to})
	}
}

// InstallTrace points cfg's Trace hooks, all but StateChanged, at r.
func (r *Recorder) InstallTrace(cfg *elector.Config) {
	tr := &cfg.Trace
	tr.ElectionWon = func(t elector.Term, _ time.Duration) { r.Add(Event{Kind: Won, Term: t}) }
	tr.ElectionLost = func(c backends.Class, _ time.Duration) { r.Add(Event{Kind: Lost, Class: c}) }
	tr.Renewed = func(t elector.Term, _, left time.Duration) { r.Add(Event{Kind: Renewed, Term: t, Left: left}) }
	tr.RenewFailed = func(t elector.Term, c backends.Class, _, _ time.Duration) {
		r.Add(Event{Kind: RenewFail, Term: t, Class: c})
	}
	tr.Demoted = func(t elector.Term, c elector.Cause) { r.Add(Event{Kind: Demoted, Term: t, Cause: c}) }
	tr.DuplicateIdentity = func(h backends.Holder) { r.Add(Event{Kind: Duplicate, Other: h}) }
	tr.Panicked = func(where string) { r.Add(Event{Kind: Panicked, Where: where}) }
}

func validTransition(from, to lifecycle.State) bool {
	for _, ev := range fsm.Events() {
		if got, ok := fsm.Next(from, ev); ok && got == to {
			return true
		}
	}
	return false
}

func (r *Recorder) countLocked(kinds ...Kind) int {
	n := 0
	for _, ev := range r.events {
		if slices.Contains(kinds, ev.Kind) {
			n++
		}
	}
	return n
}

// nthLocked returns the n-th event (from 1) of kind.
func (r *Recorder) nthLocked(kind Kind, n int) Event {
	for _, ev := range r.events {
		if ev.Kind == kind {
			if n--; n == 0 {
				return ev
			}
		}
	}
	return Event{}
}

// Count returns how many events of kind were recorded.
func (r *Recorder) Count(kind Kind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.countLocked(kind)
}

// CountClass returns how many events of kind with class c were recorded.
func (r *Recorder) CountClass(kind Kind, c backends.Class) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, ev := range r.events {
		if ev.Kind == kind && ev.Class == c {
			n++
		}
	}
	return n
}

// Snapshot returns every event so far.
func (r *Recorder) Snapshot() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// All returns the events of kind.
func (r *Recorder) All(kind Kind) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, ev := range r.events {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// Nth returns the n-th event (from 1) of kind; it must have been recorded.
func (r *Recorder) Nth(kind Kind, n int) Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nthLocked(kind, n)
}

// Wait blocks until at least n events of kind were recorded and returns the
// n-th.
func (r *Recorder) Wait(ctx context.Context, kind Kind, n int) (Event, error) {
	return r.WaitAny(ctx, []Kind{kind}, n)
}

// WaitAny blocks until at least n events of any of kinds were recorded and
// returns the n-th.
func (r *Recorder) WaitAny(ctx context.Context, kinds []Kind, n int) (Event, error) {
	var got Event
	seen := 0
	err := Until(ctx, fmt.Sprintf("event %q #%d", kinds, n), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		seen = 0
		for _, ev := range r.events {
			if slices.Contains(kinds, ev.Kind) {
				if seen++; seen == n {
					got = ev
					return true
				}
			}
		}
		return false
	}, r)
	if err != nil {
		return Event{}, fmt.Errorf("%w (saw %d)", err, seen)
	}
	return got, nil
}

// Await is Wait, failing the test if ctx ends first.
func (r *Recorder) Await(t testing.TB, ctx context.Context, kind Kind, n int) Event {
	t.Helper()
	ev, err := r.Wait(ctx, kind, n)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// WaitElected waits for the n-th OnElected and returns its term.
func (r *Recorder) WaitElected(t testing.TB, ctx context.Context, n int) elector.Term {
	t.Helper()
	return r.Await(t, ctx, Elected, n).Term
}

// WaitDemoted waits for the n-th OnDemoted and returns its cause.
func (r *Recorder) WaitDemoted(t testing.TB, ctx context.Context, n int) elector.Cause {
	t.Helper()
	return r.Await(t, ctx, OnDemoted, n).Cause
}

// Counts returns how many times OnElected and OnDemoted were called.
func (r *Recorder) Counts() (elected, demoted int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.countLocked(Elected), r.countLocked(OnDemoted)
}

// LastState is the state of the last change reported, Follower before any.
func (r *Recorder) LastState() lifecycle.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].Kind == Transition {
			return r.events[i].To
		}
	}
	return lifecycle.Follower
}

// SawState reports whether the change from→to was reported.
func (r *Recorder) SawState(from, to lifecycle.State) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if ev.Kind == Transition && ev.From == from && ev.To == to {
			return true
		}
	}
	return false
}

// EventLog is the callbacks so far: "elected 1; leader 1; demoted 1 lost; ...".
func (r *Recorder) EventLog() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		switch ev.Kind {
		case Elected:
			out = append(out, fmt.Sprintf("elected %d", ev.Term.Token))
		case OnDemoted:
			out = append(out, fmt.Sprintf("demoted %d %v", ev.Term.Token, ev.Cause.Reason))
		case NewLeader:
			out = append(out, fmt.Sprintf("leader %d", ev.Term.Token))
		}
	}
	return strings.Join(out, "; ")
}

// StateLog is the state changes so far: "from->to; ...".
func (r *Recorder) StateLog() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		if ev.Kind == Transition {
			out = append(out, fmt.Sprintf("%v->%v", ev.From, ev.To))
		}
	}
	return strings.Join(out, "; ")
}
