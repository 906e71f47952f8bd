package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
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

// transferring is a leadership whose Transfer records its target and
// returns err.
type transferring struct {
	fakeLeadership
	err error
	to  *string
}

func (f transferring) Transfer(_ context.Context, to string) error {
	*f.to = to
	return f.err
}

// TestTransferAnswers checks POST /transfer's answers: it passes the
// target to Elector.Transfer, and tells a transfer made from one refused,
// by its status code, with the term's token.
func TestTransferAnswers(t *testing.T) {
	for _, tc := range []struct {
		query  string
		err    error
		code   int
		wantTo string
	}{
		{"to=indexer+3", nil, http.StatusOK, "indexer 3"},
		{"", nil, http.StatusBadRequest, ""},
		{"to=b", fmt.Errorf("elector: transfer: %w", elector.ErrNotLeader), http.StatusConflict, "b"},
		{"to=b", fmt.Errorf("elector: transfer: %w", backends.ErrUnsupported), http.StatusNotImplemented, "b"},
		{"to=b", fmt.Errorf("elector: transfer: %w", backends.ErrInvalid), http.StatusBadRequest, "b"},
		{"to=b", errors.New("elector: transfer: the store failed"), http.StatusInternalServerError, "b"},
	} {
		var to string
		ix := &indexer{cfg: serveConfig{id: "a"}, log: slog.New(slog.DiscardHandler), el: transferring{err: tc.err, to: &to}}
		ix.token.Store(7)
		rec := httptest.NewRecorder()
		ix.routes().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/transfer?"+tc.query, nil))
		var a transferAnswer
		if err := json.NewDecoder(rec.Body).Decode(&a); err != nil {
			t.Fatalf("POST /transfer?%s: %v", tc.query, err)
		}
		if rec.Code != tc.code || to != tc.wantTo || a.Token != 7 || (a.Err == "") != (tc.code == http.StatusOK) {
			t.Errorf("POST /transfer?%s with Transfer returning %v = %d %+v, Transfer(%q); want %d, Transfer(%q), token 7",
				tc.query, tc.err, rec.Code, a, to, tc.code, tc.wantTo)
		}
	}
}
