package journaltest

import (
	"time"

	"github.com/tenure-go/tenure/tests/chaos/journal"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
)

const millisecond = int64(time.Millisecond)

// History builds journals by hand for the checker's tests.
type History struct{ Recs []journal.Record }

// Elect journals OnElected at t for worker w (process pid) with token tok.
func (h *History) Elect(t int64, w string, pid int, tok int64) {
	h.Recs = append(h.Recs, journal.Record{Ev: journal.EvElected, T: t, Worker: w, PID: pid, Tok: tok})
}

// Act journals an act at t and its write arriving at arrive; the
// resource's verdict is computed as the resource would.
func (h *History) Act(t, arrive int64, w string, pid int, tok int64) {
	h.Recs = append(h.Recs, journal.Record{Ev: journal.EvAct, T: t, Worker: w, PID: pid, Tok: tok})
	h.Recs = append(h.Recs, journal.Record{Ev: journal.EvAccept, T: arrive, Worker: w, PID: pid, Tok: tok, Act: t})
}

// Add journals r as it is.
func (h *History) Add(r journal.Record) { h.Recs = append(h.Recs, r) }

// Clean is a history with a handover: w0 leads, is killed, w1 takes over
// after the TTL.
func Clean() *History {
	h := &History{}
	h.Elect(0, "w0", 10, 1)
	for t := int64(0); t < 1000*millisecond; t += 100 * millisecond {
		h.Act(t, t+50*millisecond, "w0", 10, 1)
	}
	h.Add(journal.Record{Ev: journal.EvFault, T: 1050 * millisecond, Kind: schedule.FKill, Target: "w0", Fault: 1})
	h.Add(journal.Record{Ev: journal.EvHeal, T: 1100 * millisecond, Kind: schedule.FKill, Target: "w0", Fault: 1})
	h.Elect(3000*millisecond, "w1", 11, 5)
	for t := 3000 * millisecond; t < 4000*millisecond; t += 100 * millisecond {
		h.Act(t, t+50*millisecond, "w1", 11, 5)
	}
	return h
}
