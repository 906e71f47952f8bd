package main

import (
	"bytes"
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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/lifecycle"
)

// TestPublishRefusesMalformedRecord checks that a record that does not decode
// cannot be fenced: publish refuses it as corrupt (class fatal), never as
// something a retry could fix, and leaves it in place.
func TestPublishRefusesMalformedRecord(t *testing.T) {
	store, err := filestore.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	key := endpointKey("g", 0)
	if _, err := store.CreateIfAbsent(ctx, key, []byte("not json"), 0); err != nil {
		t.Fatal(err)
	}
	err = publish(ctx, store, key, endpoint{ID: "x", Token: 5})
	if !errors.Is(err, backends.ErrCorrupt) || backends.Classify(err) != backends.ClassFatal {
		t.Errorf("publish over a malformed record = %v (class %v), want ErrCorrupt, class fatal", err, backends.Classify(err))
	}
	if e, err := store.Get(ctx, key); err != nil || string(e.Value) != "not json" {
		t.Errorf("record after the refused publish = %q, %v; want it untouched", e.Value, err)
	}
}

// unavailable is a store whose reads always fail as transient.
type unavailable struct{ backends.Store }

func (unavailable) Get(context.Context, string) (backends.Entry, error) {
	return backends.Entry{}, fmt.Errorf("test: get: %w", backends.ErrUnavailable)
}

// TestPublishGivesUpAfterATTL checks that a leader whose endpoint cannot be
// published retries transient errors for one TTL, then gives up, so that its
// term can end; it does not retry for the whole term while the elector keeps
// renewing.
func TestPublishGivesUpAfterATTL(t *testing.T) {
	clk := clocktest.New(time.Time{})
	ix := &indexer{
		cfg:     serveConfig{group: "g", id: "x", ttl: time.Second},
		store:   unavailable{memstore.New()},
		journal: &journal{},
		log:     slog.New(slog.DiscardHandler),
		clk:     clk,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // the term never ends by itself here
	done := make(chan error, 1)
	go func() { done <- ix.publish(ctx, elector.Term{Token: 5}) }()
	bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
	defer bcancel()
	if err := clk.BlockUntil(bctx, 2); err != nil { // the retry ticker and the give-up timer
		t.Fatal(err)
	}
	clk.Add(time.Second - time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("publish gave up before a TTL: %v", err)
	default:
	}
	clk.Add(time.Millisecond)
	select {
	case err := <-done:
		if !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "not published within 1s") {
			t.Errorf("publish after a TTL of transient errors = %v, want the last error, said to have lasted 1s", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("publish still retrying a TTL after its first transient error")
	}
}

// fakeLeadership answers /status's questions as told.
type fakeLeadership struct {
	leading bool
	state   lifecycle.State
}

func (f fakeLeadership) IsLeader() bool                 { return f.leading }
func (f fakeLeadership) State() lifecycle.State         { return f.state }
func (f fakeLeadership) Leader() (elector.Leader, bool) { return elector.Leader{}, false }
func (f fakeLeadership) Transfer(context.Context, string) error {
	return elector.ErrNotLeader
}

// TestStatusAgreesWithIsLeader checks that /status never says leader while
// IsLeader is false, whichever way the lifecycle state and the deadline
// disagree: the state machine stays in leader until the Elector's loop
// demotes a term whose deadline passed, while IsLeader turns false at the
// deadline.
func TestStatusAgreesWithIsLeader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		leading bool
		state   lifecycle.State
		want    string
	}{
		{"leading", true, lifecycle.Leader, "leader"},
		{"deadline passed, not yet demoted", false, lifecycle.Leader, "demoting"},
		{"demoting", false, lifecycle.Demoting, "demoting"},
		{"following", false, lifecycle.Follower, "follower"},
		{"demoted between the two reads", true, lifecycle.Demoting, "leader"},
	} {
		ix := &indexer{cfg: serveConfig{id: "x"}, el: fakeLeadership{tc.leading, tc.state}}
		ix.serving.Store(true) // the work has not noticed yet
		rec := httptest.NewRecorder()
		ix.routes().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
		var st status
		if err := json.NewDecoder(rec.Body).Decode(&st); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if st.State != tc.want || st.IsLeader != tc.leading || st.Serving != tc.leading {
			t.Errorf("%s (IsLeader %v, state %v): /status says state %q, is_leader %v, serving %v; want %q, %v, %v",
				tc.name, tc.leading, tc.state, st.State, st.IsLeader, st.Serving, tc.want, tc.leading, tc.leading)
		}
	}
}

