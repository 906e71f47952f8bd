package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/looplab/fsm"
)

// State is where a holder stands in the lifecycle of a claim.
type State int

// The states. The zero State is not a state; a new Machine starts in
// Follower.
const (
	// Follower: not holding the claim, waiting for the next attempt.
	Follower State = iota + 1
	// Acquiring: an attempt to take the claim is in flight.
	Acquiring
	// Leader: the claim is held and its local deadline has not passed.
	Leader
	// Demoting: leadership has ended; the leader's work is being drained and
	// the claim released (or left to expire).
	Demoting
	// Stopped: terminal; no event leaves it.
	Stopped
)

var stateNames = map[State]string{
	Follower:  "follower",
	Acquiring: "acquiring",
	Leader:    "leader",
	Demoting:  "demoting",
	Stopped:   "stopped",
}

// String returns the lower-case name of s, e.g. "leader".
func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("state(%d)", int(s))
}

// Event is something that happens to a holder and may move it to another
// state.
type Event int

// The events.
const (
	// Campaign: a follower starts an attempt to take the claim.
	Campaign Event = iota + 1
	// Acquired: the attempt took the claim, and in time.
	Acquired
	// Rejected: the attempt failed: the claim is held by another holder, the
	// backend failed, or the answer came after the deadline it would have
	// granted.
	Rejected
	// Demote: leadership ends, for any cause (the claim was lost, the local
	// deadline passed, a fatal error, a panic, a stop).
	Demote
	// Demoted: the leader's work has returned (or the drain timed out) and
	// the claim was released (or left to expire).
	Demoted
	// Stop: the holder stops for good.
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
	From  []State
	To    State
}

// table is the lifecycle. It is the only description of it: the machine is
// built from it, Table returns it, and the package documentation and tests
// are checked against it. Leader is left only through Demoting, and Stopped
// is left by nothing.
var table = []Transition{
	{Event: Campaign, From: []State{Follower}, To: Acquiring},
	{Event: Acquired, From: []State{Acquiring}, To: Leader},
	{Event: Rejected, From: []State{Acquiring}, To: Follower},
	{Event: Demote, From: []State{Leader}, To: Demoting},
	{Event: Demoted, From: []State{Demoting}, To: Follower},
	{Event: Stop, From: []State{Follower, Acquiring, Demoting}, To: Stopped},
}

// Table returns the transition table, in a fresh copy.
func Table() []Transition {
	out := make([]Transition, len(table))
	for i, tr := range table {
		tr.From = append([]State(nil), tr.From...)
		out[i] = tr
	}
	return out
}

// States returns every state, in declaration order.
func States() []State { return []State{Follower, Acquiring, Leader, Demoting, Stopped} }

// Events returns every event, in declaration order.
func Events() []Event { return []Event{Campaign, Acquired, Rejected, Demote, Demoted, Stop} }

// Next returns the state event e leads to from state from, according to the
// table, and whether the transition exists.
func Next(from State, e Event) (State, bool) {
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
var ErrInvalidTransition = errors.New("lifecycle: invalid transition")

// Machine is a lifecycle state machine. It starts in Follower and moves
// only along the transitions of Table. A Machine is safe for concurrent use;
// every Fire is atomic.
type Machine struct {
	mu sync.Mutex // guards f, so that Fire reads from and to atomically
	f  *fsm.FSM
}

// New returns a Machine in state Follower.
func New() *Machine {
	events := make([]fsm.EventDesc, 0, len(table))
	for _, tr := range table {
		src := make([]string, len(tr.From))
		for i, s := range tr.From {
			src[i] = s.String()
		}
		events = append(events, fsm.EventDesc{Name: tr.Event.String(), Src: src, Dst: tr.To.String()})
	}
	return &Machine{f: fsm.NewFSM(Follower.String(), events, nil)}
}

// State returns the current state.
func (m *Machine) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return parseState(m.f.Current())
}

// Fire applies e. It returns the state before and after. If the table does
// not allow e in the current state, the state is unchanged, from == to, and
// the error wraps ErrInvalidTransition. Fire never blocks and never panics.
func (m *Machine) Fire(e Event) (from, to State, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	from = parseState(m.f.Current())
	if _, ok := eventNames[e]; !ok {
		return from, from, fmt.Errorf("lifecycle: unknown %s in state %s: %w", e, from, ErrInvalidTransition)
	}
	if _, ok := Next(from, e); !ok {
		return from, from, fmt.Errorf("lifecycle: %s in state %s: %w", e, from, ErrInvalidTransition)
	}
	// The machine has no callbacks, so Event cannot be cancelled or made
	// asynchronous; a background context keeps a caller's cancellation from
	// refusing a transition the table allows.
	if ferr := m.f.Event(context.Background(), e.String()); ferr != nil {
		return from, parseState(m.f.Current()), fmt.Errorf("lifecycle: %s in state %s: %w: %v", e, from, ErrInvalidTransition, ferr)
	}
	return from, parseState(m.f.Current()), nil
}

func parseState(name string) State {
	for s, n := range stateNames {
		if n == name {
			return s
		}
	}
	return 0
}
