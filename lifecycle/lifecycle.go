package lifecycle

import (
	"fmt"
	"log/slog"
)

// State is where a holder stands in the lifecycle of a claim.
type State int

// The states. The zero State is not a state; an elector starts in Follower.
const (
	// Follower is the state of not holding the claim, waiting for the next
	// attempt.
	Follower State = iota + 1
	// Acquiring is the state while an attempt to take the claim is in flight.
	Acquiring
	// Leader is the state while the claim is held and its local deadline has
	// not passed.
	Leader
	// Demoting is the state after leadership has ended, while the leader's
	// work is being drained and the claim released (or left to expire).
	Demoting
	// Stopped is the terminal state; no event leaves it.
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

// LogValue logs s by its name, so that every slog handler (JSON included)
// shows "leader" rather than a number.
func (s State) LogValue() slog.Value { return slog.StringValue(s.String()) }

// States returns every state, in declaration order.
func States() []State { return []State{Follower, Acquiring, Leader, Demoting, Stopped} }
