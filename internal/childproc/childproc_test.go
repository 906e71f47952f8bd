package childproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/tenure-go/tenure/internal/childproc/childproctest"
)

// envMode makes the test binary, run again as a child, play a part
// instead of running its tests.
const envMode = "TENURE_CHILDPROC_MODE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envMode); mode != "" {
		os.Exit(child(mode))
	}
	goleak.VerifyTestMain(m)
}

// child is the test binary run again with envMode set.
func child(mode string) int {
	switch mode {
	case "echo":
		fmt.Println(os.Getenv("CHILDPROC_WORD"))
		return 0
	case "exit3":
		return 3
	case "server": // ends on SIGTERM, as the servers do, saying so
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		_ = syscall.Kill(os.Getppid(), syscall.SIGUSR1)
		<-term
		fmt.Println("term")
		return 0
	case "ready": // creates the file CHILDPROC_READY, then ends on SIGTERM
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		if err := os.WriteFile(os.Getenv("CHILDPROC_READY"), nil, 0o644); err != nil {
			fmt.Println(err)
			return 1
		}
		<-term
		return 0
	case "spin": // uses CHILDPROC_SPIN of CPU time, says so, ends on SIGTERM
		d, _ := time.ParseDuration(os.Getenv("CHILDPROC_SPIN"))
		for {
			var ru syscall.Rusage
			if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
				return 1
			}
			if time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) >= d {
				break
			}
		}
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		_ = syscall.Kill(os.Getppid(), syscall.SIGUSR1)
		<-term
		return 0
	case "busy": // keeps four threads running, says so, ends on SIGTERM
		for i := 0; i < 4; i++ {
			go func() {
				for n := 0; ; n++ {
					_ = n
				}
			}()
		}
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		_ = syscall.Kill(os.Getppid(), syscall.SIGUSR1)
		<-term
		return 0
	case "stubborn": // ignores SIGTERM
		signal.Ignore(syscall.SIGTERM)
		_ = syscall.Kill(os.Getppid(), syscall.SIGUSR1)
		select {}
	case "parent": // starts a child of its own, prints its pid, exits
		p, err := Start(Spec{Argv: []string{"sleep", "600"}})
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println(p.Pid())
		return 0
	}
	return 2
}

// self is Spec for the test binary run again in mode, logging to a file
// of the test's.
func self(t *testing.T, mode string) Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Spec{
		Argv: []string{exe, "-test.run=^$"},
		Env:  append(os.Environ(), envMode+"="+mode),
		Log:  filepath.Join(t.TempDir(), "child.log"),
	}
}

// startReady starts s and waits until the child says it is ready
// (SIGUSR1 to its parent).
func startReady(t *testing.T, s Spec) *Process {
	t.Helper()
	ready := make(chan os.Signal, 1)
	signal.Notify(ready, syscall.SIGUSR1)
	defer signal.Stop(ready)
	p, err := Start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Terminate(0) })
	select {
	case <-ready:
	case <-p.Done():
		t.Fatalf("the child exited before it was ready:\n%s", readLog(t, s.Log))
	}
	return p
}

