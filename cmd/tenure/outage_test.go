package main

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/nats/natstest"
	"github.com/tenure-go/tenure/backends/postgres/pgtest"
)

// outageStores are the stores TestRunOutageCause takes down under a
// leading tenure: each returns a URL for run, and the functions that take
// the server down and bring it back.
var outageStores = []struct {
	name  string
	start func(t *testing.T) (url string, down, up func())
}{
	{"nats", func(t *testing.T) (string, func(), func()) {
		srv := natstest.Start(t)
		return srv.URL() + "/tenuretest?create=true", srv.Stop, srv.Restart
	}},
	{"postgres", func(t *testing.T) (string, func(), func()) {
		srv := pgtest.Start(t)
		return srv.DSN("postgres") + "&create=true", func() { srv.Kill(t) }, func() { srv.Restart(t) }
	}},
}

// TestRunOutageCause takes the store's server down under a leading
// tenure: its command is ended before the deadline, and the term ends as
// expired, with the store's error, in the log and in
// tenure_demotions_total, not as a clean stop. When the server is back,
// tenure leads again without taking its own earlier term's lingering claim
// for another holder with its identity. (Before, the log said
// reason=stopped err=<nil>, and the metrics counted a stop.)
func TestRunOutageCause(t *testing.T) {
	if testing.Short() {
		t.Skip("servers skipped in -short mode")
	}
	for _, s := range outageStores {
		t.Run(s.name, func(t *testing.T) {
			url, down, up := s.start(t)
			j := filepath.Join(t.TempDir(), "journal")
			a := startTenure(t, "a", j, nil, runArgs(url, "job", "a", "--metrics", "127.0.0.1:0")...)
			waitUntil(t, 30*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
			addr := metricsAddr(t, a)

			down()
			waitUntil(t, 30*time.Second, "a's term ended", func() bool { return a.logged(`msg="elector: demoted"`) })
			demoted := regexp.MustCompile(`msg="elector: demoted".*`).FindString(readLog(a))
			if !strings.Contains(demoted, "reason=expired") || strings.Contains(demoted, "err=<nil>") || !strings.Contains(demoted, "the last renewal failed") {
				t.Errorf("a's term ended with %q; want reason=expired with the store's error", demoted)
			}
			client := &http.Client{Timeout: 10 * time.Second}
			waitUntil(t, 10*time.Second, "the metrics count the expiry", func() bool {
				_, body := get(t, client, addr, "/metrics")
				return strings.Contains(body, `tenure_demotions_total{key="job",reason="expired"} 1`)
			})
			if _, body := get(t, client, addr, "/metrics"); strings.Contains(body, `tenure_demotions_total{key="job",reason="stopped"} 1`) {
				t.Errorf("the metrics count the outage as a stop")
			}

			up()
			waitUntil(t, 60*time.Second, "a's child started again", func() bool { return count(readJournal(t, j), "start") == 2 })
			if a.logged("another holder with this identity") {
				t.Errorf("a took its own earlier term for a duplicate identity:\n%s", readLog(a))
			}
			a.signal(syscall.SIGTERM)
			if code := a.wait(20 * time.Second); code != 0 {
				t.Errorf("a exited %d, want its child's 0", code)
			}
			checkJournal(t, readJournal(t, j))
		})
	}
}
