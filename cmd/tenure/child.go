package main

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// child is the command run under a term, with the supervisor process
// that holds its tree (see supervise).
type child struct {
	sup *os.Process // the supervisor
	pid int         // COMMAND's pid, for the log

	mu  sync.Mutex
	ctl *os.File // guarded by mu: the control pipe; nil once the supervisor was reaped
	// done receives COMMAND's exit status once the supervisor has killed
	// and reaped the whole tree and exited.
	done chan int
}

// startChild starts argv with env and the standard streams of tenure,
// under a supervisor: tenure's own binary, run as "tenure
// __tenure-supervise COMMAND...". The supervisor is a child subreaper: it
// kills COMMAND's whole tree, double-forked daemons included, when COMMAND
// exits, when tenure asks, and when tenure dies (its control pipe reads
// EOF), and exits only once no process of the tree is left. What the
// supervisor reports of COMMAND later (a job control stop) goes to log.
func startChild(argv, env []string, log *slog.Logger) (*child, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, err
	}
	// /proc/self/exe is this very binary, even if its file was replaced
	// or removed since tenure started.
	cmd := exec.Command("/proc/self/exe", append([]string{superviseArg}, argv...)...)
	cmd.Args[0] = os.Args[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{ctlR, repW} // fdControl, fdReport
	err = cmd.Start()
	ctlR.Close()
	repW.Close()
	if err != nil {
		ctlW.Close()
		return nil, fmt.Errorf("start supervisor: %w", err)
	}
	c := &child{sup: cmd.Process, ctl: ctlW, done: make(chan int, 1)}
	rep := bufio.NewReader(repR)
	line, _ := rep.ReadString('\n')
	var pid int
	started := false
	if _, err := fmt.Sscanf(line, "started %d", &pid); err == nil {
		c.pid, started = pid, true
	}
	reported := make(chan struct{})
	go func() {
		// The report pipe reads EOF once the supervisor has exited.
		defer close(reported)
		defer repR.Close()
		for started {
			line, err := rep.ReadString('\n')
			if err != nil {
				return
			}
			var what string
			var p, sig int
			if _, err := fmt.Sscanf(line, "%s %d %d", &what, &p, &sig); err != nil {
				continue
			}
			switch what {
			case "stopped":
				log.Warn("command stopped: it does nothing while it holds the claim until it gets SIGCONT (one stopped by SIGTTIN or SIGTTOU read or wrote the terminal: give it a stdin that is not one)",
					"pid", p, "signal", syscall.Signal(sig).String())
			case "continued":
				log.Info("command continued", "pid", p)
			}
		}
	}()
	go func() {
		_ = cmd.Wait() // the status is read from ProcessState
		<-reported
		c.mu.Lock()
		c.ctl.Close()
		c.ctl = nil
		c.mu.Unlock()
		c.done <- status(cmd.ProcessState)
	}()
	if started {
		return c, nil
	}
	code := <-c.done
	var n int
	var msg string
	if f := strings.SplitN(strings.TrimSpace(line), " ", 3); len(f) == 3 && f[0] == "failed" {
		n, _ = strconv.Atoi(f[1])
		msg = f[2]
	} else {
		n, msg = exitNoExec, fmt.Sprintf("supervisor exited with status %d", code)
	}
	return nil, &startError{code: n, msg: msg}
}

// startError is a COMMAND the supervisor could not start.
type startError struct {
	code int // 126 or 127
	msg  string
}

func (e *startError) Error() string { return e.msg }

// signal asks the supervisor to send sig to every process of the tree
// (SIGTERM once, SIGKILL until none is left), or, for SIGHUP, SIGUSR1 and
// SIGUSR2, to COMMAND alone. Once the supervisor has been reaped, nothing
// of the tree is left to signal.
func (c *child) signal(sig syscall.Signal) {
	var req byte
	switch sig {
	case syscall.SIGTERM:
		req = reqTerm
	case syscall.SIGKILL:
		req = reqKill
	case syscall.SIGHUP:
		req = reqHUP
	case syscall.SIGUSR1:
		req = reqUSR1
	case syscall.SIGUSR2:
		req = reqUSR2
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctl != nil {
		_, _ = c.ctl.Write([]byte{req})
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
	var se *startError
	if errors.As(err, &se) {
		return se.code
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return exitNotFound
	}
	return exitNoExec
}
