package etcd

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"
)

// TestParseURL checks what an etcd URL asks for, as the registered scheme
// reads it.
func TestParseURL(t *testing.T) {
	tests := []struct {
		url       string
		endpoints string
		prefix    string
		shared    bool
		user      string
	}{
		{"etcd://127.0.0.1:2379/indexer", "127.0.0.1:2379", "indexer/", false, ""},
		{"etcd://h1:1,h2:2/a/b/", "h1:1 h2:2", "a/b/", false, ""},
		{"etcd://h1,h2:2380/a/b/", "h1:2379 h2:2380", "a/b/", false, ""},
		{"etcd://h1/p", "h1:2379", "p/", false, ""},
		{"etcd://[::1]:2380/p", "[::1]:2380", "p/", false, ""},
		{"etcd://[::1]/p", "[::1]:2379", "p/", false, ""},
		{"etcd://user:secret@h1:1/p", "h1:1", "p/", false, "user"},
		{"etcd://h/p?lease=shared", "h:2379", "p/", true, ""},
		{"etcd://h/p?lease=per-claim", "h:2379", "p/", false, ""},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatalf("url.Parse(%q): %v", tt.url, err)
		}
		c, err := parseURL(u)
		if err != nil || strings.Join(c.endpoints, " ") != tt.endpoints || c.prefix != tt.prefix || c.shared != tt.shared || c.user != tt.user {
			t.Errorf("parseURL(%q) = %+v, %v; want endpoints %s, prefix %q, shared %v, user %q", tt.url, c, err, tt.endpoints, tt.prefix, tt.shared, tt.user)
		}
		if _, err := storeurl.Parse(tt.url); err != nil {
			t.Errorf("storeurl.Parse(%q): %v", tt.url, err)
		}
	}
}

// TestOpenURLRefused checks that storeurl.Open refuses a malformed etcd
// URL as a bad URL, without the password, before it dials anything.
func TestOpenURLRefused(t *testing.T) {
	bad := []string{
		"etcd://h1:2379",           // no prefix
		"etcd://h1:2379/",          // no prefix
		"etcd:///p",                // no host
		"etcd://h1:0/p",            // bad port
		"etcd://h1:1/p?x=1",        // unknown parameter
		"etcd://h1:1/p?lease=wild", // unknown lease mode
		"etcd://h1:1/p#frag",       // fragment
		"etcd:h1",                  // opaque
		"etcd://u:secret@h1:1/p?create=true",
	}
	for _, s := range bad {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := storeurl.Open(ctx, s)
		cancel()
		if err == nil {
			st.Close()
		}
		if !errors.Is(err, backends.ErrInvalid) || strings.Contains(err.Error(), "secret") {
			t.Errorf("storeurl.Open(%q) = %v, want ErrInvalid without the password", s, err)
		}
	}
}

// TestOpenURLUnreachable checks that opening a URL of a port nobody
// listens on ends by ctx's deadline, naming the endpoint and the refusal.
func TestOpenURLUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	u := "etcd://" + addr + "/p"
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	s, err := storeurl.Open(ctx, u)
	if err == nil {
		s.Close()
		t.Fatalf("storeurl.Open(%s) succeeded", u)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection refused") ||
		!errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("storeurl.Open(%s) = %v; want the endpoint, the refusal, ErrUnavailable and the deadline", u, err)
	}

	// A ctx that has no deadline but is cancelled ends the dial as well.
	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		s, err := storeurl.Open(ctx2, u)
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	cancel2()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("storeurl.Open with a cancelled ctx = %v, want context.Canceled", err)
	}
}
