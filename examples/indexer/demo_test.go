package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/internal/childproc/childproctest"
)

// TestDemoIndexerOutlivesStartingThread checks that an indexer outlives the
// thread the demo started it from: the Go runtime may end that thread at any
// time, and an indexer killed with it would look like a crash the demo did
// not cause.
func TestDemoIndexerOutlivesStartingThread(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	jpath := filepath.Join(dir, "journal")
	if err := os.WriteFile(jpath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	jf, err := os.Open(jpath)
	if err != nil {
		t.Fatal(err)
	}
	defer jf.Close()
	d := &demo{out: io.Discard, clk: clock.New(), exe: exe, dir: dir, ttl: time.Second, group: "demo",
		killed: map[int]int64{}, reader: &journalReader{f: jf}, start: monoNow()}
	defer d.stopAll()

	childproctest.OnRetiredThread(t, func() {
		if err := d.spawn("indexer 1", jpath); err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		return
	}
	// The bound only ends a failing test.
	if _, err := d.waitFor(context.Background(), 30*time.Second, func(r record) bool { return r.Event == "listening" }, 1); err != nil {
		t.Fatalf("the indexer did not start listening: %v", err)
	}
	// Only a live indexer answers; one sent SIGKILL when the thread ended
	// cannot.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + d.procs[0].addr + "/status")
	if err != nil {
		t.Fatalf("status of the indexer once the thread that started it ended: %v", err)
	}
	defer resp.Body.Close()
	var st status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.ID != "indexer 1" {
		t.Errorf("status = %+v, %v; want the status of %q", st, err, "indexer 1")
	}
}
