// Package journal is the record of a fault campaign's run: the lines every
// process of the run appends to one file (workers, the fenced resource and
// the driver), stamped with the one host's CLOCK_MONOTONIC, and the run's
// spec beside it.
package journal
