package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
)

var killLoop = flag.Int("kill-loop", 3, "iterations of TestRunKillLoop (make kill-loop runs 50)")

// envTree marks every process of one tenure's tree (the environment is
// inherited), so the tests can list the tree from outside, in /proc.
const envTree = "TENURE_TEST_TREE"

// treeMarker is a value of envTree no other run of the tests uses.
func treeMarker(t *testing.T, name string) string {
	t.Helper()
	return fmt.Sprintf("%s-%d-%d", name, os.Getpid(), monoNow())
}

// treeProcs lists the live processes (zombies have exited) whose
// environment has envTree=marker, but for the tenures in skip and any
// "tenure run" itself (one just started may not be in skip yet).
func treeProcs(marker string, skip map[int]bool) []int {
	ents, _ := os.ReadDir("/proc")
	want := []byte(envTree + "=" + marker + "\x00")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || skip[pid] {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !bytes.Contains(env, want) || !alive(pid) {
			continue
		}
		if cl, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline"); bytes.HasPrefix(cl, []byte(tenureBin+"\x00run\x00")) {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// cmdlines describes pids for a failure message, and kills them: a test
// that failed must not leave them running.
func reap(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		fmt.Fprintf(&b, "\n  %d: %s", pid, strings.ReplaceAll(string(cl), "\x00", " "))
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return b.String()
}

// treeArgs is tenure run over a tree: a shell that starts a background
// sleep, then execs the test child (which starts a double-forked daemon
// if env asks for it).
func treeArgs(url, key, id string, extra ...string) []string {
	args := []string{"run", "--store", url, "--key", key, "--ttl", testTTL.String(), "--id", id, "--log-level", "debug"}
	args = append(args, extra...)
	return append(args, "--", "sh", "-c", `sleep 3170 & exec "$0"`, "CHILD")
}

// TestRunKillTree SIGKILLs a tenure whose command is a tree of processes:
// a shell's background child, and a daemon that double-forked into a
// session of its own. Nothing of the tree may outlive the term's local
// deadline, which is at most a TTL after the kill; it is judged from
// outside, by listing the processes.
func TestRunKillTree(t *testing.T) {
	for _, daemon := range []bool{false, true} {
		t.Run(fmt.Sprintf("daemon=%v", daemon), func(t *testing.T) {
			url := stores[0].url(t)
			j := filepath.Join(t.TempDir(), "journal")
			marker := treeMarker(t, "a")
			env := []string{envTree + "=" + marker}
			want := 2 // the child (the shell exec'd it) and sleep
			if daemon {
				env = append(env, envDaemon+"=1")
				want++
			}
			a := startTenure(t, "a", j, env, treeArgs(url, "job", "a")...)
			skip := map[int]bool{a.cmd.Process.Pid: true}
			t.Cleanup(func() { reap(treeProcs(marker, nil)) })
			waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
			waitUntil(t, 5*time.Second, "a's tree is up", func() bool { return len(treeProcs(marker, skip)) >= want })
			before := treeProcs(marker, skip)
			killed := monoNow()
			a.signal(syscall.SIGKILL)
			a.wait(5 * time.Second)
			clk := clock.New()
			for len(treeProcs(marker, skip)) > 0 && time.Duration(monoNow()-killed) < 2*testTTL {
				clk.Sleep(time.Millisecond)
			}
			gone := time.Duration(monoNow() - killed)
			if left := treeProcs(marker, skip); len(left) > 0 {
				t.Fatalf("%v after SIGKILL of tenure, %d of the %d processes of its tree run on:%s", gone, len(left), len(before), reap(left))
			}
			t.Logf("the %d processes of the tree were gone %v after SIGKILL of tenure (ttl %v)", len(before), gone, testTTL)
			if gone >= testTTL {
				t.Errorf("the tree was gone %v after SIGKILL of tenure, past the local deadline (at most the ttl %v)", gone, testTTL)
			}
		})
	}
}

// TestRunKillLoop runs two tenures over a filestore, each with a tree of
// processes (a shell's background child and a double-forked daemon), and
// SIGKILLs the one that leads, -kill-loop times, starting it again each
// time. A watcher lists the processes all along: the two trees are never
// alive at once (the new leader's tree starts after the claim expired,
// past the old term's local deadline, so an overlap is a tree that
// outlived its deadline). It reports the worst time from SIGKILL to the
// last process of the tree gone.
func TestRunKillLoop(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	names := []string{"a", "b"}
	markers := map[string]string{}
	for _, n := range names {
		markers[n] = treeMarker(t, n)
	}
	var mu sync.Mutex
	skip := map[int]bool{} // guarded by mu: every tenure started
	procs := map[string]*proc{}
	start := func(n string) {
		p := startTenure(t, n, j, []string{envTree + "=" + markers[n], envDaemon + "=1"}, treeArgs(url, "job", n)...)
		mu.Lock()
		skip[p.cmd.Process.Pid] = true
		mu.Unlock()
		procs[n] = p
	}
	t.Cleanup(func() {
		for _, n := range names {
			reap(treeProcs(markers[n], nil))
		}
	})
	list := func(n string) []int {
		mu.Lock()
		defer mu.Unlock()
		return treeProcs(markers[n], skip)
	}

	// The watcher: a scan of /proc every millisecond or so.
	stop := make(chan struct{})
	watched := make(chan string, 1)
	go func() {
		clk := clock.New()
		var overlaps []string
		scans := 0
		defer func() { watched <- fmt.Sprintf("%d scans%s", scans, strings.Join(overlaps, "")) }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			a, b := list("a"), list("b")
			scans++
			if len(a) > 0 && len(b) > 0 && len(overlaps) < 5 {
				overlaps = append(overlaps, fmt.Sprintf("\n  at %d: a's %v and b's %v alive at once", monoNow(), a, b))
			}
			clk.Sleep(time.Millisecond)
		}
	}()

	start("a")
	waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
	start("b")
	waitUntil(t, 20*time.Second, "b saw a lead", func() bool { return procs["b"].logged(`msg="elector: new leader"`) })
	leader, other := "a", "b"
	var worst, total time.Duration
	clk := clock.New()
	for i := 0; i < *killLoop; i++ {
		n := count(readJournal(t, j), "start")
		waitUntil(t, 5*time.Second, leader+"'s tree is up", func() bool { return len(list(leader)) >= 4 })
		killed := monoNow()
		procs[leader].signal(syscall.SIGKILL)
		for len(list(leader)) > 0 && time.Duration(monoNow()-killed) < 2*testTTL {
			clk.Sleep(time.Millisecond)
		}
		gone := time.Duration(monoNow() - killed)
		if left := list(leader); len(left) > 0 {
			t.Fatalf("iteration %d: %v after SIGKILL of %s, its tree runs on:%s", i, gone, leader, reap(left))
		}
		if gone >= testTTL {
			t.Errorf("iteration %d: %s's tree gone %v after SIGKILL, past the local deadline (at most the ttl %v)", i, leader, gone, testTTL)
		}
		worst = max(worst, gone)
		total += gone
		procs[leader].wait(5 * time.Second)
		waitUntil(t, testTTL+10*time.Second, other+"'s child started", func() bool { return count(readJournal(t, j), "start") == n+1 })
		start(leader)
		waitUntil(t, 20*time.Second, leader+" saw "+other+" lead", func() bool { return procs[leader].logged(`msg="elector: new leader"`) })
		leader, other = other, leader
	}
	close(stop)
	report := <-watched
	if strings.Contains(report, "alive at once") {
		t.Errorf("two trees alive at once: %s", report)
	}
	checkJournal(t, readJournal(t, j))
	if *killLoop > 0 {
		t.Logf("%d SIGKILLs: the tree was gone %v after the kill at worst, %v on average (ttl %v); watcher: %s",
			*killLoop, worst, total/time.Duration(*killLoop), testTTL, report)
	}
	for _, n := range names {
		procs[n].signal(syscall.SIGTERM)
		procs[n].wait(10 * time.Second)
	}
}

// TestRunExitKillsLeftovers runs a command that leaves a daemon behind (a
// double fork into a session of its own) and exits: tenure --once exits
// with the command's status only once nothing of the tree is left.
func TestRunExitKillsLeftovers(t *testing.T) {
	url := stores[0].url(t)
	marker := treeMarker(t, "a")
	t.Cleanup(func() { reap(treeProcs(marker, nil)) })
	a := startTenure(t, "a", filepath.Join(t.TempDir(), "journal"), []string{envTree + "=" + marker},
		"run", "--store", url, "--key", "job", "--ttl", testTTL.String(), "--once",
		"--", "sh", "-c", `(setsid sleep 3172 &); exit 3`)
	if code := a.wait(20 * time.Second); code != 3 {
		t.Errorf("tenure exited %d, want the command's 3", code)
	}
	if left := treeProcs(marker, map[int]bool{a.cmd.Process.Pid: true}); len(left) > 0 {
		t.Errorf("after tenure exited, its tree runs on:%s", reap(left))
	}
}

// TestRunDrainTimeout takes a term down the drain-timeout path: the
// supervisor is stopped (SIGSTOP), so the command's tree cannot end when
// told, and the claim's file is corrupted, so the renewal fails fatally.
// The command is sent SIGTERM, then SIGKILL a grace later; the elector's
// drain times out, it leaves the claim to expire, and does not campaign
// again while the command runs. tenure must not exit then, leaving the
// tree behind: once the supervisor runs again the tree dies, and tenure
// --once exits 75 with nothing of the tree left.
func TestRunDrainTimeout(t *testing.T) {
	dir := t.TempDir()
	marker := treeMarker(t, "a")
	t.Cleanup(func() { reap(treeProcs(marker, nil)) })
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, []string{envTree + "=" + marker}, treeArgs("file://"+dir, "job", "a", "--once")...)
	waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
	var sup int
	waitUntil(t, 5*time.Second, "a's supervisor found", func() bool {
		for _, pid := range treeProcs(marker, nil) {
			if cl, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); bytes.Contains(cl, []byte("\x00"+superviseArg+"\x00")) {
				sup = pid
			}
		}
		return sup != 0
	})
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(sup, syscall.SIGCONT)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	corrupted := 0
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "k-") {
			if err := os.WriteFile(filepath.Join(dir, e.Name()), []byte("not a claim\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			corrupted++
		}
	}
	if corrupted != 1 {
		t.Fatalf("corrupted %d claim files in %v, want 1", corrupted, ents)
	}
	waitUntil(t, 20*time.Second, "a's drain timed out", func() bool { return a.logged(`did not return within the drain timeout`) })
	select {
	case <-a.done:
		t.Fatalf("tenure exited %d after its drain timed out, with its tree still there", a.code)
	case <-clock.New().After(testTTL):
	}
	if !a.logged(`why="term ended"`) || !a.logged(`msg="killing command"`) {
		t.Errorf("a did not send SIGTERM, then SIGKILL, to its command")
	}
	if err := syscall.Kill(sup, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(30 * time.Second); code != exitLost {
		t.Errorf("tenure --once exited %d, want %d (the term ended first)", code, exitLost)
	}
	if left := treeProcs(marker, map[int]bool{a.cmd.Process.Pid: true}); len(left) > 0 {
		t.Errorf("after tenure exited, its tree runs on:%s", reap(left))
	}
}

// TestRunCommandFds checks that the command gets the standard streams
// only: none of the supervisor's pipes to tenure.
func TestRunCommandFds(t *testing.T) {
	url := stores[0].url(t)
	a := startTenure(t, "a", filepath.Join(t.TempDir(), "journal"), nil,
		"run", "--store", url, "--key", "job", "--ttl", testTTL.String(), "--once",
		"--", "sh", "-c", `ls /proc/$$/fd; test ! -e /proc/$$/fd/3 && test ! -e /proc/$$/fd/4`)
	if code := a.wait(20 * time.Second); code != 0 {
		b, _ := os.ReadFile(a.log)
		t.Errorf("tenure exited %d, want 0: the command has more than its standard streams:\n%s", code, b)
	}
}
