package check

import (
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/tests/chaos/journal"
	"github.com/tenure-go/tenure/tests/chaos/journaltest"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
)

const Ms = int64(time.Millisecond)

func checks(res Result) string {
	var out []string
	for _, v := range res.Violations {
		out = append(out, v.Check)
	}
	return strings.Join(out, ",")
}

func TestCheckCleanHistoryPasses(t *testing.T) {
	res := Check(journaltest.Clean().Recs, 2*time.Second, 0, 0)
	if got := checks(res); got != "" {
		t.Fatalf("check(clean history) violations = %v, want none", res.Violations)
	}
	if res.Terms != 2 || res.Acts != 20 || res.Accepted != 20 {
		t.Errorf("check(clean history): terms %d acts %d accepted %d, want 2, 20, 20", res.Terms, res.Acts, res.Accepted)
	}
	if want := 1900 * time.Millisecond; res.Recovery != want {
		t.Errorf("recovery = %v, want %v (last heal to first act)", res.Recovery, want)
	}
}

// TestCheckSettle checks that a first act later than TTL + 1s after the last
// fault is a violation, unless the backend's settle time covers it.
func TestCheckSettle(t *testing.T) {
	h := &journaltest.History{}
	h.Elect(0, "w0", 10, 1)
	h.Act(0, 50*Ms, "w0", 10, 1)
	h.Add(journal.Record{Ev: journal.EvFault, T: 100 * Ms, Kind: schedule.FServerPause, Target: "n0", Fault: 1})
	h.Add(journal.Record{Ev: journal.EvHeal, T: 1000 * Ms, Kind: schedule.FServerPause, Target: "n0", Fault: 1})
	// 5 s after the heal: beyond TTL + 1s = 3s.
	h.Act(6000*Ms, 6050*Ms, "w0", 10, 1)
	if res := Check(h.Recs, 2*time.Second, 0, 0); checks(res) != "recovery" {
		t.Errorf("settle 0: violations = %v, want only recovery", res.Violations)
	}
	if res := Check(h.Recs, 2*time.Second, 0, 2*time.Second); checks(res) != "" {
		t.Errorf("settle 2s: violations = %v, want none", res.Violations)
	}
	if res := Check(h.Recs, 2*time.Second, 0, 1900*time.Millisecond); checks(res) != "recovery" {
		t.Errorf("settle 1.9s: violations = %v, want only recovery", res.Violations)
	}
}

// TestCheckListsAbandonedHeals checks that a heal the run gave up on (see the
// driver's healWithin) shows among the run's faults, and its time still ends the
// faults for the recovery check.
func TestCheckListsAbandonedHeals(t *testing.T) {
	h := &journaltest.History{}
	h.Elect(0, "w0", 10, 1)
	h.Act(0, 50*Ms, "w0", 10, 1)
	h.Add(journal.Record{Ev: journal.EvFault, T: 100 * Ms, Kind: schedule.FLatency, Target: "w1", Fault: 1})
	h.Add(journal.Record{Ev: journal.EvHeal, T: 1000 * Ms, Kind: schedule.FLatency, Target: "w1", Fault: 1, Reason: "abandoned: the heal had not returned after 20s"})
	h.Act(1500*Ms, 1550*Ms, "w0", 10, 1)
	res := Check(h.Recs, 2*time.Second, 0, 0)
	if got := checks(res); got != "" {
		t.Errorf("violations = %v, want none", res.Violations)
	}
	if res.Faults["heal-abandoned"] != 1 || res.Faults[schedule.FLatency] != 1 {
		t.Errorf("faults = %v, want one latency and one heal-abandoned", res.Faults)
	}
	if want := 500 * time.Millisecond; res.Recovery != want {
		t.Errorf("recovery = %v, want %v", res.Recovery, want)
	}
}

