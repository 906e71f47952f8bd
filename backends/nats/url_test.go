package nats

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/nats/natstest"
	"github.com/tenure-go/tenure/storeurl"
)

// TestParseURL checks what a NATS URL asks for, as the registered scheme
// reads it.
func TestParseURL(t *testing.T) {
	tests := []struct {
		url  string
		want urlConfig
	}{
		{"nats://127.0.0.1:4222/claims", urlConfig{servers: []string{"127.0.0.1:4222"}, bucket: "claims"}},
		{"nats://a,b:5000/c-1_x", urlConfig{servers: []string{"a:4222", "b:5000"}, bucket: "c-1_x"}},
		{"NATS://a/b?replicas=3&gcgrace=90m", urlConfig{servers: []string{"a:4222"}, bucket: "b", replicas: 3, grace: 90 * time.Minute}},
		{"nats://me:s3cret@a/b", urlConfig{servers: []string{"a:4222"}, bucket: "b", user: "me", password: "s3cret"}},
		{"nats://[::1]:4223/b", urlConfig{servers: []string{"[::1]:4223"}, bucket: "b"}},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parseURL(u)
		if err != nil || !slices.Equal(got.servers, tt.want.servers) || got.bucket != tt.want.bucket || got.replicas != tt.want.replicas ||
			got.grace != tt.want.grace || got.user != tt.want.user || got.password != tt.want.password {
			t.Errorf("parseURL(%q) = %+v, %v; want %+v", tt.url, got, err, tt.want)
		}
		if _, err := storeurl.Parse(tt.url); err != nil {
			t.Errorf("storeurl.Parse(%q): %v", tt.url, err)
		}
	}
}

// TestParseURLRefused checks that hostile or mistaken URLs are refused at
// parse, before anything is dialled, and never echo a password.
func TestParseURLRefused(t *testing.T) {
	for _, raw := range []string{
		"nats://",
		"nats:///b",
		"nats://a",
		"nats://a/",
		"nats://a/b/c",
		"nats://a/b.c",
		"nats://a/*",
		"nats://a/%3E",
		"nats://a/b%20c",
		"nats://a/%00",
		"nats://a/" + strings.Repeat("b", 256),
		"nats://a:0/b",
		"nats://a:65536/b",
		"nats://a:x/b",
		"nats://a,,b/c",
		"nats://a b/c",
		"nats://a/b?replicas=0",
		"nats://a/b?replicas=6",
		"nats://a/b?replicas=01",
		"nats://a/b?replicas=x",
		"nats://a/b?replicas=1&replicas=3",
		"nats://a/b?gcgrace=0s",
		"nats://a/b?gcgrace=500ms",
		"nats://a/b?gcgrace=-1h",
		"nats://a/b?gcgrace=soon",
		"nats://a/b?ttl=1s",
		"nats://a/b#frag",
		"nats://me:hunter2@a/b?replicas=9",
		"nats://a/b?create=maybe",
	} {
		_, err := storeurl.Parse(raw)
		if err == nil {
			t.Errorf("storeurl.Parse(%q) succeeded, want refused", raw)
			continue
		}
		if !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("storeurl.Parse(%q) = %v, want an error wrapping ErrInvalid", raw, err)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("storeurl.Parse(%q) = %v shows the password", raw, err)
		}
	}
}

