package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// closedPort returns a 127.0.0.1 port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestOpenTimeout points every subcommand at an etcd endpoint where
// nothing listens, with a short --timeout: each exits 69 within the bound,
// with one line on stderr that names the store and the error, after
// logging what it connects to.
func TestOpenTimeout(t *testing.T) {
	url := "etcd://" + closedPort(t) + "/p"
	const timeout = time.Second
	for _, args := range [][]string{
		{"run", "--store", url, "--key", "k", "--once", "--timeout", timeout.String(), "--", "true"},
		{"watch", "--store", url, "--key", "k", "--timeout", timeout.String()},
		{"holders", "--store", url, "--key", "k", "--timeout", timeout.String()},
	} {
		t.Run(args[0], func(t *testing.T) {
			p := startTenure(t, args[0], filepath.Join(t.TempDir(), "journal"), nil, args...)
			began := monoNow()
			// The bound is checked with room for a loaded machine; the
			// defect was a wait of minutes.
			code := p.wait(timeout + 10*time.Second)
			took := time.Duration(monoNow() - began)
			if code != exitStore {
				t.Errorf("tenure %q exited %d, want %d", args, code, exitStore)
			}
			b, _ := os.ReadFile(p.log)
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if !strings.HasPrefix(l, "time=") {
					lines = append(lines, l)
				}
			}
			want := "tenure " + args[0] + ": open store " + url + ": "
			if len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
				t.Errorf("tenure %q: stderr\n%s\nwant one line starting %q", args, b, want)
			}
			if !strings.Contains(string(b), `msg="opening store" store=`+url) {
				t.Errorf("tenure %q: stderr\n%s\nwant an info line naming the store", args, b)
			}
			t.Logf("tenure %s exited %d after %v: %s", args[0], code, took, lines)
		})
	}
}
