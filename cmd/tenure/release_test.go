package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRelease ends by hand the claim of a holder that died with an hour
// of TTL left: release refuses without --force, saying why; with --force
// it deletes the claim and the waiting tenure takes it at once. A holder
// that holds nothing is reported with status 1.
func TestRelease(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, nil, runArgs(url, "stuck", "a", "--ttl", "1h")...)
	waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
	a.signal(syscall.SIGKILL)
	a.wait(10 * time.Second)
	b := startTenure(t, "b", j, nil, runArgs(url, "stuck", "b")...)
	waitUntil(t, 20*time.Second, "b saw a lead", func() bool { return b.logged(`msg="elector: new leader"`) })

	_, code, stderr := tenure(t, "release", "--store", url, "--key", "stuck", "--holder", "a")
	if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "may still be running") || !strings.Contains(stderr, "--force") {
		t.Errorf("release without --force: status %d, stderr %q; want %d and one line naming --force", code, stderr, exitUsage)
	}
	_, code, stderr = tenure(t, "release", "--store", url, "--key", "stuck", "--holder", "nobody", "--force")
	if code != exitInternal || !strings.Contains(stderr, "holds no claim") {
		t.Errorf("release of a holder with no claim: status %d, stderr %q; want %d", code, stderr, exitInternal)
	}
	out, code, stderr := tenure(t, "release", "--store", url, "--key", "stuck", "--holder", "a", "--force")
	if code != 0 || !strings.Contains(out, `released "stuck": holder "a"`) {
		t.Fatalf("release --force: status %d, stdout %q, stderr %q", code, out, stderr)
	}
	waitUntil(t, 10*time.Second, "b's child started", func() bool { return count(readJournal(t, j), "start") == 2 })
	recs := readJournal(t, j)
	if s := starts(recs); s[1].token <= s[0].token {
		t.Errorf("journal %+v: b's token is not above a's", recs)
	}
	b.signal(syscall.SIGTERM)
	b.wait(10 * time.Second)
}

// TestHoldersPrefix lists every claim under a prefix, single claims and a
// slot group's slots, each with its key, in the table and in --json; a
// claim outside the prefix is left out.
func TestHoldersPrefix(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	env := []string{envSlots + "=4"}
	var ps []*proc
	for _, r := range []struct{ key, id, slots string }{
		{"jobs/nightly report", "a", "1"}, {"jobs/workers", "b", "2"}, {"jobs/workers", "c", "2"}, {"other", "d", "1"},
	} {
		ps = append(ps, startTenure(t, r.id, j, env, runArgs(url, r.key, r.id, "--slots", r.slots)...))
	}
	waitUntil(t, 30*time.Second, "four children started", func() bool { return count(readJournal(t, j), "start") == 4 })

	var got []holderJSON
	if err := json.Unmarshal([]byte(holders(t, "--store", url, "--prefix", "jobs/", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, h := range got {
		seen[h.Key+"|"+h.Holder] = true
	}
	if len(got) != 3 || !seen["jobs/nightly report|a"] || !seen["jobs/workers|b"] || !seen["jobs/workers|c"] {
		t.Errorf("holders --prefix jobs/ --json = %+v, want a on \"jobs/nightly report\", b and c on jobs/workers", got)
	}
	table := holders(t, "--store", url, "--prefix", "jobs/")
	if !strings.HasPrefix(table, "KEY ") || !strings.Contains(table, "jobs/nightly report") || strings.Contains(table, "other") {
		t.Errorf("holders --prefix jobs/:\n%s", table)
	}
	for _, p := range ps {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range ps {
		p.wait(10 * time.Second)
	}
}

// TestTransfer asks a running tenure, by the transfer command, to hand its
// claim to another: the leader's child is stopped before the named
// candidate's starts, at a higher token, and the command prints the new
// holder. A key nobody holds, and a leader that keeps no candidacy (and
// so never reads requests), give status 1.
func TestTransfer(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, nil, runArgs(url, "job", "a", "--priority", "0")...)
	waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
	b := startTenure(t, "b", j, nil, runArgs(url, "job", "b", "--priority", "0")...)
	waitUntil(t, 20*time.Second, "b saw a lead", func() bool { return b.logged(`msg="elector: new leader"`) })

	out, code, stderr := tenure(t, "transfer", "--store", url, "--key", "job", "--to", "b")
	if code != 0 || !strings.Contains(out, `transferred "job": from "a"`) || !strings.Contains(out, `to "b"`) {
		t.Fatalf("transfer --to b: status %d, stdout %q, stderr %q", code, out, stderr)
	}
	waitUntil(t, 10*time.Second, "b's child started", func() bool { return count(readJournal(t, j), "start") == 2 })
	recs := readJournal(t, j)
	checkJournal(t, recs)
	if !a.logged(`msg="elector: transferred"`) {
		t.Errorf("a did not log its transfer")
	}
	// The candidacies beside the claim are not claims of their own.
	out, code, stderr = tenure(t, "holders", "--store", url, "--prefix", "/", "--json")
	if code != 0 || strings.Count(out, `"holder"`) != 1 || !strings.Contains(out, `"b"`) {
		t.Errorf("holders --prefix / beside candidacies: status %d, stdout %q, stderr %q; want b's claim alone", code, out, stderr)
	}

	_, code, stderr = tenure(t, "transfer", "--store", url, "--key", "nobody-holds-this")
	if code != exitInternal || !strings.Contains(stderr, "no holder") {
		t.Errorf("transfer of a key nobody holds: status %d, stderr %q; want %d", code, stderr, exitInternal)
	}
	c := startTenure(t, "c", j, nil, runArgs(url, "plain", "c")...)
	waitUntil(t, 20*time.Second, "c's child started", func() bool { return count(readJournal(t, j), "start") == 3 })
	_, code, stderr = tenure(t, "transfer", "--store", url, "--key", "plain", "--to", "b", "--within", "2s")
	if code != exitInternal || !strings.Contains(stderr, "did not hand the claim over") {
		t.Errorf("transfer from a leader without a candidacy: status %d, stderr %q; want %d", code, stderr, exitInternal)
	}
	for _, p := range []*proc{a, b, c} {
		p.signal(syscall.SIGTERM)
		p.wait(10 * time.Second)
	}
}
