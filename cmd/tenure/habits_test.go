package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunTry checks that a tenure run --try that finds the claim held gives
// up once the time has passed, with exit status 124, and never starts its
// command; the holder is not disturbed.
func TestRunTry(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, nil, runArgs(url, "job", "a")...)
	waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
	b := startTenure(t, "b", j, nil, runArgs(url, "job", "b", "--try", "1s")...)
	if code := b.wait(20 * time.Second); code != exitTry {
		t.Errorf("b --try 1s on a held claim exited %d, want %d", code, exitTry)
	}
	if !b.logged("claim not acquired within --try") {
		t.Errorf("b did not say why it gave up:\n%s", readLog(b))
	}
	if recs := readJournal(t, j); count(recs, "start") != 1 || count(recs, "end") != 0 {
		t.Errorf("journal %+v: want a's child alone, still running", recs)
	}
	// Free, the claim is taken within --try and the command runs.
	a.signal(syscall.SIGTERM)
	a.wait(10 * time.Second)
	c := startTenure(t, "c", j, []string{envHold + "=1ms"}, runArgs(url, "job", "c", "--try", "10s", "--once")...)
	if code := c.wait(20 * time.Second); code != 0 {
		t.Errorf("c --try 10s on a free claim exited %d, want its child's 0", code)
	}
}

// TestRunRefusesCommand checks that a command that does not exist or cannot
// be executed is refused before tenure opens the store or campaigns, in one
// line with a shell's status, so that a standby with a typo does not look
// healthy until it leads. (Before, tenure campaigned first, and here, over a
// store that does not exist, exited 69.)
func TestRunRefusesCommand(t *testing.T) {
	noexec := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := "file://" + filepath.Join(t.TempDir(), "no-store-here")
	for _, tt := range []struct {
		command string
		want    int
	}{
		{"/nonexistent/command", exitNotFound},
		{"tenure-no-such-command-in-path", exitNotFound},
		{noexec, exitNoExec},
		{t.TempDir(), exitNoExec},
	} {
		out, code, stderr := tenure(t, "run", "--store", store, "--key", "k", "--", tt.command)
		if code != tt.want || out != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.command) {
			t.Errorf("tenure run -- %s: status %d, stdout %q, stderr %q; want %d and one line naming it", tt.command, code, out, stderr, tt.want)
		}
	}
}

// TestRunStoppedCommandLogged stops the running command with SIGSTOP, as a
// terminal stops a background job that reads it: tenure logs it, and logs
// it again when continued. A SIGTERM to tenure then ends a stopped
// command at once (the tree gets SIGCONT after SIGTERM), not at the kill.
func TestRunStoppedCommandLogged(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, nil, runArgs(url, "job", "a", "--kill-grace", "600ms")...)
	waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
	pid := starts(readJournal(t, j))[0].pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "tenure logged the stop", func() bool { return a.logged("command stopped") && a.logged("signal=\"stopped (signal)\"") })
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "tenure logged the continue", func() bool { return a.logged("command continued") })
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "tenure logged the second stop", func() bool { return strings.Count(readLog(a), `msg="command stopped`) == 2 })
	a.signal(syscall.SIGTERM)
	if code := a.wait(10 * time.Second); code != 0 {
		t.Errorf("a exited %d after SIGTERM with its child stopped, want the child's 0 (it got SIGCONT and ended)", code)
	}
	if a.logged("killing command") {
		t.Errorf("a had to kill its stopped child:\n%s", readLog(a))
	}
}

