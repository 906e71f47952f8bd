package elector

import (
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/lifecycle"
)

// Observer receives the Elector's metrics events. Methods are called from the
// Elector's goroutines (and, for a term that the leader's context finds past
// its end before the Elector's timer does, from the goroutine calling the
// context's Err or Done), sometimes from more than one at a time, so they must
// be safe for concurrent use; they must be quick and must not block (record
// and return). A panicking method is recovered and logged. Embed NopObserver
// to implement only some methods and to stay compatible when methods are
// added.
type Observer interface {
	// Transition: a lifecycle transition happened.
	Transition(from, to lifecycle.State)
	// ElectionWon: this Elector became the leader.
	ElectionWon(term Term)
	// ElectionLost: an attempt to take the claim failed; class is
	// backends.ClassLost when another holder has it, else the class of the
	// backend error.
	ElectionLost(class backends.Class)
	// Renewed: a renewal succeeded after latency; left is the time to the
	// new local deadline.
	Renewed(latency, left time.Duration)
	// RenewFailed: a renewal failed after latency with an error of class.
	RenewFailed(class backends.Class, latency time.Duration)
	// Demoted: a term ended.
	Demoted(term Term, cause Cause)
	// DuplicateIdentity: another holder with this Elector's Identity (and
	// another nonce) was seen holding the claim.
	DuplicateIdentity(other backends.Holder)
	// Panicked: a panic was recovered in where ("loop", "OnElected", ...).
	Panicked(where string)
}

// NopObserver implements Observer and does nothing.
type NopObserver struct{}

var _ Observer = NopObserver{}

func (NopObserver) Transition(from, to lifecycle.State)       {}
func (NopObserver) ElectionWon(Term)                          {}
func (NopObserver) ElectionLost(backends.Class)               {}
func (NopObserver) Renewed(latency, left time.Duration)       {}
func (NopObserver) RenewFailed(backends.Class, time.Duration) {}
func (NopObserver) Demoted(Term, Cause)                       {}
func (NopObserver) DuplicateIdentity(backends.Holder)         {}
func (NopObserver) Panicked(string)                           {}
