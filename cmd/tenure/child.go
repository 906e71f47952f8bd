package main

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// child is the command run under a term.
type child struct {
	proc *os.Process

	mu     sync.Mutex
	reaped bool // guarded by mu: the child was waited for, its group killed
	// done receives the child's exit status once it has been reaped.
	done chan int
}

// startChild starts argv with env, the standard streams of tenure, and a
// parent-death signal of SIGKILL: if tenure dies, even by SIGKILL, the
// kernel kills the child.
//
// The parent-death signal fires when the thread that forked the child
// exits, not the process, and the Go runtime may retire threads (Go issue
// 27505). The child is therefore forked from a goroutine locked to its
// thread, which stays locked until the child has been reaped.
func startChild(argv, env []string) (*child, error) {
	c := &child{done: make(chan int, 1)}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = env
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		// A process group of its own, so that the end of a term reaches
		// every process the command started (a shell's children), not
		// only the command.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		c.proc = cmd.Process
		started <- nil
		_ = cmd.Wait() // the status is read from ProcessState
		// What the command started and left behind in its group is killed
		// with it: the claim is released after this, and no work of the
		// term may run on. The group's id stays in use while any member
		// lives, so it names no other process here.
		c.mu.Lock()
		_ = syscall.Kill(-c.proc.Pid, syscall.SIGKILL)
		c.reaped = true
		c.mu.Unlock()
		c.done <- status(cmd.ProcessState)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// signal sends sig to the child's process group: the child and every
// process it started that stayed in the group.
// Once the child is reaped and its group killed, nothing is signalled:
// the id may name another process by then.
func (c *child) signal(sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.reaped {
		_ = syscall.Kill(-c.proc.Pid, sig)
	}
}

// status is a shell's exit status for a reaped process: its exit code, or
// 128 plus the signal that killed it.
func status(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// startStatus is the exit status for a command that could not be started,
// as a shell reports it: 127 if it was not found, 126 otherwise.
func startStatus(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return exitNotFound
	}
	return exitNoExec
}