func TestCheckCatches(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(h *journaltest.History)
	}{
		{"two terms acting at once", "overlap", func(h *journaltest.History) {
			h.Act(3050*Ms, 3060*Ms, "w0", 10, 1) // w0 acts inside w1's term
		}},
		{"a token going down", "tokens", func(h *journaltest.History) {
			h.Elect(5000*Ms, "w2", 12, 3)
			h.Act(5000*Ms, 5010*Ms, "w2", 12, 3)
		}},
		{"a token never granted", "token", func(h *journaltest.History) {
			h.Act(4500*Ms, 4510*Ms, "w1", 11, 99)
		}},
		{"the resource accepting a lower token", "fence", func(h *journaltest.History) {
			h.Add(journal.Record{Ev: journal.EvAccept, T: 4500 * Ms, Worker: "w0", PID: 10, Tok: 1})
		}},
		{"the resource rejecting a current token", "fence", func(h *journaltest.History) {
			h.Add(journal.Record{Ev: journal.EvReject, T: 4500 * Ms, Worker: "w1", PID: 11, Tok: 5})
		}},
		{"a slow recovery", "recovery", func(h *journaltest.History) {
			// A fault that ends after the last act: nobody acts again.
			h.Add(journal.Record{Ev: journal.EvFault, T: 200 * Ms, Kind: schedule.FStopFollower, Target: "w2", Fault: 2})
			h.Add(journal.Record{Ev: journal.EvHeal, T: 5000 * Ms, Kind: schedule.FStopFollower, Target: "w2", Fault: 2})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := journaltest.Clean()
			tc.edit(h)
			res := Check(h.Recs, 2*time.Second, 0, 0)
			if got := checks(res); !strings.Contains(got, tc.want) {
				t.Errorf("violations = %q (%v), want one of %q", got, res.Violations, tc.want)
			}
		})
	}
}

func TestCheckSlotsAllowN(t *testing.T) {
	h := &journaltest.History{}
	h.Elect(0, "w0", 10, 1)
	h.Act(0, 10*Ms, "w0", 10, 1)
	h.Act(100*Ms, 110*Ms, "w0", 10, 1)
	h.Recs = append(h.Recs, journal.Record{Ev: journal.EvElected, T: 0, Worker: "w1", PID: 11, Tok: 1, Slot: 1},
		journal.Record{Ev: journal.EvAct, T: 50 * Ms, Worker: "w1", PID: 11, Tok: 1, Slot: 1},
		journal.Record{Ev: journal.EvAct, T: 150 * Ms, Worker: "w1", PID: 11, Tok: 1, Slot: 1})
	if res := Check(h.Recs, 2*time.Second, 2, 0); len(res.Violations) > 0 {
		t.Errorf("two slots of a group of 2 acting at once: violations %v, want none", res.Violations)
	}
	if res := Check(h.Recs, 2*time.Second, 1, 0); !strings.Contains(checks(res), "overlap") {
		t.Errorf("two holders of a single claim acting at once: violations %v, want overlap", res.Violations)
	}
}

func TestCheckCountsStaleWritesCaught(t *testing.T) {
	h := journaltest.Clean()
	// w0 acted at 900 ms, was stopped from 950 ms to 5000 ms, and its write
	// arrived after w1's: rejected.
	h.Add(journal.Record{Ev: journal.EvFault, T: 950 * Ms, Kind: schedule.FStopLong, Target: "w0", Fault: 3})
	h.Add(journal.Record{Ev: journal.EvHeal, T: 5000 * Ms, Kind: schedule.FStopLong, Target: "w0", Fault: 3})
	h.Add(journal.Record{Ev: journal.EvReject, T: 5001 * Ms, Worker: "w0", PID: 10, Tok: 1, Act: 900 * Ms})
	res := Check(h.Recs, 2*time.Second, 0, 0)
	if res.StaleCaught != 1 || res.LongPauses != 1 {
		t.Errorf("stale caught %d, long pauses %d; want 1 and 1", res.StaleCaught, res.LongPauses)
	}
}
