package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/benbjohnson/clock"
	"golang.org/x/sys/unix"
)

// superviseArg, as tenure's first argument, makes the process the
// supervisor of one COMMAND instead of the tenure command (see supervise).
// It is not a subcommand users see.
const superviseArg = "__tenure-supervise"

// The supervisor's end of its two pipes to tenure, after its standard
// streams (os/exec's ExtraFiles).
const (
	fdControl = 3 // tenure -> supervisor: one byte per request; EOF when tenure dies
	fdReport  = 4 // supervisor -> tenure: one line once COMMAND started or failed to
)

// Requests on the control pipe.
const (
	reqTerm byte = 'T' // SIGTERM to every process of the tree
	reqKill byte = 'K' // SIGKILL to every process of the tree, until none is left
	// Signals passed on to COMMAND alone.
	reqHUP  byte = 'H' // SIGHUP
	reqUSR1 byte = '1' // SIGUSR1
	reqUSR2 byte = '2' // SIGUSR2
)

// supervisorKillEvery is how often a supervisor that is killing its tree
// looks for processes again, besides after every process it reaps.
const supervisorKillEvery = 10 * time.Millisecond

// supervise is the supervisor process: tenure starts it, once per term, as
// "tenure __tenure-supervise COMMAND [ARG...]", and it starts COMMAND.
//
// It is a child subreaper (PR_SET_CHILD_SUBREAPER): every process COMMAND
// starts, and every process those start, stays its descendant, even one
// that double-forks and calls setsid to become a daemon, since an
// orphan is handed to its nearest subreaper ancestor, not to init. So the
// descendants of the supervisor are the whole tree of the term, and it
// can find them all (in /proc) and reap them all.
//
// It reads requests from tenure on the control pipe. EOF on that pipe
// means tenure has died (the kernel closes a dead process's descriptors,
// however it died: SIGKILL, a crash) or gave up the term: the supervisor
// then kills the whole tree with SIGKILL. It does the same when COMMAND
// exits, so that nothing COMMAND left behind runs on after the term. It
// exits, with COMMAND's status, only once it has no child left: a
// subreaper with no child has no descendant.
//
// Its exit status is COMMAND's (128+N if COMMAND died of signal N). On the
// report pipe it writes "started PID" once COMMAND runs, or "failed
// STATUS MESSAGE" if COMMAND could not be started; then "stopped PID SIG"
// each time COMMAND is stopped by signal SIG (job control: a read from the
// terminal, say), and "continued PID 0" when it is continued.
func supervise(argv []string) int {
	ctl := os.NewFile(fdControl, "control")
	report := os.NewFile(fdReport, "report")
	if ctl == nil || report == nil || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "tenure: "+superviseArg+" is started by tenure run only")
		return exitUsage
	}
	// Inherited descriptors are not closed on exec: COMMAND gets neither.
	syscall.CloseOnExec(fdControl)
	syscall.CloseOnExec(fdReport)
	// Signals from a terminal reach the supervisor with tenure (they share
	// a process group): tenure relays what COMMAND should get, so the
	// supervisor only catches them, to outlive its tree. Caught, not
	// ignored: an ignored signal stays ignored in COMMAND after exec.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	go func() {
		for range sigs {
		}
	}()

	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(report, "failed %d subreaper: %v\n", exitNoExec, err)
		return exitNoExec
	}
	s := &supervisor{self: os.Getpid(), killing: make(chan struct{})}

	// COMMAND's parent-death signal follows the thread that forked it
	// (Go issue 27505): this goroutine stays on its thread until the
	// tree is gone. The signal is a second line, for a supervisor killed
	// by SIGKILL itself: it reaches COMMAND, not the rest of the tree.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	go s.serve(ctl)

	s.mu.Lock()
	if s.dying {
		// Tenure died before COMMAND started: start nothing.
		s.mu.Unlock()
		report.Close()
		return 128 + int(syscall.SIGKILL)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		s.mu.Unlock()
		return s.failed(report, err)
	}
	proc, err := os.StartProcess(path, argv, &os.ProcAttr{
		Env:   os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		// A process group of its own, as a shell's job: a terminal's
		// signals do not reach it behind tenure's back.
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true},
	})
	if err != nil {
		s.mu.Unlock()
		return s.failed(report, err)
	}
	s.cmd = proc.Pid
	cmdPid := proc.Pid
	s.mu.Unlock()
	fmt.Fprintf(report, "started %d\n", proc.Pid)
	defer report.Close()
	_ = proc.Release() // reaped below, with every other process of the tree

	code := 0
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WUNTRACED|syscall.WCONTINUED, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			// ECHILD: no child, so no process of the tree is left.
			break
		}
		switch {
		case pid == cmdPid && ws.Stopped():
			// A job control stop (a read from the terminal, ^Z): COMMAND
			// holds the claim doing nothing, which tenure logs.
			fmt.Fprintf(report, "stopped %d %d\n", pid, int(ws.StopSignal()))
			continue
		case pid == cmdPid && ws.Continued():
			fmt.Fprintf(report, "continued %d 0\n", pid)
			continue
		case ws.Stopped() || ws.Continued():
			continue
		}
		if pid == cmdPid {
			code = waitStatus(ws)
			s.kill()
		}
		if s.isKilling() {
			s.signalTree(syscall.SIGKILL)
		}
	}
	return code
}

