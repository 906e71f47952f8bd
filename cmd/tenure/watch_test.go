package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/nats/natstest"
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

// TestWatchStoreRemoved removes the file store's directory under a
// running watch: the store fails fatally, and watch ends with status 69
// naming the error, where it used to log it every second for ever.
func TestWatchStoreRemoved(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + dir
	if _, code, stderr := tenure(t, "run", "--store", url, "--key", "job", "--once", "--", "true"); code != 0 {
		t.Fatalf("tenure run: status %d: %s", code, stderr)
	}
	w := startTenure(t, "watch", "", nil, "watch", "--store", url, "--key", "job", "--json", "--interval", "100ms")
	watchEvents(t, w, 1)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(20 * time.Second); code != exitStore {
		t.Errorf("watch over a removed store exited %d, want %d:\n%s", code, exitStore, readLog(w))
	}
}

// TestWatchOutage stops the NATS server under a running watch: watch
// prints one "unknown" line with the store's error, and, once the server
// is back, the state again. (Before, it went on showing the last holder
// as if nothing had happened.)
func TestWatchOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("nats-server skipped in -short mode")
	}
	srv := natstest.Start(t)
	url := srv.URL() + "/tenuretest"
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, nil, runArgs(url+"?create=true", "job", "a")...)
	waitUntil(t, 30*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") >= 1 })
	w := startTenure(t, "watch", j, nil, "watch", "--store", url, "--key", "job", "--json", "--interval", "200ms", "--timeout", "2s")
	if e := watchEvents(t, w, 1)[0]; e.Event != "held" || e.Holder != "a" {
		t.Fatalf("watch started with %+v, want a held", e)
	}
	srv.Stop()
	var events []changeJSON
	waitUntil(t, 30*time.Second, "watch printed unknown", func() bool {
		events = watchEvents(t, w, 1)
		return events[len(events)-1].Event == "unknown"
	})
	if e := events[len(events)-1]; e.Error == "" || e.Key != "job" {
		t.Errorf("unknown line %+v: want the key and the store's error", e)
	}
	n := len(events)
	srv.Restart()
	waitUntil(t, 60*time.Second, "watch printed the state again", func() bool {
		events = watchEvents(t, w, n)
		for _, e := range events[n:] {
			if e.Event == "held" || e.Event == "free" {
				return true
			}
		}
		return false
	})
	if c := countEvents(events, "unknown"); c != 1 {
		t.Errorf("watch printed %d unknown lines, want 1: %+v", c, events)
	}
	w.signal(syscall.SIGTERM)
	if code := w.wait(10 * time.Second); code != 0 {
		t.Errorf("watch exited %d after SIGTERM, want 0", code)
	}
	a.signal(syscall.SIGTERM)
	a.wait(20 * time.Second)
}

func countEvents(events []changeJSON, kind string) int {
	n := 0
	for _, e := range events {
		if e.Event == kind {
			n++
		}
	}
	return n
}
