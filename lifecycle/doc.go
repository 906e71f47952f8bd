// Package lifecycle is the state machine of a claim holder: the states an
// elector moves through and the only transitions between them.
//
// The transition table (Table returns it; the machine, this comment and the
// tests are all derived from that one table):
//
//	event     from                          to
//	campaign  follower                      acquiring
//	acquired  acquiring                     leader
//	rejected  acquiring                     follower
//	demote    leader                        demoting
//	demoted   demoting                      follower
//	stop      follower, acquiring, demoting stopped
//
// # Guarantees
//
//   - Leader is left only through Demoting: a holder always passes through
//     the state in which it stops acting and drains its work before it can be
//     a follower again or stop.
//   - Stopped is terminal.
//   - An event the table does not allow in the current state is refused with
//     an error wrapping ErrInvalidTransition; the state is unchanged. Nothing
//     in the package panics.
//   - Fire is atomic: the returned from and to states are the ones the event
//     moved between, even under concurrent use.
//
// # What it does not do
//
// The machine only records where a holder stands. It does not time
// anything, call back into user code or talk to a backend; package elector
// does that and uses a Machine as its single source of state.
package lifecycle
