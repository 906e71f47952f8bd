package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// proc is a child process of the campaign: a worker or a backend server.
type proc struct {
	name string
	pid  int
	done chan struct{} // closed once the process was reaped

	mu     sync.Mutex // guards reaped
	reaped bool
}

// spawn starts argv[0] with args, its output appended to logPath, and a
// parent-death signal of SIGKILL, so that no child outlives a campaign
// that was itself killed. The signal is tied to the thread that forked the
// child, and Go retires threads (Go issue 27505): the child is forked from
// a goroutine locked to its thread until the child has been reaped.
func spawn(name, logPath string, argv []string, env []string) (*proc, error) {
	out, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	p := &proc{name: name, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer out.Close()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- fmt.Errorf("chaos: start %s: %w", name, err)
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		_ = cmd.Wait()
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

// signal sends sig unless the process was reaped (its pid may name
// another process by then). It reports whether it sent it.
func (p *proc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return false
	}
	return syscall.Kill(p.pid, sig) == nil
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// terminate ends a server process: SIGCONT (it may be paused), SIGTERM,
// and SIGKILL if it has not exited within grace; it returns once the
// process was reaped. A nil p is a server not started.
func (p *proc) terminate(grace time.Duration) {
	if p == nil {
		return
	}
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}
