package main

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestWatchTakeover follows a claim taken over after its holder was
// SIGKILLed. With no periodic read, the watch learns of the expiry and of
// the new holder in the same read: it prints the old holder gone before
// the new one held.
func TestWatchTakeover(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a, b := holdingAndWaiting(t, url, j)
	w := startTenure(t, "watch", j, nil, "watch", "--store", url, "--key", "job", "--json", "--interval", "1h", "--log-level", "debug")
	waitUntil(t, 20*time.Second, "watch started", func() bool { return w.logged(`msg=watching`) })
	a.signal(syscall.SIGKILL)
	waitUntil(t, testTTL+10*time.Second, "b's child started", func() bool { return count(readJournal(t, j), "start") == 2 })
	events := watchEvents(t, w, 3)
	tokens := starts(readJournal(t, j))
	want := []changeJSON{
		{Event: "held", Holder: "a", Token: tokens[0].token},
		{Event: "gone", Holder: "a", Token: tokens[0].token},
		{Event: "held", Holder: "b", Token: tokens[1].token},
	}
	if len(events) != len(want) {
		t.Fatalf("watch printed %+v, want %+v", events, want)
	}
	for i, e := range events {
		if e.Event != want[i].Event || e.Holder != want[i].Holder || e.Token != want[i].Token || e.Key != "job" {
			t.Errorf("watch line %d: %+v, want %+v", i, e, want[i])
		}
	}
	w.signal(syscall.SIGTERM)
	w.wait(10 * time.Second)
	b.signal(syscall.SIGTERM)
	b.wait(10 * time.Second)
}
