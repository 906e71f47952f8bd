package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/nats/natstest"
	"github.com/tenure-go/tenure/backends/postgres/pgtest"
)

// observedStores are the stores that judge expiry by local observation
// that the command's tests run: each returns a store URL for run (with
// create=true) and whether the store records a write time.
var observedStores = []struct {
	name     string
	url      func(t *testing.T) string
	recorded bool
}{
	{"nats", func(t *testing.T) string { return natstest.Start(t).URL() + "/tenuretest?create=true" }, true},
	{"postgres", func(t *testing.T) string { return pgtest.Start(t).DSN("postgres") + "&create=true" }, true},
}

// holdersJSON runs tenure holders --json with args and decodes its answer.
func holdersJSON(t *testing.T, args ...string) []holderJSON {
	t.Helper()
	var got []holderJSON
	out := holders(t, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("holders --json %q: %v\n%s", args, err, out)
	}
	return got
}

// TestHoldersTellTheTruth checks that on a store that judges expiry by local
// observation, a holder SIGKILLed a moment ago is still listed by a fresh
// tenure holders, but never with a time left: "unverified", with the time of
// its last write where the store records one; holders --wait watches for one
// TTL and then leaves it out. A live holder is listed by --wait with the time
// left as this process judged it. (Before, a fresh holders printed the full
// TTL as the time left of a holder dead for minutes.)
func TestHoldersTellTheTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("servers skipped in -short mode")
	}
	for _, s := range observedStores {
		t.Run(s.name, func(t *testing.T) {
			url := s.url(t)
			read := strings.Replace(url, "&create=true", "", 1)
			read = strings.Replace(read, "?create=true", "", 1)
			j := filepath.Join(t.TempDir(), "journal")
			a := startTenure(t, "a", j, nil, runArgs(url, "dead", "a")...)
			b := startTenure(t, "b", j, nil, runArgs(url, "live", "b")...)
			waitUntil(t, 30*time.Second, "both children started", func() bool { return count(readJournal(t, j), "start") == 2 })
			a.signal(syscall.SIGKILL)
			a.wait(10 * time.Second)

			table := holders(t, "--store", read, "--key", "dead")
			lines := strings.Split(strings.TrimSpace(table), "\n")
			if len(lines) != 2 {
				t.Fatalf("holders of the dead holder's claim:\n%s\nwant a header and a line", table)
			}
			f := strings.Fields(lines[1])
			if len(f) != 6 || f[0] != "a" || f[3] != "unverified" {
				t.Errorf("holders line %q: want a's claim with its time left \"unverified\"", lines[1])
			}
			if _, err := time.ParseDuration(f[3]); err == nil {
				t.Errorf("holders printed a time left (%s) the store did not judge", f[3])
			}
			got := holdersJSON(t, "--store", read, "--key", "dead")
			if len(got) != 1 || got[0].Verified || got[0].RemainingSeconds != nil {
				t.Errorf("holders --json of the dead holder: %+v, want it unverified, without remaining_seconds", got)
			}
			if len(got) == 1 && s.recorded {
				if got[0].Recorded == nil || time.Since(*got[0].Recorded) > time.Minute {
					t.Errorf("holders --json: recorded %v, want the time of the last write, a moment ago", got[0].Recorded)
				}
				if f[4] == "-" {
					t.Errorf("holders line %q: want the recorded time", lines[1])
				}
			}

			// watch starts from a's claim, unverified, and sees it go
			// once it watched it unchanged for a TTL.
			w := startTenure(t, "watch", "", nil, "watch", "--store", read, "--key", "dead", "--json", "--interval", "200ms")
			events := watchEvents(t, w, 1)
			if e := events[0]; e.Event != "held" || e.Holder != "a" || !e.Unverified {
				t.Errorf("watch started with %+v, want a held, unverified", e)
			}
			events = watchEvents(t, w, 2)
			if e := events[1]; e.Event != "gone" || e.Holder != "a" {
				t.Errorf("watch then printed %+v, want a gone", e)
			}
			w.signal(syscall.SIGTERM)
			w.wait(10 * time.Second)

			if got := holdersJSON(t, "--store", read, "--key", "dead", "--wait"); len(got) != 0 {
				t.Errorf("holders --wait of the dead holder's claim: %+v, want nobody", got)
			}
			got = holdersJSON(t, "--store", read, "--key", "live", "--wait")
			if len(got) != 1 || got[0].Holder != "b" || !got[0].Verified || got[0].RemainingSeconds == nil || *got[0].RemainingSeconds <= 0 {
				t.Errorf("holders --wait of the live holder: %+v, want b, verified, with time left", got)
			}
			b.signal(syscall.SIGTERM)
			b.wait(20 * time.Second)
		})
	}
}
