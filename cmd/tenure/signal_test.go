package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// signals lists the signal numbers the child journaled.
func signals(recs []record) []int64 {
	var out []int64
	for _, r := range recs {
		if r.kind == "signal" {
			out = append(out, r.token)
		}
	}
	return out
}

// TestRunHangupEndsTerm sends SIGHUP to the holding tenure: the term ends
// as at SIGTERM (the child gets SIGTERM and exits, the claim is released),
// so the waiting tenure's child starts at once, well within the TTL, and
// the first tenure exits with its child's status. (Before, SIGHUP killed
// tenure on the spot with status 129 and left the claim to expire.)
func TestRunHangupEndsTerm(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a, b := holdingAndWaiting(t, url, j)
	hup := monoNow()
	a.signal(syscall.SIGHUP)
	if code := a.wait(10 * time.Second); code != 0 {
		t.Errorf("a exited %d after SIGHUP, want its child's 0", code)
	}
	waitUntil(t, testTTL+5*time.Second, "b's child started", func() bool { return count(readJournal(t, j), "start") == 2 })
	recs := readJournal(t, j)
	checkJournal(t, recs)
	if count(recs, "end") != 1 {
		t.Errorf("journal %+v: a's child did not end by SIGTERM", recs)
	}
	if handover := time.Duration(starts(recs)[1].mono - hup); handover > testTTL/2 {
		t.Errorf("handover after SIGHUP took %v, want well under the ttl %v (released, not expired)", handover, testTTL)
	}
	b.signal(syscall.SIGINT)
	if code := b.wait(10 * time.Second); code != 0 {
		t.Errorf("b exited %d after SIGINT, want its child's 0", code)
	}
}

// TestRunForwardsSignals sends SIGUSR1 and SIGUSR2 to a leading tenure,
// and SIGHUP to one run with --forward-hup: the child gets each of them,
// and the term goes on. (Before, SIGUSR1 killed tenure, and SIGHUP was
// never the child's.)
func TestRunForwardsSignals(t *testing.T) {
	url := stores[0].url(t)
	for _, tt := range []struct {
		name  string
		extra []string
		sigs  []syscall.Signal
	}{
		{"usr", nil, []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2}},
		{"forward-hup", []string{"--forward-hup"}, []syscall.Signal{syscall.SIGHUP}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			j := filepath.Join(t.TempDir(), "journal")
			a := startTenure(t, "a", j, nil, runArgs(url, "fwd-"+tt.name, "a", tt.extra...)...)
			waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
			for i, sig := range tt.sigs {
				a.signal(sig)
				waitUntil(t, 10*time.Second, "the child got "+sig.String(), func() bool { return len(signals(readJournal(t, j))) == i+1 })
			}
			got := signals(readJournal(t, j))
			for i, sig := range tt.sigs {
				if got[i] != int64(sig) {
					t.Errorf("child got signals %v, want %v", got, tt.sigs)
				}
			}
			if count(readJournal(t, j), "end") != 0 {
				t.Errorf("journal %+v: the child ended; the term should go on", readJournal(t, j))
			}
			if !a.logged("forwarding to the command") || strings.Contains(readLog(a), "signal: ending") {
				t.Errorf("tenure did not log forwarding, or ended:\n%s", readLog(a))
			}
			a.signal(syscall.SIGTERM)
			if code := a.wait(10 * time.Second); code != 0 {
				t.Errorf("a exited %d, want its child's 0", code)
			}
		})
	}
}
