package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/tests/chaos/journal"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
)

// stuckBackend's heals block until release is closed, as a toxiproxy
// RemoveToxic caught in its deadlock does.
type stuckBackend struct{ release chan struct{} }

func (b *stuckBackend) Kinds() []string { return []string{schedule.FServerPause} }
func (b *stuckBackend) URL(int) string  { return "" }
func (b *stuckBackend) Close()          {}
func (b *stuckBackend) Apply(schedule.Fault, int) (func(), string, bool) {
	return func() { <-b.release }, "n0", true
}

// TestExecuteAbandonsAStuckHeal checks that a heal that does not return is
// journaled as abandoned after healWithin and the run goes on. Before, the
// run waited for it for good (a campaign on nats3 stood still for 7 minutes).
func TestExecuteAbandonsAStuckHeal(t *testing.T) {
	defer func(d time.Duration) { healWithin = d }(healWithin)
	healWithin = 50 * time.Millisecond
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	j, err := journal.Open(path)
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
	r := &runEnv{spec: journal.RunSpec{TTL: time.Second, Faults: []schedule.Fault{{N: 1, Kind: schedule.FServerPause, Dur: 10 * time.Millisecond}}}, j: j, fence: f, be: be}
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
	recs, err := journal.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.Ev == journal.EvHeal && rec.Fault == 1 && strings.HasPrefix(rec.Reason, "abandoned") {
			return
		}
	}
	t.Errorf("no abandoned heal of fault 1 in the journal: %+v", recs)
}
