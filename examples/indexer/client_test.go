package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestClientFollowsTheServingIndexer runs two indexers over a filestore and
// a client that routes its requests through an observer: every request is
// answered by the indexer serving when it was sent. When the serving one
// stops, the client's requests go to the other, at a greater token, and
// no answer comes from a term older than one already seen.
func TestClientFollowsTheServingIndexer(t *testing.T) {
	storeDir := filepath.Join(t.TempDir(), "store")
	url := "file://" + storeDir + "?create=true"
	var wg sync.WaitGroup
	defer wg.Wait()
	stops := map[string]context.CancelFunc{}
	for _, id := range []string{"a", "b"} {
		ctx, cancel := context.WithCancel(context.Background())
		stops[id] = cancel
		defer cancel()
		cfg := serveConfig{store: url, group: "g", id: id, http: "127.0.0.1:0", slots: 1, ttl: time.Second}
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		wg.Go(func() {
			if err := serve(ctx, cfg, log); err != nil {
				t.Errorf("serve %q: %v", id, err)
			}
		})
	}
	out := &lockedBuffer{}
	cctx, ccancel := context.WithCancel(context.Background())
	defer ccancel()
	wg.Go(func() {
		if err := client(cctx, clientConfig{store: url, group: "g", slots: 1, every: 20 * time.Millisecond}, out); err != nil {
			t.Errorf("client: %v", err)
		}
	})

	answered := regexp.MustCompile(`answered by (\w+) \(slot 0, token (\d+)\)`)
	// waitAnswer waits until a request was answered by an indexer other
	// than not, and returns it.
	waitAnswer := func(not string) string {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for time.Now().Before(deadline) {
			for _, m := range answered.FindAllStringSubmatch(out.String(), -1) {
				if m[1] != not {
					return m[1]
				}
			}
			<-tick.C
		}
		t.Fatalf("no request answered by an indexer other than %q within 20s; client output:\n%s", not, out.String())
		return ""
	}
	first := waitAnswer("")
	stops[first]() // it stops and releases; the other takes over
	second := waitAnswer(first)
	ccancel()

	var last int64
	lines := out.String()
	for _, m := range answered.FindAllStringSubmatch(lines, -1) {
		token, _ := strconv.ParseInt(m[2], 10, 64)
		if token < last {
			t.Errorf("answered at token %d after token %d:\n%s", token, last, lines)
		}
		last = token
	}
	if !strings.Contains(lines, "observed: serving: "+second) {
		t.Errorf("the client did not report observing %s serve:\n%s", second, lines)
	}
	t.Logf("%s served, then %s; client output:\n%s", first, second, trimLines(lines, 40))
}

// trimLines keeps the first n lines of s.
func trimLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], fmt.Sprintf("... (%d more bytes)", len(lines[n])))
	}
	return strings.Join(lines, "\n")
}

// TestQueryRefusesAnotherToken checks that an indexer answers GET /query
// only at the token of the term it serves in.
func TestQueryRefusesAnotherToken(t *testing.T) {
	ix := &indexer{cfg: serveConfig{id: "x"}, el: fakeLeadership{leading: true}}
	ix.serving.Store(true)
	ix.token.Store(7)
	for _, tc := range []struct {
		query  string
		code   int
		answer bool
	}{
		{"token=7", 200, true},
		{"token=6", 409, false},
		{"token=8", 409, false},
		{"", 400, false},
	} {
		rec := &recorder{header: map[string][]string{}}
		req, _ := http.NewRequest("GET", "/query?"+tc.query, nil)
		ix.routes().ServeHTTP(rec, req)
		if rec.code != tc.code || strings.Contains(rec.body.String(), `"answer":"ok"`) != tc.answer {
			t.Errorf("GET /query?%s = %d %s, want %d (answered: %v)", tc.query, rec.code, rec.body.String(), tc.code, tc.answer)
		}
	}
	ix.serving.Store(false)
	rec := &recorder{header: map[string][]string{}}
	req, _ := http.NewRequest("GET", "/query?token=7", nil)
	ix.routes().ServeHTTP(rec, req)
	if rec.code != 409 {
		t.Errorf("GET /query at the token of a term no longer served = %d %s, want 409", rec.code, rec.body.String())
	}
}

// recorder is a minimal http.ResponseWriter.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(code int) { r.code = code }
