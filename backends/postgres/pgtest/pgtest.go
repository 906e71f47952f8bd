// Package pgtest starts real PostgreSQL servers for tests: one server per
// test package (Shared), private servers for tests that kill, pause or
// restart theirs (Start), and a fresh database per test (NewDatabase).
//
// A server is the postgres binary of the machine, run as a child of the test
// process on 127.0.0.1 at a free port, with fsync off: it is fast and loses
// data on a power cut, which tests never see. initdb runs once per test
// process; every server starts from a copy of that data directory. As root,
// initdb and postgres refuse to run, so both run as nobody, on a directory
// made with os.MkdirTemp and given to nobody (t.TempDir's parent is not
// reachable by nobody). The server gets SIGKILL when the test process dies
// (Pdeathsig), so no server outlives its tests.
//
// Where no PostgreSQL binary exists the tests fail, naming what to install;
// they are never skipped.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// nobody is the uid and gid the server runs as when the tests run as root.
const nobody = 65534

// readyWithin bounds how long a server may take to accept connections.
const readyWithin = 30 * time.Second

// Install is what the failure message tells the reader to do when no
// PostgreSQL server binary is found.
const Install = "install PostgreSQL's server binaries (Debian/Ubuntu: apt-get install postgresql; they land in /usr/lib/postgresql/VERSION/bin) and put initdb and postgres on PATH"

// Server is one running PostgreSQL server owned by the test process.
type Server struct {
	root string // owned by nobody; holds data/ and the log
	data string
	port int
	bin  string

	mu   sync.Mutex
	cmd  *exec.Cmd     // guarded by mu; nil while stopped
	done chan struct{} // guarded by mu; closed when cmd has exited
}

// Port is the TCP port the server listens on, on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// Addr is "127.0.0.1:PORT".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// DSN is the connection URL of database db as the superuser postgres.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", s.Addr(), db)
}

// DSNVia is DSN through another address, such as a proxy in front of the
// server.
func (s *Server) DSNVia(addr, db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", addr, db)
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error

	tmplOnce sync.Once
	tmplDir  string // an initdb'd data directory, copied for each server
	tmplErr  error

	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error

	dbSeq atomic.Int64
)

// findBin finds the directory that holds initdb and postgres: PATH first,
// then Debian's /usr/lib/postgresql/VERSION/bin, newest version first.
func findBin() (string, error) {
	binOnce.Do(func() {
		if p, err := exec.LookPath("initdb"); err == nil {
			dir := filepath.Dir(p)
			if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
				binDir = dir
				return
			}
		}
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
				binDir = d
				return
			}
		}
		binErr = fmt.Errorf("pgtest: no PostgreSQL server binary (initdb, postgres) on PATH or in /usr/lib/postgresql/*/bin: %s", Install)
	})
	return binDir, binErr
}

// asNobody runs cmd as nobody when the test process is root.
func asNobody(cmd *exec.Cmd) {
	if os.Geteuid() == 0 {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
}

// ownedDir makes a directory the server's user can use.
func ownedDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", err
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, nobody, nobody); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// template runs initdb once per test process.
func template() (string, error) {
	tmplOnce.Do(func() {
		bin, err := findBin()
		if err != nil {
			tmplErr = err
			return
		}
		root, err := ownedDir("pgtest-template-")
		if err != nil {
			tmplErr = fmt.Errorf("pgtest: %w", err)
			return
		}
		data := filepath.Join(root, "data")
		cmd := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C")
		asNobody(cmd)
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(root)
			tmplErr = fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
			return
		}
		tmplDir = root
	})
	return tmplDir, tmplErr
}

