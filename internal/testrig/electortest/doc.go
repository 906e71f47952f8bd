// Package electortest is the test kit of the elector, slots and
// failuremodes tests and of the stores' elector tests: a [Recorder] of
// everything an Elector reports, which tests wait on through channels, a
// scriptable fault-injecting backends.Locker, [Locker], and [Terms], the
// terms of several Electors run over a real store, checked for overlaps
// and tokens that do not increase.
//
// Nothing in it polls: every wait blocks on a channel that the recorder or
// the locker closes when something changes, bounded by the caller's
// context. Nothing in it reads the real time or arms a timer, so a test that
// counts armed timers on a fake clock (clocktest BlockUntil) counts only the
// Elector's and the backend's.
//
// It is test plumbing: only _test.go files import it.
package electortest
