// Package schedule is the fault campaign's faults: their kinds, and the
// schedule of them a run draws from its seed, so that a seed replays it.
package schedule