// lockedBuffer is a log destination shared by goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestMalformedRecordEndsTheTerm checks that a malformed endpoint record
// means no leader can serve. Each leader must then end its term, saying why
// in its log and /status, and release the claim so that the next one can try,
// instead of holding the claim for ever while publish retries.
func TestMalformedRecordEndsTheTerm(t *testing.T) {
	dir := t.TempDir()
	storeDir := filepath.Join(dir, "store")
	store, err := filestore.Open(context.Background(), storeDir, filestore.WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateIfAbsent(context.Background(), endpointKey("g", 0), []byte("{garbage"), 0); err != nil {
		t.Fatal(err)
	}
	store.Close()
	jpath := filepath.Join(dir, "journal")
	if err := os.WriteFile(jpath, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	const ttl = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	logs := map[string]*lockedBuffer{}
	for _, id := range []string{"a", "b"} {
		logs[id] = &lockedBuffer{}
		cfg := serveConfig{store: "file://" + storeDir, group: "g", id: id, http: "127.0.0.1:0", slots: 1, ttl: ttl, journal: jpath}
		log := slog.New(slog.NewTextHandler(logs[id], &slog.HandlerOptions{Level: slog.LevelWarn}))
		wg.Go(func() {
			if err := serve(ctx, cfg, log); err != nil {
				t.Errorf("serve %q: %v", id, err)
			}
		})
	}
	defer cancel() // before wg.Wait

	// Wait for both indexers to have led and resigned: the first term's
	// claim must have been released for the second to lead.
	f, err := os.Open(jpath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := &journalReader{f: f}
	var recs []record
	resigned := map[string]record{}
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for len(resigned) < 2 && time.Now().Before(deadline) {
		<-tick.C
		more, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range more {
			recs = append(recs, rec)
			if rec.Event == "resign" {
				if _, ok := resigned[rec.ID]; !ok {
					resigned[rec.ID] = rec
				}
			}
		}
	}
	if len(resigned) < 2 {
		t.Fatalf("after 20s, %d of 2 indexers ended a term they could not serve in (TTL %v); journal: %+v", len(resigned), ttl, recs)
	}
	for _, rec := range recs {
		if rec.Event == "serve-start" {
			t.Errorf("%q served over a malformed record: %+v", rec.ID, rec)
		}
	}
	first, second := resigned["a"], resigned["b"]
	if second.Token < first.Token {
		first, second = second, first
	}
	if second.Token <= first.Token {
		t.Errorf("tokens of the resigned terms: %d then %d, want increasing", first.Token, second.Token)
	}
	if !strings.Contains(first.Err, "malformed record") {
		t.Errorf("journal gives the reason %q, want it to name the malformed record", first.Err)
	}

	for id, log := range logs {
		if l := log.String(); !strings.Contains(l, "cannot serve") || !strings.Contains(l, "malformed record") {
			t.Errorf("log of %q does not say why it ended its term:\n%s", id, l)
		}
	}
	for _, rec := range recs {
		if rec.Event != "listening" {
			continue
		}
		resp, err := http.Get("http://" + rec.Addr + "/status")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var st status
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatalf("/status of %q: %v: %s", rec.ID, err, body)
		}
		if !strings.Contains(st.Resigned, "malformed record") || (st.State == "leader") != st.IsLeader {
			t.Errorf("/status of %q = %s; want the reason it resigned, and state agreeing with is_leader", rec.ID, body)
		}
	}
}
