// Package lifecycle names the states a claim holder moves through, as
// elector.Elector.State reports them and the elector.Trace StateChanged hook
// sees them.
//
// The transitions between them (event, the states it may leave, the state
// it enters):
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
//   - Every change a StateChanged hook sees is a row of this table.
//
// # What it does not do
//
// The package only names states. The machine that moves between them is
// internal to tenure (it is the one package that uses
// github.com/looplab/fsm); its tests check that it follows exactly the
// table above. Package elector drives it and times, calls back and talks to
// a backend.
package lifecycle
