package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// history builds journals by hand for the checker's tests.
type history struct{ recs []record }

func (h *history) elect(t int64, w string, pid int, tok int64) {
	h.recs = append(h.recs, record{Ev: evElected, T: t, Worker: w, PID: pid, Tok: tok})
}

// act journals an act at t and its write arriving at arrive; the
// resource's verdict is computed as the resource would.
func (h *history) act(t, arrive int64, w string, pid int, tok int64) {
	h.recs = append(h.recs, record{Ev: evAct, T: t, Worker: w, PID: pid, Tok: tok})
	h.recs = append(h.recs, record{Ev: evAccept, T: arrive, Worker: w, PID: pid, Tok: tok, Act: t})
}

func (h *history) add(r record) { h.recs = append(h.recs, r) }

func checks(res result) string {
	var out []string
	for _, v := range res.Violations {
		out = append(out, v.Check)
	}
	return strings.Join(out, ",")
}

// clean is a history with a handover: w0 leads, is killed, w1 takes over
// after the TTL.
func clean() *history {
	h := &history{}
	h.elect(0, "w0", 10, 1)
	for t := int64(0); t < 1000*ms; t += 100 * ms {
		h.act(t, t+50*ms, "w0", 10, 1)
	}
	h.add(record{Ev: evFault, T: 1050 * ms, Kind: fKill, Target: "w0", Fault: 1})
	h.add(record{Ev: evHeal, T: 1100 * ms, Kind: fKill, Target: "w0", Fault: 1})
	h.elect(3000*ms, "w1", 11, 5)
	for t := 3000 * ms; t < 4000*ms; t += 100 * ms {
		h.act(t, t+50*ms, "w1", 11, 5)
	}
	return h
}

func TestCheckCleanHistoryPasses(t *testing.T) {
	res := check(clean().recs, 2*time.Second, 0, 0)
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
	h := &history{}
	h.elect(0, "w0", 10, 1)
	h.act(0, 50*ms, "w0", 10, 1)
	h.add(record{Ev: evFault, T: 100 * ms, Kind: fServerPause, Target: "n0", Fault: 1})
	h.add(record{Ev: evHeal, T: 1000 * ms, Kind: fServerPause, Target: "n0", Fault: 1})
	// 5 s after the heal: beyond TTL + 1s = 3s.
	h.act(6000*ms, 6050*ms, "w0", 10, 1)
	if res := check(h.recs, 2*time.Second, 0, 0); checks(res) != "recovery" {
		t.Errorf("settle 0: violations = %v, want only recovery", res.Violations)
	}
	if res := check(h.recs, 2*time.Second, 0, 2*time.Second); checks(res) != "" {
		t.Errorf("settle 2s: violations = %v, want none", res.Violations)
	}
	if res := check(h.recs, 2*time.Second, 0, 1900*time.Millisecond); checks(res) != "recovery" {
		t.Errorf("settle 1.9s: violations = %v, want only recovery", res.Violations)
	}
}

// TestCheckListsAbandonedHeals checks that a heal the run gave up on (see
// healWithin) shows among the run's faults, and its time still ends the
// faults for the recovery check.
func TestCheckListsAbandonedHeals(t *testing.T) {
	h := &history{}
	h.elect(0, "w0", 10, 1)
	h.act(0, 50*ms, "w0", 10, 1)
	h.add(record{Ev: evFault, T: 100 * ms, Kind: fLatency, Target: "w1", Fault: 1})
	h.add(record{Ev: evHeal, T: 1000 * ms, Kind: fLatency, Target: "w1", Fault: 1, Reason: "abandoned: the heal had not returned after 20s"})
	h.act(1500*ms, 1550*ms, "w0", 10, 1)
	res := check(h.recs, 2*time.Second, 0, 0)
	if got := checks(res); got != "" {
		t.Errorf("violations = %v, want none", res.Violations)
	}
	if res.Faults["heal-abandoned"] != 1 || res.Faults[fLatency] != 1 {
		t.Errorf("faults = %v, want one latency and one heal-abandoned", res.Faults)
	}
	if want := 500 * time.Millisecond; res.Recovery != want {
		t.Errorf("recovery = %v, want %v", res.Recovery, want)
	}
}