func readLog(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestEnvAndLog(t *testing.T) {
	s := self(t, "echo")
	s.Env = append(s.Env, "CHILDPROC_WORD=hello")
	if err := os.WriteFile(s.Log, []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Start(s)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if got, want := readLog(t, s.Log), "before\nhello\n"; got != want {
		t.Errorf("log = %q, want %q (the output appended to what was there)", got, want)
	}
}

// TestWait checks that Wait says how the child ended, as often as it is
// asked.
func TestWait(t *testing.T) {
	ok, err := Start(self(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ok.Wait(); err != nil {
		t.Errorf("Wait() on a child that exited 0 = %v, want nil", err)
	}

	failed, err := Start(self(t, "exit3"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		var exit *exec.ExitError
		if err := failed.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 3 {
			t.Errorf("Wait() call %d on a child that exited 3 = %v, want an *exec.ExitError with code 3", i+1, err)
		}
	}

	killed := startReady(t, self(t, "stubborn"))
	killed.Signal(syscall.SIGKILL)
	var exit *exec.ExitError
	if err := killed.Wait(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("Wait() on a killed child = %v, want an *exec.ExitError for SIGKILL", err)
	}
}

// TestChildOutlivesStartingThread checks that a child outlives the thread its
// starter called Start from: the Go runtime may end that thread at any time.
func TestChildOutlivesStartingThread(t *testing.T) {
	s := self(t, "server")
	ready := make(chan os.Signal, 1)
	signal.Notify(ready, syscall.SIGUSR1)
	defer signal.Stop(ready)
	var p *Process
	childproctest.OnRetiredThread(t, func() {
		var err error
		if p, err = Start(s); err != nil {
			t.Error(err)
		}
	})
	if p == nil {
		return
	}
	select {
	case <-ready:
	case <-p.Done():
		t.Fatalf("the child exited before it was ready: %v\n%s", p.Wait(), readLog(t, s.Log))
	}
	// A child sent SIGKILL when the thread ended cannot handle SIGTERM
	// any more. The bound only ends a failing test.
	p.Terminate(30 * time.Second)
	if got := readLog(t, s.Log); got != "term\n" {
		t.Errorf("log = %q, want %q: the child should have lived to end on SIGTERM (it ended: %v)", got, "term\n", p.Wait())
	}
}

func TestStartError(t *testing.T) {
	_, err := Start(Spec{Argv: []string{filepath.Join(t.TempDir(), "missing")}})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Start(a missing program) = %v, want an error wrapping os.ErrNotExist", err)
	}
	if _, err := Start(Spec{}); err == nil {
		t.Error("Start(no program) = nil error, want an error")
	}
}

func TestReapedIsNotSignalled(t *testing.T) {
	p, err := Start(self(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid() <= 0 {
		t.Errorf("Pid() = %d, want a process id", p.Pid())
	}
	<-p.Done()
	if p.Alive() {
		t.Error("Alive() = true once Done was closed")
	}
	if p.Signal(syscall.SIGTERM) {
		t.Error("Signal after the child was reaped reported it sent the signal; its pid may be another process's by then")
	}
	p.Terminate(time.Hour) // returns at once
}

// threadStates returns the state letter of each thread of pid, from
// /proc/PID/task/TID/stat.
func threadStates(t *testing.T, pid int) string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var states []byte
	for _, task := range tasks {
		raw, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			t.Fatal(err)
		}
		// pid (comm) state ...
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
		states = append(states, f[0][0])
	}
	return string(states)
}

// TestPauseWaitsForEveryThread checks that Pause returns only once every
// thread of a child whose threads are all running has stopped, and that a
// child paused, continued and paused again is stopped again when the
// second Pause returns, not taken for stopped by the first one's report.
func TestPauseWaitsForEveryThread(t *testing.T) {
	p := startReady(t, self(t, "busy"))
	for round := 0; round < 20; round++ {
		if !p.Pause() {
			t.Fatal("Pause of a running child reported it did not stop it")
		}
		if st := threadStates(t, p.Pid()); strings.Trim(st, "tT") != "" {
			t.Fatalf("round %d: thread states right after Pause = %q, want every thread stopped (T)", round, st)
		}
		if !p.Signal(syscall.SIGCONT) {
			t.Fatal("SIGCONT not sent")
		}
	}
	p.Terminate(30 * time.Second)
	if p.Pause() {
		t.Error("Pause of a reaped child reported it stopped it")
	}
}

// TestTerminatePausedServer checks that a paused server is continued so that
// it can handle SIGTERM and end on its own, well before the grace period.
func TestTerminatePausedServer(t *testing.T) {
	s := self(t, "server")
	p := startReady(t, s)
	if !p.Signal(syscall.SIGSTOP) {
		t.Fatal("Signal(SIGSTOP) to a running child reported it did not send it")
	}
	if !p.Alive() {
		t.Fatal("Alive() = false for a paused child")
	}
	// The bound only ends a failing test.
	p.Terminate(30 * time.Second)
	if got := readLog(t, s.Log); got != "term\n" {
		t.Errorf("log = %q, want %q: the server should have ended on SIGTERM", got, "term\n")
	}
}

// TestTerminateKillsAfterGrace checks that a child that ignores SIGTERM is
// killed once the grace period is over.
func TestTerminateKillsAfterGrace(t *testing.T) {
	p := startReady(t, self(t, "stubborn"))
	p.Terminate(10 * time.Millisecond)
	if p.Alive() {
		t.Error("Alive() = true after Terminate returned")
	}
}

// TestChildDiesWithStarter checks that a child is killed by the kernel when
// its starter exits, even though the starter did nothing to end it.
func TestChildDiesWithStarter(t *testing.T) {
	s := self(t, "parent")
	p, err := Start(s)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	out := strings.TrimSpace(readLog(t, s.Log))
	pid, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("the starter printed %q, want its child's pid", out)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return // gone and reaped already
	}
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// A pidfd turns readable when its process exits. The bound only ends
	// a failing test: a killed child is gone at once.
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, int((30 * time.Second).Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the child %d still runs 30s after its starter exited", pid)
		}
		return
	}
}

func TestWaitFile(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	s := self(t, "ready")
	s.Env = append(s.Env, "CHILDPROC_READY="+ready)
	p, err := Start(s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Terminate(time.Minute)
	// The bound only ends a failing test.
	if err := p.WaitFile(ready, time.Minute); err != nil {
		t.Fatalf("WaitFile: %v\n%s", err, readLog(t, s.Log))
	}

	// A child that exits without creating the file fails the wait at once.
	q, err := Start(self(t, "echo"))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.WaitFile(filepath.Join(t.TempDir(), "never"), time.Hour); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("WaitFile on a child that exits = %v, want an error saying it exited", err)
	}
}

// TestCPU checks that the CPU time of a child that used 300 ms of it by its own
// count is that, to the kernel's tick, and 0 once it was reaped.
func TestCPU(t *testing.T) {
	s := self(t, "spin")
	s.Env = append(s.Env, "CHILDPROC_SPIN=300ms")
	p := startReady(t, s)
	if got := p.CPU(); got < 280*time.Millisecond {
		t.Errorf("CPU of a child that used 300 ms = %v, want at least 280 ms", got)
	}
	p.Terminate(10 * time.Second)
	if got := p.CPU(); got != 0 {
		t.Errorf("CPU of a reaped child = %v, want 0", got)
	}
}
