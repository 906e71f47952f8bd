package main

import (
	"bufio"
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

	"github.com/benbjohnson/clock"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/backends/nats/natstest"
)

// The test binary doubles as the command tenure runs: with envChild set to
// a journal file it is the child (see childMain).
const (
	envChild = "TENURE_TEST_CHILD_JOURNAL"
	envHold  = "TENURE_TEST_CHILD_HOLD"  // how long the child runs; empty: until SIGTERM
	envExit  = "TENURE_TEST_CHILD_EXIT"  // the child's exit status
	envSlots = "TENURE_TEST_CHILD_SLOTS" // how many children may run at once; empty: 1
	// envDaemon set: the child first starts a daemon that double-forks
	// (see daemonMain) and outlives it.
	envDaemon = "TENURE_TEST_CHILD_DAEMON"
	// envDaemonStage is set by the child for the two forks of the daemon.
	envDaemonStage = "TENURE_TEST_DAEMON_STAGE"
)

// tenureBin is the tenure binary the tests run, built by TestMain.
var tenureBin string

func TestMain(m *testing.M) {
	if stage := os.Getenv(envDaemonStage); stage != "" {
		os.Exit(daemonMain(stage))
	}
	if path := os.Getenv(envChild); path != "" {
		os.Exit(childMain(path))
	}
	dir, err := os.MkdirTemp("", "tenure-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tenureBin = filepath.Join(dir, "tenure")
	if out, err := exec.Command("go", "build", "-o", tenureBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(append(etcdtest.LeakOptions(), natstest.LeakOptions()...)...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// monoNow reads CLOCK_MONOTONIC, the clock every process of a test shares.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// childMain is the command under test. It appends to the journal, under
// an exclusive lock, a line "start TOKEN PID MONO SLOT" when it starts and
// "end TOKEN PID MONO SLOT" when it ends (after envHold, or at SIGTERM).
// The journal is fenced: a start whose token is not above every token seen
// before in its slot writes "reject" instead and exits 3; a start that
// finds envSlots processes of earlier starts still alive writes "overlap".
func childMain(path string) int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	// SIGHUP, SIGUSR1 and SIGUSR2 are journaled as "signal N PID MONO
	// SLOT" with N the signal's number, and do not end the child.
	other := make(chan os.Signal, 4)
	signal.Notify(other, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for sig := range other {
			journal(path, func([]string) []string {
				return []string{fmt.Sprintf("signal %d %d %d 0", int(sig.(syscall.Signal)), os.Getpid(), monoNow())}
			})
		}
	}()
	token, err := strconv.ParseInt(os.Getenv("TENURE_TOKEN"), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: TENURE_TOKEN:", err)
		return 4
	}
	slot, _ := strconv.Atoi(os.Getenv("TENURE_SLOT"))
	slots, _ := strconv.Atoi(os.Getenv(envSlots))
	slots = max(slots, 1)
	if os.Getenv(envDaemon) != "" {
		if err := daemonize(); err != nil {
			fmt.Fprintln(os.Stderr, "child: daemon:", err)
			return 4
		}
	}
	pid := os.Getpid()
	ok := true
	journal(path, func(lines []string) []string {
		var out []string
		live := 0
		for _, l := range lines {
			var kind string
			var tok int64
			var p, s int
			var mono int64
			if _, err := fmt.Sscanf(l, "%s %d %d %d %d", &kind, &tok, &p, &mono, &s); err != nil || kind != "start" {
				continue
			}
			if s == slot && tok >= token {
				ok = false
			}
			if alive(p) {
				live++
			}
		}
		if live >= slots {
			out = append(out, fmt.Sprintf("overlap %d %d %d %d", token, pid, monoNow(), slot))
		}
		if !ok {
			return append(out, fmt.Sprintf("reject %d %d %d %d", token, pid, monoNow(), slot))
		}
		return append(out, fmt.Sprintf("start %d %d %d %d", token, pid, monoNow(), slot))
	})
	if !ok {
		return 3
	}
	if hold := os.Getenv(envHold); hold != "" {
		d, _ := time.ParseDuration(hold)
		select {
		case <-term:
		case <-clock.New().After(d):
		}
	} else {
		<-term
	}
	journal(path, func([]string) []string {
		return []string{fmt.Sprintf("end %d %d %d %d", token, pid, monoNow(), slot)}
	})
	code, _ := strconv.Atoi(os.Getenv(envExit))
	return code
}

// daemonize starts a daemon the way a Unix daemon detaches: a first fork
// (stage "mid") that calls setsid and forks again (stage "daemon"), then
// exits, so that the daemon is an orphan in a session of its own. It
// returns once the first fork has exited.
func daemonize() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envDaemonStage+"=mid")
	return cmd.Run()
}

// daemonMain is the daemon's two processes: "mid" starts "daemon" in a
// new session and exits at once; "daemon" runs until it is killed.
func daemonMain(stage string) int {
	if stage == "mid" {
		self, err := os.Executable()
		if err != nil {
			return 4
		}
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), envDaemonStage+"=daemon")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return 4
		}
		return 0 // without waiting: the daemon is orphaned
	}
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	for {
		clock.New().Sleep(time.Hour)
	}
}

// journal locks the journal, hands its lines to f and appends what f
// returns.
func journal(path string, f func([]string) []string) {
	fd, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		panic(err)
	}
	defer fd.Close()
	if err := unix.Flock(int(fd.Fd()), unix.LOCK_EX); err != nil {
		panic(err)
	}
	var lines []string
	sc := bufio.NewScanner(fd)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	for _, l := range f(lines) {
		if _, err := fd.WriteString(l + "\n"); err != nil {
			panic(err)
		}
	}
}

// alive reports whether pid is a process that has not exited (a zombie
// has exited).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
