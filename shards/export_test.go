package shards

import "github.com/tenure-go/tenure/lifecycle"

// Changed is closed and replaced each time the member has reconciled its
// electors with what it knows of the group
// (a test source of change).
func (m *Member) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.listened
}

// AtRest is how many fake-clock timers the member arms when nothing is in
// flight: the loop's read timer, and per elector two while it leads (the
// deadline and the renewal) and one while it follows.
func (m *Member) AtRest() int {
	m.mu.Lock()
	els := make([]interface{ State() lifecycle.State }, 0, len(m.runs)+1)
	if m.member != nil {
		els = append(els, m.member)
	}
	sealing := 0 // runs whose start waits on a timer of the sealing
	for _, r := range m.runs {
		switch r.sealing.Load() {
		case 0:
			els = append(els, r.el)
		case 1:
			sealing++
		}
	}
	m.mu.Unlock()
	select {
	case <-m.done:
		return 0
	default:
	}
	n := 1 + sealing
	select {
	case <-m.stopCh:
		n = 0 // the loop is leaving
	default:
	}
	for _, el := range els {
		switch el.State() {
		case lifecycle.Leader:
			n += 2
		case lifecycle.Follower:
			n++
		}
	}
	return n
}

// HoldPlacing makes every member call f with the members it is about to
// place, outside its lock, until the test ends.
func HoldPlacing(t interface{ Cleanup(func()) }, f func(members []string)) {
	placing.Store(&f)
	t.Cleanup(func() { placing.Store(nil) })
}
