// Package fsm is the state machine behind package lifecycle: the events
// that move a claim holder between lifecycle states, the transition table,
// and a Machine that follows it. Package elector drives a Machine; it is
// internal because no user fires events. It is the one package that
// imports github.com/looplab/fsm.
//
// The table is documented for users in lifecycle's package documentation,
// and the tests check that documentation against Table.
//
// An event the table does not allow in the current state is refused with an
// error wrapping ErrInvalidTransition, and the state is unchanged; nothing
// panics. Fire is atomic: the from and to states it returns are the ones the
// event moved between, even under concurrent use.
package fsm

import (
	"context"
	"errors"
	"fmt"
	"sync"

	looplab "github.com/looplab/fsm"

	"github.com/tenure-go/tenure/lifecycle"
)

// Event is something that happens to a holder and may move it to another
// state.
type Event int

// The events.
const (
	// Campaign is a follower starting an attempt to take the claim.
	Campaign Event = iota + 1
	// Acquired means the attempt took the claim, and in time.
	Acquired
	// Rejected means the attempt failed: the claim is held by another holder,
	// the backend failed, or the answer came after the deadline it would have
	// granted.
	Rejected
	// Demote ends leadership, for any cause (the claim was lost, the local
	// deadline passed, a fatal error, a panic, a stop).
	Demote
	// Demoted means the leader's work has returned (or the drain timed out)
	// and the claim was released (or left to expire).
	Demoted
	// Stop is the holder stopping for good.
	Stop
)

var eventNames = map[Event]string{
	Campaign: "campaign",
	Acquired: "acquired",
	Rejected: "rejected",
	Demote:   "demote",
	Demoted:  "demoted",
	Stop:     "stop",
}

// String returns the lower-case name of e, e.g. "campaign".
func (e Event) String() string {
	if n, ok := eventNames[e]; ok {
		return n
	}
	return fmt.Sprintf("event(%d)", int(e))
}

// Transition is one row of the transition table: Event moves a machine from
// any state in From to To.
type Transition struct {
	Event Event
	From  []lifecycle.State
	To    lifecycle.State
}

// table is the lifecycle. It is the only description of it: the machine is
// built from it, Table returns it, and lifecycle's package documentation and
// the tests are checked against it. Leader is left only through Demoting,
// and Stopped is left by nothing.
var table = []Transition{
	{Event: Campaign, From: []lifecycle.State{lifecycle.Follower}, To: lifecycle.Acquiring},
	{Event: Acquired, From: []lifecycle.State{lifecycle.Acquiring}, To: lifecycle.Leader},
	{Event: Rejected, From: []lifecycle.State{lifecycle.Acquiring}, To: lifecycle.Follower},
	{Event: Demote, From: []lifecycle.State{lifecycle.Leader}, To: lifecycle.Demoting},
	{Event: Demoted, From: []lifecycle.State{lifecycle.Demoting}, To: lifecycle.Follower},
	{Event: Stop, From: []lifecycle.State{lifecycle.Follower, lifecycle.Acquiring, lifecycle.Demoting}, To: lifecycle.Stopped},
}

// Table returns the transition table, in a fresh copy.
func Table() []Transition {
	out := make([]Transition, len(table))
	for i, tr := range table {
		tr.From = append([]lifecycle.State(nil), tr.From...)
		out[i] = tr
	}
	return out
}

// Events returns every event, in declaration order.
func Events() []Event { return []Event{Campaign, Acquired, Rejected, Demote, Demoted, Stop} }

// Next returns the state event e leads to from state from, according to the
// table, and whether the transition exists.
func Next(from lifecycle.State, e Event) (lifecycle.State, bool) {
	for _, tr := range table {
		if tr.Event != e {
			continue
		}
		for _, s := range tr.From {
			if s == from {
				return tr.To, true
			}
		}
	}
	return 0, false
}

// ErrInvalidTransition is wrapped by the error Fire returns for an event
// that the table does not allow in the current state (or that is unknown).
var ErrInvalidTransition = errors.New("fsm: invalid transition")

// Machine is a lifecycle state machine. It starts in Follower and moves
// only along the transitions of Table. A Machine is safe for concurrent use;
// every Fire is atomic.
type Machine struct {
	mu sync.Mutex // guards f, so that Fire reads from and to atomically
	f  *looplab.FSM
}

// New returns a Machine in state Follower.
func New() *Machine {
	events := make([]looplab.EventDesc, 0, len(table))
	for _, tr := range table {
		src := make([]string, len(tr.From))
		for i, s := range tr.From {
			src[i] = s.String()
		}
		events = append(events, looplab.EventDesc{Name: tr.Event.String(), Src: src, Dst: tr.To.String()})
	}
	return &Machine{f: looplab.NewFSM(lifecycle.Follower.String(), events, nil)}
}

// State returns the current state.
func (m *Machine) State() lifecycle.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return parseState(m.f.Current())
}

// Fire applies e. It returns the state before and after. If the table does
// not allow e in the current state, the state is unchanged, from == to, and
// the error wraps ErrInvalidTransition. Fire never blocks and never panics.
func (m *Machine) Fire(e Event) (from, to lifecycle.State, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	from = parseState(m.f.Current())
	if _, ok := eventNames[e]; !ok {
		return from, from, fmt.Errorf("fsm: unknown %s in state %s: %w", e, from, ErrInvalidTransition)
	}
	if _, ok := Next(from, e); !ok {
		return from, from, fmt.Errorf("fsm: %s in state %s: %w", e, from, ErrInvalidTransition)
	}
	// The machine has no callbacks, so Event cannot be cancelled or made
	// asynchronous; a background context keeps a caller's cancellation from
	// refusing a transition the table allows.
	if ferr := m.f.Event(context.Background(), e.String()); ferr != nil {
		return from, parseState(m.f.Current()), fmt.Errorf("fsm: %s in state %s: %w: %v", e, from, ErrInvalidTransition, ferr)
	}
	return from, parseState(m.f.Current()), nil
}

func parseState(name string) lifecycle.State {
	for _, s := range lifecycle.States() {
		if s.String() == name {
			return s
		}
	}
	return 0
}