// TestOpenURL checks that a URL opens a store on a real server: create=true
// makes the bucket with per-key TTLs, a missing bucket without it is a
// missing resource, replicas without create=true is refused, and an
// unreachable server fails the open naming it.
func TestOpenURL(t *testing.T) {
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := "nats://" + srv.HostPort() + "/urlbucket"

	if s, err := storeurl.Open(ctx, base); !errors.Is(err, backends.ErrMissingResource) || !strings.Contains(err.Error(), "create=true") {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open(%q) of a missing bucket = %v, want ErrMissingResource naming create=true", base, err)
	}
	if s, err := storeurl.Open(ctx, base+"?replicas=1"); err == nil || !strings.Contains(err.Error(), "create=true") {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open(%q) = %v, want refused: replicas without create=true", base+"?replicas=1", err)
	}
	s, err := storeurl.Open(ctx, base+"?create=true&gcgrace=2h")
	if err != nil {
		t.Fatalf("Open(create=true): %v", err)
	}
	e, err := s.CreateIfAbsent(ctx, "k", []byte("v"), time.Second)
	if err != nil {
		t.Fatalf("CreateIfAbsent: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// The bucket exists now: opening it again needs no create.
	s, err = storeurl.Open(ctx, base)
	if err != nil {
		t.Fatalf("Open of the created bucket: %v", err)
	}
	defer s.Close()
	if got, err := s.Get(ctx, "k"); err != nil || got.CreateRevision != e.CreateRevision {
		t.Errorf("Get after reopen = %+v, %v; want token %d", got, err, e.CreateRevision)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	raw := "nats://" + addr + "/b"
	short, cancel2 := context.WithTimeout(ctx, 3*time.Second)
	defer cancel2()
	if s, err := storeurl.Open(short, raw); err == nil {
		s.Close()
		t.Errorf("Open(%q) of a closed port succeeded", raw)
	} else if !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), addr) {
		t.Errorf("Open(%q) = %v, want ErrUnavailable naming %s", raw, err, addr)
	}
}

// TestErrorNamesDisconnection checks that a request made while the server is
// down fails with an error that says the client is not connected, and with
// the connection's last error, not only that its context ended.
func TestErrorNamesDisconnection(t *testing.T) {
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := storeurl.Open(ctx, "nats://"+srv.HostPort()+"/downbucket?create=true")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv.Stop()
	for _, op := range []struct {
		name string
		do   func(ctx context.Context) error
	}{
		{"get", func(ctx context.Context) error { _, err := s.Get(ctx, "k"); return err }},
		{"create", func(ctx context.Context) error {
			_, err := s.CreateIfAbsent(ctx, "k", []byte("v"), time.Second)
			return err
		}},
	} {
		// The client tries to reconnect every two seconds: until its
		// first attempt failed, it knows only that it is reconnecting.
		var err error
		for i := 0; i < 20; i++ {
			octx, ocancel := context.WithTimeout(ctx, 500*time.Millisecond)
			err = op.do(octx)
			ocancel()
			if err != nil && strings.Contains(err.Error(), "connection refused") {
				break
			}
		}
		if err == nil || !strings.Contains(err.Error(), "not connected to a server") || !strings.Contains(err.Error(), "connection refused") || backends.Classify(err) != backends.ClassTransient {
			t.Errorf("%s with the server down = %v, want a transient error saying the client is not connected and why (connection refused)", op.name, err)
		}
		t.Logf("%s: %v", op.name, err)
	}
}

// TestErrorNamesUnansweredRequest checks that a request to a server that
// is up but does not answer (paused with SIGSTOP, its connections open)
// fails by its deadline with an error that names the operation, the key
// and what the server did not answer, still transient and still the
// context's error, not only that the context ended.
func TestErrorNamesUnansweredRequest(t *testing.T) {
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := storeurl.Open(ctx, "nats://"+srv.HostPort()+"/pausedbucket?create=true")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	held, err := s.CreateIfAbsent(ctx, "held", []byte("v"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	defer srv.Resume(t)
	for _, op := range []struct {
		name, key, want string
		do              func(ctx context.Context) error
	}{
		{"get", "k", "did not answer the read of the key's last message within the deadline", func(ctx context.Context) error { _, err := s.Get(ctx, "k"); return err }},
		{"create", "k", "did not answer the read of the key's last message within the deadline", func(ctx context.Context) error {
			_, err := s.CreateIfAbsent(ctx, "k", []byte("v"), time.Second)
			return err
		}},
		// This store wrote held last: the keep-alive publishes at once.
		{"keepalive", "held", "did not answer the write (its outcome is unknown) within the deadline", func(ctx context.Context) error {
			_, err := s.KeepAlive(ctx, "held", held.Revision, time.Minute)
			return err
		}},
	} {
		octx, ocancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := op.do(octx)
		ocancel()
		prefix := fmt.Sprintf("nats: %s %q: ", op.name, op.key)
		if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), op.want) || !errors.Is(err, context.DeadlineExceeded) || backends.Classify(err) != backends.ClassTransient {
			t.Errorf("%s with the server paused = %v, want a transient error wrapping the deadline, beginning %q and saying the server %s", op.name, err, prefix, op.want)
		}
		t.Logf("%s: %v", op.name, err)
	}
}
