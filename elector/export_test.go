package elector

import "time"

// GridPhase is where e's renewal grid starts, from the Unix epoch, modulo
// the grid's step.
func (e *Elector) GridPhase() time.Duration { return time.Duration(e.phase) }
