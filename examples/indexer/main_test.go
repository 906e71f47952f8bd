package main

import (
	"bytes"
	"context"
	"errors"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/storeurl"
)

// TestMain lets the demo re-execute this test binary as its indexers: the
// demo starts os.Executable() with "serve ...".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m, etcdtest.LeakOptions()...)
}

// TestDemo runs the demo end to end, with real processes over a filestore,
// and requires every one of its checks to hold: the transfer's (the
// follower it named took the claim at a greater token, after the old
// leader stopped serving, and the old leader ran on) among them.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and waits out a real lease TTL")
	}
	var out, errOut bytes.Buffer
	code := run([]string{"demo", "--ttl", "1s"}, &out, &errOut)
	t.Logf("demo output:\n%s", out.String())
	if code != 0 {
		t.Fatalf("demo exited %d; stderr:\n%s", code, errOut.String())
	}
	for _, want := range []string{
		"ok   never two serving at once",
		"ok   tokens strictly increase",
		"ok   a transfer hands the claim to the follower it names",
		"ok   a write under a dead term's token is refused",
		"all checks held",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}

func TestPublishIsFenced(t *testing.T) {
	store, err := filestore.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	key := endpointKey("g", 0)
	steps := []struct {
		token int64
		stale bool
	}{
		{token: 5},
		{token: 5},              // the same term publishing again
		{token: 7},              // a later term
		{token: 6, stale: true}, // an earlier term, paused and woken up
		{token: 1, stale: true},
		{token: 8},
	}
	for _, s := range steps {
		err := publish(ctx, store, key, endpoint{ID: "x", Token: s.token})
		if got := errors.Is(err, errStale); got != s.stale || (!s.stale && err != nil) {
			t.Errorf("publish with token %d: err = %v, want stale=%v", s.token, err, s.stale)
		}
	}
	e, err := store.Get(ctx, key)
	if err != nil || !strings.Contains(string(e.Value), `"token":8`) {
		t.Errorf("record after the steps = %s, %v; want token 8", e.Value, err)
	}
}

func TestServeFlags(t *testing.T) {
	tests := []struct {
		args []string
		bad  string
	}{
		{[]string{"--id", "a"}, "--store is required"},
		{[]string{"--store", "file:///x"}, "--id is required"},
		{[]string{"--store", "file:///x", "--id", "a", "extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		_, err := parseServe(tt.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.bad) {
			t.Errorf("parseServe(%q) = %v, want %q", tt.args, err, tt.bad)
		}
	}
	if _, err := storeurl.Open(context.Background(), "ftp://x"); err == nil {
		t.Error("Open(ftp://x) succeeded")
	}
	var out bytes.Buffer
	if code := run([]string{"bogus"}, &out, &out); code != 2 {
		t.Errorf("run(bogus) = %d, want 2", code)
	}
}
