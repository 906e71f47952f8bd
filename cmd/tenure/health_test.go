package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/health"
)

// metricsAddr reads the address p serves --metrics on from its log.
func metricsAddr(t *testing.T, p *proc) string {
	t.Helper()
	var addr string
	waitUntil(t, 20*time.Second, p.name+" serves metrics", func() bool {
		b, _ := os.ReadFile(p.log)
		m := regexp.MustCompile(`msg="serving metrics" addr=(\S+)`).FindSubmatch(b)
		if m != nil {
			addr = string(m[1])
		}
		return m != nil
	})
	return addr
}

// get fetches path from addr and returns the status and the body.
func get(t *testing.T, client *http.Client, addr, path string) (int, string) {
	t.Helper()
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestRunHealth probes /healthz and /readyz of a leading tenure and of a
// waiting one, on their --metrics listeners: both are live and ready (a
// healthy follower is a ready standby), only the leader answers /leaderz;
// and tenure_panics_total is in the first scrape. (Before, /readyz failed
// for a healthy follower.)
func TestRunHealth(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, nil, runArgs(url, "job", "a", "--metrics", "127.0.0.1:0")...)
	waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
	b := startTenure(t, "b", j, nil, runArgs(url, "job", "b", "--metrics", "127.0.0.1:0")...)
	waitUntil(t, 20*time.Second, "b saw a lead", func() bool { return b.logged(`msg="elector: new leader"`) })
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for _, tt := range []struct {
		p                   *proc
		live, ready, leader int
	}{{a, 200, 200, 200}, {b, 200, 200, 503}} {
		addr := metricsAddr(t, tt.p)
		for _, c := range []struct {
			path string
			want int
		}{{"/healthz", tt.live}, {"/readyz", tt.ready}, {"/leaderz", tt.leader}} {
			code, body := get(t, client, addr, c.path)
			var rep health.Report
			if err := json.Unmarshal([]byte(body), &rep); err != nil {
				t.Fatalf("%s %s: %v in %q", tt.p.name, c.path, err, body)
			}
			if code != c.want || rep.Holder != tt.p.name || rep.Key != "job" {
				t.Errorf("%s %s: %d %s, want %d for holder %s", tt.p.name, c.path, code, body, c.want, tt.p.name)
			}
		}
		if _, body := get(t, client, addr, "/metrics"); !strings.Contains(body, `tenure_panics_total{key="job",where="OnElected"} 0`) {
			t.Errorf("%s /metrics lacks tenure_panics_total at 0", tt.p.name)
		}
	}
	for _, p := range []*proc{a, b} {
		p.signal(syscall.SIGTERM)
		p.wait(10 * time.Second)
	}
}

// TestUsageFlags checks the flags' values that are usage errors: one line
// on stderr, exit status 2.
func TestUsageFlags(t *testing.T) {
	run := []string{"run", "--store", "file:///tmp/tenure-usage", "--key", "k"}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{append(append([]string{}, run...), "--metrics", "bogus", "--", "true"), `--metrics "bogus"`},
		{append(append([]string{}, run...), "--timeout", "0s", "--", "true"), "--timeout 0s"},
		{[]string{"holders", "--store", "file:///tmp/x", "--key", "k", "--timeout", "-1s"}, "--timeout -1s"},
	} {
		var stdout, stderr bytes.Buffer
		if code := execute(tt.args, &stdout, &stderr); code != exitUsage {
			t.Errorf("tenure %q exited %d, want %d", tt.args, code, exitUsage)
		}
		if msg := stderr.String(); strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tt.want) {
			t.Errorf("tenure %q: stderr %q, want one line containing %q", tt.args, msg, tt.want)
		}
	}
}
