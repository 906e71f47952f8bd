// Package childproc starts a program as a child process that dies with
// its starter, and signals it only while its pid is still its own. It
// serves the fault campaign and the test helpers that run servers in
// processes of their own, to pause, kill and restart them.
//
// A child gets SIGKILL from the kernel when the thread that forked it
// exits (a parent-death signal, Pdeathsig), so that no child outlives a
// starter that was itself killed. The Go runtime may retire a thread at
// any time (Go issue 27505), so the child is forked from a goroutine
// locked to its thread, which stays locked, and alive, until the child
// has been reaped.
//
// Not promised: the parent-death signal reaches the child only, not the
// processes the child starts itself; a child killed with its starter
// leaves its log and its files as they were.
package childproc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Spec is a program to start.
type Spec struct {
	// Argv is the program's path and its arguments.
	Argv []string
	// Env is the child's environment; nil gives it the starter's, as
	// os/exec does.
	Env []string
	// Log is the file the child's standard output and error are appended
	// to, created if missing; empty discards them.
	Log string
	// Credential, if set, is the user and group the child runs as (a
	// server that refuses to run as root). The parent-death signal is set
	// after the switch, so it holds for the child as for any other.
	Credential *syscall.Credential
}

// Process is a started child. Its methods are safe for concurrent use.
// Once the child has exited, a goroutine of Start's reaps it and closes
// Done, and Signal sends nothing any more.
type Process struct {
	pid  int
	done chan struct{} // closed once the child was reaped
	err  error         // how the child ended; set before done is closed

	mu     sync.Mutex // guards reaped
	reaped bool
}

// Start starts the program s describes, with SIGKILL as its parent-death
// signal, and returns once it runs. A goroutine waits for the child to
// exit and reaps it; it ends with the child.
func Start(s Spec) (*Process, error) {
	if len(s.Argv) == 0 {
		return nil, fmt.Errorf("childproc: no program to start")
	}
	var out *os.File
	if s.Log != "" {
		var err error
		out, err = os.OpenFile(s.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("childproc: log: %w", err)
		}
	}
	p := &Process{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if out != nil {
			defer out.Close()
		}
		cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
		cmd.Env = s.Env
		if out != nil {
			cmd.Stdout, cmd.Stderr = out, out
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: s.Credential}
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("childproc: %w", err)
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		p.err = cmd.Wait()
		p.mu.Lock()
		p.reaped = true
		p.mu.Unlock()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Pid is the child's process id. Once Done is closed it may name another
// process.
func (p *Process) Pid() int { return p.pid }

// Done is closed once the child has exited and was reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits until the child has exited and was reaped, and says how it
// ended, as os/exec's Wait does: nil if it exited with status 0, else an
// error (an *exec.ExitError for a non-zero status or a signal). It may be
// called any number of times.
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// Alive reports whether the child has not been reaped yet. A child that
// has exited but is not reaped yet still counts as alive.
func (p *Process) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Signal sends sig to the child unless it was reaped, since its pid may
// name another process by then. It reports whether it sent it.
func (p *Process) Signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return false
	}
	return syscall.Kill(p.pid, sig) == nil
}

// Pause stops the child with SIGSTOP and returns once every one of its
// threads has stopped, so that nothing the child was doing when Pause was
// called is still going on after it returns. A signal is delivered to each
// thread on its way back to user space, not when kill returns: a server
// that answered a request in that window would answer while "paused". It
// reports false if the child was reaped (nothing was sent) or exited
// before it stopped.
func (p *Process) Pause() bool {
	if !p.Signal(syscall.SIGSTOP) {
		return false
	}
	// The kernel reports a child stopped to its parent (waitid with
	// WSTOPPED) only once the group stop is complete. WNOWAIT leaves the
	// report in place, so the reaper's wait for the exit is not disturbed;
	// a continued child no longer reports a stop, so a later Pause waits
	// for its own.
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, p.pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		// ECHILD: the child exited and was reaped before it stopped.
		return err == nil
	}
}

// CPU is the CPU time (user and system) the child has used so far, read
// from /proc; 0 once it was reaped or if it cannot be read. Its own
// children's time is not counted.
func (p *Process) CPU() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: utime and stime are fields 14 and 15.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * (time.Second / 100) // USER_HZ
}

// Terminate ends the child: SIGCONT (it may be paused), SIGTERM, and
// SIGKILL if it has not exited within grace. It returns once the child
// was reaped; on a child reaped already it returns at once.
func (p *Process) Terminate(grace time.Duration) {
	p.Signal(syscall.SIGCONT)
	p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.Signal(syscall.SIGKILL)
		<-p.done
	}
}

// WaitFile waits until the file path exists, the way the servers started
// here say they are ready, and fails if the child exits first or d passes.
func (p *Process) WaitFile(path string, d time.Duration) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-tick.C:
		case <-p.done:
			return fmt.Errorf("childproc: the child exited before it created %s (see its log)", filepath.Base(path))
		case <-deadline.C:
			return fmt.Errorf("childproc: %s not created after %v", filepath.Base(path), d)
		}
	}
}