// start makes a new server from the template and starts it.
func start() (*Server, error) {
	tmpl, err := template()
	if err != nil {
		return nil, err
	}
	root, err := ownedDir("pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	data := filepath.Join(root, "data")
	// cp -a keeps nobody's ownership and the 0700 mode postgres insists on.
	if out, err := exec.Command("cp", "-a", filepath.Join(tmpl, "data"), data).CombinedOutput(); err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("pgtest: copy the template data directory: %v\n%s", err, out)
	}
	s := &Server{root: root, data: data, bin: binDir}
	var last error
	for range 3 { // a port picked free may be taken before postgres binds it
		if s.port, err = freePort(); err != nil {
			break
		}
		if last = s.run(); last == nil {
			return s, nil
		}
	}
	os.RemoveAll(root)
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	return nil, last
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// run starts postgres on s's directory and port and waits until it accepts
// connections. Commits are written to the WAL before they return
// (synchronous_commit stays on), so a killed server keeps them; fsync=off
// loses them only to a machine crash.
func (s *Server) run() error {
	logf, err := os.OpenFile(filepath.Join(s.root, "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.data,
		"-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+s.root,
		"-c", "fsync=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
		"-c", "shared_buffers=16MB",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	asNobody(cmd)
	started := make(chan error, 1)
	done := make(chan struct{})
	// Pdeathsig fires when the thread that forked the child exits: the
	// goroutine that starts postgres keeps its thread until postgres ends.
	go func() {
		defer close(done)
		defer logf.Close()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
	}()
	if err := <-started; err != nil {
		<-done
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	for {
		c, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err == nil {
			c.Close(ctx)
			return nil
		}
		select {
		case <-done:
			s.mu.Lock()
			s.cmd, s.done = nil, nil
			s.mu.Unlock()
			log, _ := os.ReadFile(filepath.Join(s.root, "log"))
			return fmt.Errorf("pgtest: postgres exited at start: %v\n%s", cmd.ProcessState, tail(log))
		case <-ctx.Done():
			s.kill()
			log, _ := os.ReadFile(filepath.Join(s.root, "log"))
			return fmt.Errorf("pgtest: postgres not ready within %v: %v\n%s", readyWithin, err, tail(log))
		case <-time.After(20 * time.Millisecond): // polling a child process, not timing a test
		}
	}
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}

// kill sends SIGKILL to the postmaster, as a crash would, and waits until
// it and every process it had forked have exited. The backends notice the
// postmaster's death and exit on their own, but not at once, and a backend
// still running holds the server's shared memory: a postmaster started on
// the data directory before they are gone refuses to start. They are the
// postmaster's children, not the test process's, so they are waited on
// through pidfds, opened while the postmaster is stopped and cannot fork.
func (s *Server) kill() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	pm := cmd.Process.Pid
	syscall.Kill(pm, syscall.SIGSTOP)
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	var openErr error
	for _, pid := range children(pm) {
		fd, err := unix.PidfdOpen(pid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue // exited already
		}
		if err != nil {
			openErr = fmt.Errorf("pgtest: pidfd of backend %d: %w", pid, err)
			continue
		}
		fds = append(fds, fd)
		syscall.Kill(pid, syscall.SIGCONT) // a paused backend must run to notice and exit
	}
	cmd.Process.Kill()
	<-done
	if openErr != nil {
		return openErr
	}
	return waitExited(fds, killWithin)
}

// killWithin bounds the wait for a killed server's backends to exit.
const killWithin = 30 * time.Second

// waitExited waits until the processes of the pidfds fds have exited: a
// pidfd becomes readable when its process exits.
func waitExited(fds []int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for len(fds) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("pgtest: %d backends of a killed server still running after %v", len(fds), within)
		}
		pfds := make([]unix.PollFd, len(fds))
		for i, fd := range fds {
			pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		}
		if _, err := unix.Poll(pfds, int(left.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("pgtest: wait for a killed server's backends: %w", err)
		}
		var running []int
		for i, p := range pfds {
			if p.Revents == 0 {
				running = append(running, fds[i])
			}
		}
		fds = running
	}
	return nil
}

// stop shuts the server down (fast shutdown: open sessions are ended) and
// waits for it.
func (s *Server) stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

func (s *Server) remove() {
	s.stop()
	os.RemoveAll(s.root)
}

// Start starts a private server for t, removed when t ends. Use it for a
// test that kills, pauses or restarts its server; other tests use Shared.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.remove)
	return s
}

// Shared returns the test package's server, started on first use and
// stopped by the testing.M wrapper Main returns.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = start()
	}
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// Main wraps m so that the shared server and the initdb template are
// removed once the tests have run:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }
func Main(m *testing.M) interface{ Run() int } { return mainM{m} }

type mainM struct{ m *testing.M }

func (w mainM) Run() int {
	code := w.m.Run()
	sharedMu.Lock()
	if shared != nil {
		shared.remove()
		shared = nil
	}
	sharedMu.Unlock()
	if tmplDir != "" {
		os.RemoveAll(tmplDir)
	}
	return code
}

// Kill sends SIGKILL to the server, as a crash would, and waits for it and
// its backends to exit. The data directory stays; Restart starts it again.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if err := s.kill(); err != nil {
		t.Fatal(err)
	}
}

// Restart starts a stopped or killed server again, on the same port and
// data. After a kill, postgres recovers from its write-ahead log.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
}

// Pause stops the server with SIGSTOP: connections stay open and nothing is
// answered. Resume continues it.
func (s *Server) Pause(t testing.TB) { t.Helper(); s.signalAll(t, syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume(t testing.TB) { t.Helper(); s.signalAll(t, syscall.SIGCONT) }

// Pids returns the process ids of the server: the postmaster and the
// processes it has forked (backends, checkpointer, ...), for measuring the
// server's CPU time. Empty while the server is stopped.
func (s *Server) Pids() []int {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	return append([]int{cmd.Process.Pid}, children(cmd.Process.Pid)...)
}

// children lists the processes whose parent is ppid, from /proc.
func children(ppid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // exited
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		rest := raw[bytes.LastIndexByte(raw, ')')+1:]
		f := strings.Fields(string(rest))
		if len(f) < 2 || f[1] != strconv.Itoa(ppid) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// signalAll signals the postmaster and every process it forked.
func (s *Server) signalAll(t testing.TB, sig syscall.Signal) {
	pids := s.Pids()
	if len(pids) == 0 {
		t.Fatalf("pgtest: signal %v: server not running", sig)
	}
	// The backends are children of the postmaster; signal each of them too.
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("pgtest: signal %v to %d: %v", sig, pid, err)
		}
	}
}

// NewDatabase creates a fresh database on s for t and returns its name; it
// is dropped when t ends.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
		defer cancel()
		c, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err != nil {
			return // the server is gone: its directory goes with it
		}
		defer c.Close(ctx)
		c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return name
}
