package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/tests/chaos/journal"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
	"github.com/tenure-go/tenure/tests/chaos/timelinetest"
	"github.com/tenure-go/tenure/tests/chaos/worker"
)

// campaign runs a short campaign with args and returns whether it passed
// and what it printed.
func campaign(t *testing.T, args ...string) (bool, string) {
	t.Helper()
	var out strings.Builder
	ok, err := runCampaign(append([]string{"-out", t.TempDir(), "-seed", "1"}, args...), &out)
	if err != nil {
		t.Fatalf("runCampaign(%q): %v\n%s", args, err, out.String())
	}
	t.Logf("runCampaign(%q):\n%s", args, out.String())
	return ok, out.String()
}

var lastLine = regexp.MustCompile(`(?m)^chaos: runs=(\d+) violations=(\d+) worst-recovery=\S+\n\z`)

// TestBrokenWorkersAreCaught runs the campaign against workers broken on
// purpose, each in a way the elector's users are warned against, and
// checks that the checker names what went wrong.
func TestBrokenWorkersAreCaught(t *testing.T) {
	for _, tc := range []struct {
		broken, kinds, want string
	}{
		// Keeps acting for a TTL after its term ended: after a pause
		// longer than the TTL, it acts beside the new holder.
		{worker.BrokenLate, schedule.FStopLong, "VIOLATION overlap"},
		// Writes with a token its term did not give it.
		{worker.BrokenNoToken, schedule.FStopFollower, "VIOLATION token"},
		// Stops its elector at SIGTERM, which releases the claim, and
		// drains its work after: the next holder acts beside that work.
		{worker.BrokenRelease, schedule.FTerm, "VIOLATION overlap"},
	} {
		t.Run(tc.broken, func(t *testing.T) {
			t.Parallel()
			ok, out := campaign(t, "-runs", "1", "-duration", "8s", "-ttl", "1s", "-backends", "filestore",
				"-broken", tc.broken, "-kinds", tc.kinds)
			if ok {
				t.Errorf("campaign with %s workers passed; want it to fail", tc.broken)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("campaign with %s workers: output lacks %q", tc.broken, tc.want)
			}
			if m := lastLine.FindStringSubmatch(out); m == nil || m[2] == "0" {
				t.Errorf("last line of the output does not report violations: %q", out[strings.LastIndex(strings.TrimSuffix(out, "\n"), "\n")+1:])
			}
			checkRunTimeline(t, out)
		})
	}
}

// TestSmoke runs one short run per backend with honest workers and every
// fault the backend has; it must pass. The kube runs need the test
// kube-apiserver, built on first use.
func TestSmoke(t *testing.T) {
	for _, b := range smokeBackends {
		t.Run(b, func(t *testing.T) {
			args := []string{"-runs", "1", "-duration", "12s", "-backends", b, "-svg", "-keep"}
			if shortSmoke[b] {
				t.Parallel()
				args = append(args, "-duration", "6s", "-ttl", "1s", "-kinds", smokeServerKinds)
			}
			ok, out := campaign(t, args...)
			if !ok {
				t.Errorf("smoke run on %s failed:\n%s", b, out)
			}
			if m := lastLine.FindStringSubmatch(out); m == nil || m[1] != "1" || m[2] != "0" {
				t.Errorf("last line is not \"chaos: runs=1 violations=0 worst-recovery=...\":\n%s", out)
			}
			checkRunTimeline(t, out)
		})
	}
}

// TestSmokeTransfers runs one short run on the filestore whose leaders
// hand their claim to another worker about every second, with every fault
// the filestore has: no two holders, tokens rising, and recovery as
// without transfers.
func TestSmokeTransfers(t *testing.T) {
	ok, out := campaign(t, "-runs", "1", "-duration", "12s", "-backends", "filestore", "-transfers", "1s", "-svg", "-keep")
	if !ok {
		t.Errorf("smoke run with transfers failed:\n%s", out)
	}
	if m := lastLine.FindStringSubmatch(out); m == nil || m[1] != "1" || m[2] != "0" {
		t.Errorf("last line is not \"chaos: runs=1 violations=0 worst-recovery=...\":\n%s", out)
	}
	m := timelineOf.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the run's line names no timeline:\n%s", out)
	}
	recs, err := journal.Read(filepath.Join(filepath.Dir(m[1]), "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	transferred := 0
	for _, r := range recs {
		if r.Ev == journal.EvDemoted && r.Reason == "transferred" {
			transferred++
		}
	}
	if transferred == 0 {
		t.Errorf("no term ended in a transfer in the run:\n%s", out)
	}
	t.Logf("%d terms ended in a transfer", transferred)
}

var timelineOf = regexp.MustCompile(`(?m)^run 1/1 .* timeline=(\S+)$`)

// checkRunTimeline reads the timeline that the run's line in out names,
// parses it, and checks it draws every term and fault of the journal kept
// beside it.
func checkRunTimeline(t *testing.T, out string) {
	t.Helper()
	m := timelineOf.FindStringSubmatch(out)
	if m == nil {
		t.Errorf("the run's line names no timeline:\n%s", out)
		return
	}
	b, err := os.ReadFile(m[1])
	if err != nil {
		t.Errorf("the timeline the run's line names: %v", err)
		return
	}
	recs, err := journal.Read(filepath.Join(filepath.Dir(m[1]), "journal.jsonl"))
	if err != nil {
		t.Errorf("the journal beside the timeline: %v", err)
		return
	}
	doc := timelinetest.Parse(t, b)
	timelinetest.Check(t, doc, recs)
	if len(doc.Terms) == 0 {
		t.Errorf("timeline %s draws no term", m[1])
	}
}

// smokeBackends are the backends TestSmoke runs: not the batched modes
// (etcd-shared, etcd3-shared, kube-session), which make chaos runs, to keep
// the smoke's wall time as it was.
var smokeBackends = []string{"filestore", "etcd", "etcd3", "kube", "nats", "nats3", "postgres", "postgres-ha", "dynamodb"}

// shortSmoke are the backends whose smoke run is shorter, at a 1 s TTL,
// so that adding them costs the smoke little time. Their runs draw only
// the faults of the backend and the network (smokeServerKinds): the
// workers' own faults are the same on every backend, and the other
// backends' smoke runs draw them.
var shortSmoke = map[string]bool{"nats": true, "nats3": true, "postgres": true, "postgres-ha": true, "dynamodb": true}

const smokeServerKinds = schedule.FServerPause + "," + schedule.FServerKill + "," + schedule.FPartition + "," + schedule.FLatency + "," + schedule.FIsolate
