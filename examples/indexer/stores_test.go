package main

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/backends/kube/kubetest"
	"github.com/tenure-go/tenure/storeurl"

	// The stores serve links in only for its tests.
	_ "github.com/tenure-go/tenure/backends/etcd"
	_ "github.com/tenure-go/tenure/backends/kube"
)

// serveAll runs one indexer per id over storeURL until one of them serves,
// then stops them all. It returns the journal as it was when the first
// indexer served.
func serveAll(t *testing.T, storeURL string, ids ...string) []record {
	t.Helper()
	jpath := filepath.Join(t.TempDir(), "journal")
	if err := os.WriteFile(jpath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for _, id := range ids {
		cfg := serveConfig{store: storeURL, group: "g", id: id, http: "127.0.0.1:0", slots: 1, ttl: 2 * time.Second, journal: jpath}
		wg.Go(func() {
			if err := serve(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
				t.Errorf("serve %q: %v", id, err)
			}
		})
	}
	// Wait, bounded, for the journal to show a serving indexer.
	f, err := os.Open(jpath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := &journalReader{f: f}
	var recs []record
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !served(recs) && time.Now().Before(deadline) {
		<-tick.C
		more, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, more...)
	}
	cancel()
	wg.Wait()
	return recs
}

func served(recs []record) bool {
	for _, r := range recs {
		if r.Event == "serve-start" {
			return true
		}
	}
	return false
}

// TestServeOverEtcd runs two indexers over a real etcd through the
// etcd:// form of --store: one serves, under a positive token.
func TestServeOverEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	u := "etcd://" + strings.TrimPrefix(srv.Endpoints()[0], "http://") + "/indexer-test"
	recs := serveAll(t, u, "a", "b c")
	starts := 0
	for _, r := range recs {
		if r.Event == "serve-start" {
			starts++
			if r.Token <= 0 {
				t.Errorf("serving with token %d", r.Token)
			}
		}
	}
	if starts != 1 {
		t.Errorf("%d indexers started serving, want exactly 1; journal: %+v", starts, recs)
	}
}

// TestServeOverKube runs two indexers over a real kube-apiserver through the
// kube:// form of --store, with a kubeconfig file.
func TestServeOverKube(t *testing.T) {
	srv := kubetest.Start(t)
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := srv.WriteKubeconfig(kc); err != nil {
		t.Fatal(err)
	}
	recs := serveAll(t, "kube://default?kubeconfig="+url.QueryEscape(kc), "a", "b c")
	starts := 0
	for _, r := range recs {
		if r.Event == "serve-start" {
			starts++
		}
	}
	if starts != 1 {
		t.Errorf("%d indexers started serving, want exactly 1; journal: %+v", starts, recs)
	}
}

func TestKubeURLs(t *testing.T) {
	for _, bad := range []string{"kube://", "kube://ns/extra", "kube://ns?kubeconfig=/nonexistent", "kube://ns?other=1"} {
		if s, err := storeurl.Open(context.Background(), bad); err == nil {
			s.Close()
			t.Errorf("storeurl.Open(%q) succeeded", bad)
		}
	}
}
