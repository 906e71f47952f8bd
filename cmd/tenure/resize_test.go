package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestResize grows a slot group of two, both held, to three: a third
// tenure run with --slots 3, which was told the stored size applies and
// how to change it, then gets a slot. Resizing a key that is no group
// fails in one line, with the usage status (it was 1).
func TestResize(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	env := []string{envSlots + "=3"}
	var ps []*proc
	for _, id := range []string{"a", "b"} {
		ps = append(ps, startTenure(t, id, j, env, runArgs(url, "workers", id, "--slots", "2")...))
	}
	waitUntil(t, 20*time.Second, "a's and b's children started", func() bool { return count(readJournal(t, j), "start") == 2 })
	c := startTenure(t, "c", j, env, runArgs(url, "workers", "c", "--slots", "3")...)
	ps = append(ps, c)
	waitUntil(t, 20*time.Second, "c told how to resize", func() bool {
		return c.logged("not --slots 3; the stored size applies: to change it, run tenure resize --store " + url + " --key workers --slots 3")
	})

	out, code, stderr := tenure(t, "resize", "--store", url, "--key", "workers", "--slots", "3")
	if code != 0 || out != "group \"workers\": size 3, was 2\n" {
		t.Fatalf("tenure resize: status %d, stdout %q, stderr %q", code, out, stderr)
	}
	waitUntil(t, 20*time.Second, "c's child started", func() bool { return count(readJournal(t, j), "start") == 3 })
	recs := readJournal(t, j)
	slotsSeen := map[int]bool{}
	for _, r := range starts(recs) {
		slotsSeen[r.slot] = true
	}
	if count(recs, "overlap") != 0 || !slotsSeen[2] {
		t.Errorf("journal %+v: want three children in slots 0 to 2", recs)
	}

	out, code, stderr = tenure(t, "resize", "--store", url, "--key", "single", "--slots", "3")
	if code != exitUsage || out != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "not a slot group") {
		t.Errorf("tenure resize of no group: status %d, stdout %q, stderr %q; want %d and one line", code, out, stderr, exitUsage)
	}
	for _, p := range ps {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range ps {
		p.wait(10 * time.Second)
	}
}

// tenure runs the tenure binary with args and returns its stdout, exit
// status and stderr without its log lines.
func tenure(t *testing.T, args ...string) (string, int, string) {
	t.Helper()
	cmd := exec.Command(tenureBin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = os.Environ()
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.SplitAfter(stderr.String(), "\n") {
		if l != "" && !strings.HasPrefix(l, "time=") {
			lines = append(lines, l)
		}
	}
	return stdout.String(), cmd.ProcessState.ExitCode(), strings.Join(lines, "")
}

// TestRunSingleClaimOnGroup runs a single claim (no --slots) on a key that
// is a slot group: the store answers plainly that the key is a group, so
// tenure ends at once with the usage status, where it used to retry and
// report the store as failing.
func TestRunSingleClaimOnGroup(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, []string{envSlots + "=2"}, runArgs(url, "workers", "a", "--slots", "2")...)
	waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })

	args := runArgs(url, "workers", "b", "--once")
	args[len(args)-1] = "true"
	cmd := exec.Command(tenureBin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	if code := cmd.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(stderr.String(), "slot group") {
		t.Errorf("tenure run --key workers without --slots on a group: status %d, want %d with the slot group named; stderr:\n%s", code, exitUsage, stderr.String())
	}
	a.signal(syscall.SIGTERM)
	a.wait(10 * time.Second)
}