// TestRunEnvironment checks that the command gets TENURE_ID, the identity it
// holds the claim under, beside TENURE_TOKEN, TENURE_SLOT and TENURE_KEY.
func TestRunEnvironment(t *testing.T) {
	url := stores[0].url(t)
	out := filepath.Join(t.TempDir(), "env")
	_, code, stderr := tenure(t, "run", "--store", url, "--key", "envjob", "--id", "worker 7", "--once", "--",
		"sh", "-c", `printf '%s|%s|%s|%s\n' "$TENURE_ID" "$TENURE_KEY" "$TENURE_SLOT" "$TENURE_TOKEN" > `+out)
	if code != 0 {
		t.Fatalf("tenure run exited %d: %s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); !strings.HasPrefix(got, "worker 7|envjob|0|") || strings.HasSuffix(got, "|") {
		t.Errorf("the command saw TENURE_ID|KEY|SLOT|TOKEN = %q, want \"worker 7|envjob|0|TOKEN\"", got)
	}
}

// TestPasswordFromFile checks that --password-file gives a password to a URL
// that names a user; it is refused, in one line with status 2, for a URL of a
// store that takes none, and for a file that cannot be read.
func TestPasswordFromFile(t *testing.T) {
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// An etcd that is not there: what matters is that the password is
	// taken and never shown.
	_, code, stderr := tenure(t, "holders", "--store", "etcd://alice@"+closedPort(t)+"/p", "--password-file", pw, "--key", "k", "--timeout", "1s")
	if code != exitStore || strings.Contains(stderr, "s3cret") || !strings.Contains(stderr, "alice:xxxxx@") {
		t.Errorf("holders over etcd with --password-file: status %d, stderr %q; want %d, the password redacted", code, stderr, exitStore)
	}
	for _, tt := range []struct {
		args []string
		says string
	}{
		{[]string{"holders", "--store", "file:///var/lib/tenure", "--password-file", pw, "--key", "k"}, "takes no user or password"},
		{[]string{"holders", "--store", "etcd://alice@127.0.0.1:2379/p", "--password-file", filepath.Join(pw, "none"), "--key", "k"}, "--password-file"},
	} {
		_, code, stderr := tenure(t, tt.args...)
		if code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.says) {
			t.Errorf("tenure %q: status %d, stderr %q; want %d and one line saying %q", tt.args, code, stderr, exitUsage, tt.says)
		}
	}
}

// TestReadersTakeCreate checks that holders, watch and resize take the
// --store value run is given, create=true included, and create nothing: over
// a directory that does not exist they exit 69 and leave it unmade; over a
// store, holders reads it. (Before, they refused the URL as bad usage.)
func TestReadersTakeCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "typo", "claims")
	url := "file://" + dir + "?create=true"
	for _, args := range [][]string{
		{"holders", "--store", url, "--key", "k"},
		{"watch", "--store", url, "--key", "k"},
		{"resize", "--store", url, "--key", "k", "--slots", "2"},
	} {
		_, code, stderr := tenure(t, args...)
		if code != exitStore || !strings.Contains(stderr, dir) {
			t.Errorf("tenure %s over %s: status %d, stderr %q; want %d naming the directory", args[0], url, code, stderr, exitStore)
		}
		if _, err := os.Stat(filepath.Dir(dir)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("after tenure %s, stat %s = %v; want it not to exist", args[0], filepath.Dir(dir), err)
		}
	}
	store := "file://" + t.TempDir() + "?create=true"
	if _, code, stderr := tenure(t, "run", "--store", store, "--key", "k", "--once", "--", "true"); code != 0 {
		t.Fatalf("tenure run: status %d: %s", code, stderr)
	}
	if out, code, stderr := tenure(t, "holders", "--store", store, "--key", "k"); code != 0 || !strings.HasPrefix(out, "HOLDER") {
		t.Errorf("tenure holders over %s: status %d, stdout %q, stderr %q", store, code, out, stderr)
	}
}

// TestRunSlotGroupMisuse checks that tenure run without --slots on a slot
// group's key prints one line that says the group's size and the flag to add,
// with status 2, and no error log; run with --slots 5 on a group of 2 warns
// once, naming the resize.
func TestRunSlotGroupMisuse(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, []string{envSlots + "=3"}, runArgs(url, "workers", "a", "--slots", "2")...)
	waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })

	_, code, stderr := tenure(t, "run", "--store", url, "--key", "workers", "--once", "--", "true")
	if want := `tenure run: --key "workers" is a slot group of 2: add --slots 2`; code != exitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
		t.Errorf("tenure run without --slots on a group of 2: status %d, stderr %q; want %d and the one line %q", code, stderr, exitUsage, want)
	}

	b := startTenure(t, "b", j, []string{envSlots + "=3"}, runArgs(url, "workers", "b", "--slots", "5")...)
	waitUntil(t, 20*time.Second, "b's child started", func() bool { return count(readJournal(t, j), "start") == 2 })
	if n := strings.Count(readLog(b), "the stored size applies"); n != 1 {
		t.Errorf("b --slots 5 on a group of 2 warned %d times, want once:\n%s", n, readLog(b))
	}
	if strings.Contains(readLog(b), "level=ERROR") {
		t.Errorf("b logged errors:\n%s", readLog(b))
	}
	for _, p := range []*proc{a, b} {
		p.signal(syscall.SIGTERM)
		p.wait(10 * time.Second)
	}
}