// failed reports that COMMAND could not be started, and returns the
// status a shell would exit with.
func (s *supervisor) failed(report *os.File, err error) int {
	code := startStatus(err)
	fmt.Fprintf(report, "failed %d %s\n", code, strings.ReplaceAll(err.Error(), "\n", " "))
	report.Close()
	return code
}

// waitStatus is a shell's exit status for ws.
func waitStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// supervisor is the state of the supervisor process.
type supervisor struct {
	self int

	mu    sync.Mutex
	dying bool // guarded by mu: no COMMAND may start any more
	cmd   int  // guarded by mu: COMMAND's pid, 0 before it started

	killOnce sync.Once
	killing  chan struct{} // closed once the tree is being killed
}

// serve reads tenure's requests until EOF, which means tenure is gone or
// done with the term: then the tree is killed.
func (s *supervisor) serve(ctl io.Reader) {
	r := bufio.NewReader(ctl)
	for {
		b, err := r.ReadByte()
		if err != nil {
			break
		}
		switch b {
		case reqTerm:
			s.signalTree(syscall.SIGTERM)
			// A stopped process acts on SIGTERM only once continued.
			s.signalTree(syscall.SIGCONT)
		case reqKill:
			s.kill()
		case reqHUP:
			s.signalCommand(syscall.SIGHUP)
		case reqUSR1:
			s.signalCommand(syscall.SIGUSR1)
		case reqUSR2:
			s.signalCommand(syscall.SIGUSR2)
		}
	}
	s.mu.Lock()
	s.dying = true
	s.mu.Unlock()
	s.kill()
}

// signalCommand sends sig to COMMAND, if it runs: a signal tenure passes
// on is COMMAND's to handle, and to hand on to its own children.
func (s *supervisor) signalCommand(sig syscall.Signal) {
	s.mu.Lock()
	pid := s.cmd
	s.mu.Unlock()
	if pid > 0 && !s.isKilling() {
		_ = syscall.Kill(pid, sig)
	}
}

// kill starts killing the tree, and goes on looking for processes of it
// until the supervisor exits (no child left): a process forked after one
// pass is found by the next.
func (s *supervisor) kill() {
	s.killOnce.Do(func() {
		close(s.killing)
		go func() {
			clk := clock.New()
			for {
				s.signalTree(syscall.SIGKILL)
				clk.Sleep(supervisorKillEvery)
			}
		}()
	})
}

func (s *supervisor) isKilling() bool {
	select {
	case <-s.killing:
		return true
	default:
		return false
	}
}

// signalTree sends sig to every descendant of the supervisor. Without a
// readable /proc it falls back to COMMAND's process group, which misses
// what left the group; the group's id names no other group while one of
// its members lives, and COMMAND is reaped only here.
func (s *supervisor) signalTree(sig syscall.Signal) {
	pids, err := descendants(s.self)
	if err != nil {
		s.mu.Lock()
		pgid := s.cmd
		s.mu.Unlock()
		if pgid > 0 {
			_ = syscall.Kill(-pgid, sig)
		}
		return
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}

// descendants lists the processes below root, from /proc: each process's
// parent is the fourth field of /proc/PID/stat. A process reaped and its
// pid reused between the read and the signal would be signalled in error;
// below a subreaper, a pid is reused only after its parent, a process of
// the tree, reaped it.
func descendants(root int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, ok := parentOf(pid)
		if !ok {
			continue
		}
		children[ppid] = append(children[ppid], pid)
	}
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out, nil
}

// parentOf reads pid's parent from /proc/PID/stat.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return ppid, err == nil
}