func TestCheckCatches(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(h *history)
	}{
		{"two terms acting at once", "overlap", func(h *history) {
			h.act(3050*ms, 3060*ms, "w0", 10, 1) // w0 acts inside w1's term
		}},
		{"a token going down", "tokens", func(h *history) {
			h.elect(5000*ms, "w2", 12, 3)
			h.act(5000*ms, 5010*ms, "w2", 12, 3)
		}},
		{"a token never granted", "token", func(h *history) {
			h.act(4500*ms, 4510*ms, "w1", 11, 99)
		}},
		{"the resource accepting a lower token", "fence", func(h *history) {
			h.add(record{Ev: evAccept, T: 4500 * ms, Worker: "w0", PID: 10, Tok: 1})
		}},
		{"the resource rejecting a current token", "fence", func(h *history) {
			h.add(record{Ev: evReject, T: 4500 * ms, Worker: "w1", PID: 11, Tok: 5})
		}},
		{"a slow recovery", "recovery", func(h *history) {
			// A fault that ends after the last act: nobody acts again.
			h.add(record{Ev: evFault, T: 200 * ms, Kind: fStopFollower, Target: "w2", Fault: 2})
			h.add(record{Ev: evHeal, T: 5000 * ms, Kind: fStopFollower, Target: "w2", Fault: 2})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := clean()
			tc.edit(h)
			res := check(h.recs, 2*time.Second, 0, 0)
			if got := checks(res); !strings.Contains(got, tc.want) {
				t.Errorf("violations = %q (%v), want one of %q", got, res.Violations, tc.want)
			}
		})
	}
}

func TestCheckSlotsAllowN(t *testing.T) {
	h := &history{}
	h.elect(0, "w0", 10, 1)
	h.act(0, 10*ms, "w0", 10, 1)
	h.act(100*ms, 110*ms, "w0", 10, 1)
	h.recs = append(h.recs, record{Ev: evElected, T: 0, Worker: "w1", PID: 11, Tok: 1, Slot: 1},
		record{Ev: evAct, T: 50 * ms, Worker: "w1", PID: 11, Tok: 1, Slot: 1},
		record{Ev: evAct, T: 150 * ms, Worker: "w1", PID: 11, Tok: 1, Slot: 1})
	if res := check(h.recs, 2*time.Second, 2, 0); len(res.Violations) > 0 {
		t.Errorf("two slots of a group of 2 acting at once: violations %v, want none", res.Violations)
	}
	if res := check(h.recs, 2*time.Second, 1, 0); !strings.Contains(checks(res), "overlap") {
		t.Errorf("two holders of a single claim acting at once: violations %v, want overlap", res.Violations)
	}
}

func TestCheckCountsStaleWritesCaught(t *testing.T) {
	h := clean()
	// w0 acted at 900 ms, was stopped from 950 ms to 5000 ms, and its write
	// arrived after w1's: rejected.
	h.add(record{Ev: evFault, T: 950 * ms, Kind: fStopLong, Target: "w0", Fault: 3})
	h.add(record{Ev: evHeal, T: 5000 * ms, Kind: fStopLong, Target: "w0", Fault: 3})
	h.add(record{Ev: evReject, T: 5001 * ms, Worker: "w0", PID: 10, Tok: 1, Act: 900 * ms})
	res := check(h.recs, 2*time.Second, 0, 0)
	if res.StaleCaught != 1 || res.LongPauses != 1 {
		t.Errorf("stale caught %d, long pauses %d; want 1 and 1", res.StaleCaught, res.LongPauses)
	}
}

// stuckBackend's heals block until release is closed, as a toxiproxy
// RemoveToxic caught in its deadlock does.
type stuckBackend struct{ release chan struct{} }

func (b *stuckBackend) kinds() []string { return []string{fServerPause} }
func (b *stuckBackend) url(int) string  { return "" }
func (b *stuckBackend) close()          {}
func (b *stuckBackend) apply(fault, int) (func(), string, bool) {
	return func() { <-b.release }, "n0", true
}

// TestExecuteAbandonsAStuckHeal checks that a heal that does not return is
// journaled as abandoned after healWithin and the run goes on. Before, the
// run waited for it for good (a campaign on nats3 stood still for 7 minutes).
func TestExecuteAbandonsAStuckHeal(t *testing.T) {
	defer func(d time.Duration) { healWithin = d }(healWithin)
	healWithin = 50 * time.Millisecond
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j, err := openJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	f, err := startFence(j)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	be := &stuckBackend{release: make(chan struct{})}
	defer close(be.release)
	r := &runEnv{spec: runSpec{TTL: time.Second, Faults: []fault{{N: 1, Kind: fServerPause, Dur: 10 * time.Millisecond}}}, j: j, fence: f, be: be}
	done := make(chan struct{})
	go func() {
		r.execute(time.Now())
		close(done)
	}()
	bound := time.NewTimer(10 * time.Second)
	defer bound.Stop()
	select {
	case <-done:
	case <-bound.C:
		t.Fatal("execute did not return while a heal was stuck")
	}
	recs, err := readJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.Ev == evHeal && rec.Fault == 1 && strings.HasPrefix(rec.Reason, "abandoned") {
			return
		}
	}
	t.Errorf("no abandoned heal of fault 1 in the journal: %+v", recs)
}
