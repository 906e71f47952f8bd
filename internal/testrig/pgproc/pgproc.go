// Package pgproc runs a real PostgreSQL server as a child process: the
// machine's postgres binary on 127.0.0.1 at a free port, with fsync off,
// on a data directory copied from one initdb per process. It serves the
// test helper package pgtest and the fault campaign, which kill, pause and
// restart the server, and fail over from a primary to a streaming standby
// of it (StartStandby, Promote, Rebuild). StartBouncer runs a PgBouncer in
// transaction mode in front of a server, as nobody too (PgBouncer refuses
// to run as root).
//
// As root, initdb and postgres refuse to run, so both run as nobody, on a
// directory made with os.MkdirTemp and given to nobody. The server gets
// SIGKILL when the process that started it dies (Pdeathsig), so no server
// outlives its starter.
package pgproc

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
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// nobody is the uid and gid the server runs as when the caller is root.
const nobody = 65534

// readyWithin bounds how long a server may take to accept connections.
const readyWithin = 30 * time.Second

// Install is what the error says to do when no PostgreSQL server binary
// is found.
const Install = "install PostgreSQL's server binaries (Debian/Ubuntu: apt-get install postgresql; they land in /usr/lib/postgresql/VERSION/bin) and put initdb and postgres on PATH"

// Server is one PostgreSQL server, a child of the calling process.
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

// SocketDir is the directory that holds the server's unix socket,
// .s.PGSQL.PORT.
func (s *Server) SocketDir() string { return s.root }

// logPath is the server's log file.
func (s *Server) logPath() string { return filepath.Join(s.root, "log") }

// DSN is the connection URL of database db as the superuser postgres.
func (s *Server) DSN(db string) string { return s.DSNVia(s.Addr(), db) }

// DSNVia is DSN through another address, such as a proxy in front of the
// server.
func (s *Server) DSNVia(addr, db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", addr, db)
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error

	tmplMu  sync.Mutex
	tmplDir string // an initdb'd data directory, copied for each server
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
		binErr = fmt.Errorf("pgproc: no PostgreSQL server binary (initdb, postgres) on PATH or in /usr/lib/postgresql/*/bin: %s", Install)
	})
	return binDir, binErr
}

// asNobody runs cmd as nobody when the caller is root.
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
			_ = os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// template runs initdb once per process (again after RemoveTemplate). The
// caller holds tmplMu, and keeps holding it while it copies the directory.
func template() (string, error) {
	if tmplDir != "" {
		return tmplDir, nil
	}
	bin, err := findBin()
	if err != nil {
		return "", err
	}
	root, err := ownedDir("pgproc-template-")
	if err != nil {
		return "", fmt.Errorf("pgproc: %w", err)
	}
	data := filepath.Join(root, "data")
	cmd := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C")
	asNobody(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(root)
		return "", fmt.Errorf("pgproc: initdb: %v\n%s", err, out)
	}
	tmplDir = root
	return tmplDir, nil
}

// RemoveTemplate removes the initdb'd directory servers are copied from;
// the next Start runs initdb again.
func RemoveTemplate() {
	tmplMu.Lock()
	defer tmplMu.Unlock()
	if tmplDir != "" {
		_ = os.RemoveAll(tmplDir)
		tmplDir = ""
	}
}

// Start makes a new server from the template and starts it: it accepts
// connections when Start returns. Remove stops it and deletes its data.
func Start() (*Server, error) {
	root, err := copyTemplate()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(root, "data")
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
	_ = os.RemoveAll(root)
	if err != nil {
		return nil, fmt.Errorf("pgproc: %w", err)
	}
	return nil, last
}

// copyTemplate makes a server's directory with a copy of the template's
// data directory; a RemoveTemplate meanwhile waits for the copy.
func copyTemplate() (string, error) {
	tmplMu.Lock()
	defer tmplMu.Unlock()
	tmpl, err := template()
	if err != nil {
		return "", err
	}
	root, err := ownedDir("pgproc-")
	if err != nil {
		return "", fmt.Errorf("pgproc: %w", err)
	}
	// cp -a keeps nobody's ownership and the 0700 mode postgres insists on.
	if out, err := exec.Command("cp", "-a", filepath.Join(tmpl, "data"), filepath.Join(root, "data")).CombinedOutput(); err != nil {
		_ = os.RemoveAll(root)
		return "", fmt.Errorf("pgproc: copy the template data directory: %v\n%s", err, out)
	}
	return root, nil
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
	logf, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgproc: %w", err)
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
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		<-done
		return fmt.Errorf("pgproc: start postgres: %w", err)
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	for {
		_, err := Query(ctx, s.DSN("postgres"), "SELECT 1")
		if err == nil {
			return nil
		}
		select {
		case <-done:
			s.mu.Lock()
			s.cmd, s.done = nil, nil
			s.mu.Unlock()
			log, _ := os.ReadFile(s.logPath())
			return fmt.Errorf("pgproc: postgres exited at start: %v\n%s", cmd.ProcessState, tail(log))
		case <-ctx.Done():
			_ = s.Kill()
			log, _ := os.ReadFile(s.logPath())
			return fmt.Errorf("pgproc: postgres not ready within %v: %v\n%s", readyWithin, err, tail(log))
		case <-time.After(20 * time.Millisecond): // polling a child process
		}
	}
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}

// Kill sends SIGKILL to the postmaster, as a crash would, and waits until
// it and every process it had forked have exited. The backends notice the
// postmaster's death and exit on their own, but not at once, and a backend
// still running holds the server's shared memory: a postmaster started on
// the data directory before they are gone refuses to start. They are the
// postmaster's children, not this process's, so they are waited on through
// pidfds, opened while the postmaster is stopped and cannot fork. A paused
// server is continued so that it can die. The data directory stays;
// Restart starts the server again. Killing a stopped server does nothing.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		// It exited on its own and was reaped: its pid may name another
		// process by now, which must not be stopped or killed.
		return nil
	default:
	}
	pm := cmd.Process.Pid
	_ = syscall.Kill(pm, syscall.SIGSTOP)
	var fds []int
	defer func() {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
	}()
	var openErr error
	for _, pid := range children(pm) {
		fd, err := unix.PidfdOpen(pid, 0)
		if errors.Is(err, unix.ESRCH) {
			continue // exited already
		}
		if err != nil {
			openErr = fmt.Errorf("pgproc: pidfd of backend %d: %w", pid, err)
			continue
		}
		fds = append(fds, fd)
		_ = syscall.Kill(pid, syscall.SIGCONT) // a paused backend must run to notice and exit
	}
	_ = cmd.Process.Kill()
	_ = syscall.Kill(pm, syscall.SIGCONT)
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
			return fmt.Errorf("pgproc: %d backends of a killed server still running after %v", len(fds), within)
		}
		pfds := make([]unix.PollFd, len(fds))
		for i, fd := range fds {
			pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		}
		if _, err := unix.Poll(pfds, int(left.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("pgproc: wait for a killed server's backends: %w", err)
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
	// A paused server must be able to shut down: its backends too.
	_ = signalPids(append([]int{cmd.Process.Pid}, children(cmd.Process.Pid)...), syscall.SIGCONT)
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Remove stops the server and deletes its directory.
func (s *Server) Remove() {
	s.stop()
	_ = os.RemoveAll(s.root)
}

// Restart starts a stopped or killed server again, on the same port and
// data. After a kill, postgres recovers from its write-ahead log.
func (s *Server) Restart() error {
	if err := s.Kill(); err != nil {
		return err
	}
	return s.run()
}

// Pids returns the process ids of the server: the postmaster and the
// processes it has forked (backends, checkpointer, ...). Empty while the
// server is stopped.
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

// Signal sends sig to the postmaster and then to every process it forked:
// SIGSTOP pauses the whole server (connections stay open and nothing is
// answered), SIGCONT resumes it. The postmaster is signalled first, so a
// paused one forks no backend that the pause would miss. After SIGSTOP,
// Signal returns once every process signalled has stopped: the signal
// takes effect when a process next returns to user space, not when kill
// returns, and a backend could otherwise still answer a query after the
// server was "paused".
func (s *Server) Signal(sig syscall.Signal) error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("pgproc: signal %v: server not running", sig)
	}
	pid := cmd.Process.Pid
	if err := signalPids([]int{pid}, sig); err != nil {
		return err
	}
	pids := children(pid)
	if err := signalPids(pids, sig); err != nil {
		return err
	}
	if sig == syscall.SIGSTOP {
		return waitStopped(append(pids, pid), 10*time.Second)
	}
	return nil
}

// waitStopped waits until each of pids is stopped or gone, by its state in
// /proc/PID/stat. The backends are the postmaster's children, not this
// process's, so waitid cannot report their stops.
func waitStopped(pids []int, within time.Duration) error {
	deadline := time.Now().Add(within)
	for _, pid := range pids {
		for {
			raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				break // exited
			}
			f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
			if len(f) == 0 || f[0] == "T" || f[0] == "t" || f[0] == "Z" || f[0] == "X" {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("pgproc: process %d not stopped %v after SIGSTOP (state %s)", pid, within, f[0])
			}
			time.Sleep(time.Millisecond) // polls a state; the deadline bounds it
		}
	}
	return nil
}

func signalPids(pids []int, sig syscall.Signal) error {
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("pgproc: signal %v to %d: %w", sig, pid, err)
		}
	}
	return nil
}

// StartStandby makes a streaming standby of primary and starts it: a base
// backup of primary (pg_basebackup -R, which writes standby.signal and the
// primary_conninfo that points at primary), run on a port of its own. It
// accepts connections, read-only, when StartStandby returns; WaitStandbys
// on the primary waits until it streams. Promote makes it a primary.
func StartStandby(primary *Server) (*Server, error) {
	if _, err := findBin(); err != nil {
		return nil, err
	}
	root, err := ownedDir("pgproc-standby-")
	if err != nil {
		return nil, fmt.Errorf("pgproc: %w", err)
	}
	s := &Server{root: root, data: filepath.Join(root, "data"), bin: binDir}
	if err := s.baseBackup(primary); err != nil {
		_ = os.RemoveAll(root)
		return nil, err
	}
	var last error
	for range 3 { // a port picked free may be taken before postgres binds it
		if s.port, err = freePort(); err != nil {
			_ = os.RemoveAll(root)
			return nil, fmt.Errorf("pgproc: %w", err)
		}
		if last = s.run(); last == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(root)
	return nil, last
}

// Rebuild makes a stopped or killed server a streaming standby of
// primary, as an operator rebuilds an old primary after a failover: its
// data directory is replaced by a base backup of primary. It stays
// stopped; Restart starts it, on its own port.
func (s *Server) Rebuild(primary *Server) error {
	if err := s.Kill(); err != nil {
		return err
	}
	if err := os.RemoveAll(s.data); err != nil {
		return fmt.Errorf("pgproc: %w", err)
	}
	return s.baseBackup(primary)
}

// baseBackupWithin bounds a base backup of a test server.
const baseBackupWithin = 60 * time.Second

// baseBackup copies primary's data into s.data with pg_basebackup, as the
// server's user, streaming the WAL it needs and writing the standby's
// configuration (-R).
func (s *Server) baseBackup(primary *Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), baseBackupWithin)
	defer cancel()
	tool, err := toolPath("pg_basebackup")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, tool, "-D", s.data,
		"-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
		"-R", "-X", "stream", "--checkpoint=fast", "--no-sync")
	asNobody(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgproc: pg_basebackup from %s: %v\n%s", primary.Addr(), err, out)
	}
	return nil
}

// Promote makes a standby a primary (pg_promote) and waits until it
// accepts writes.
func (s *Server) Promote(ctx context.Context) error {
	out, err := Query(ctx, s.DSN("postgres"), `SELECT pg_promote(true, 60)`)
	if err != nil {
		return fmt.Errorf("pgproc: promote %s: %w", s.Addr(), err)
	}
	if out != "t" {
		return fmt.Errorf("pgproc: promote %s: not promoted within 60s", s.Addr())
	}
	return nil
}

// Exec runs one statement on database postgres, as the superuser: for a
// setting (ALTER SYSTEM ...; then SELECT pg_reload_conf()).
func (s *Server) Exec(ctx context.Context, sql string) error {
	if _, err := Query(ctx, s.DSN("postgres"), sql); err != nil {
		return fmt.Errorf("pgproc: %s: %w", s.Addr(), err)
	}
	return nil
}

// Query runs one statement through psql on the server dsn names and
// returns what it printed (unaligned, tuples only, one row per line),
// trimmed. The rig speaks to its servers through their own client
// program, so that it links no database driver. An error carries what
// psql said.
func Query(ctx context.Context, dsn, sql string) (string, error) {
	psql, err := toolPath("psql")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, psql, "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-c", sql)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("psql %q: %v: %s", sql, err, bytes.TrimSpace(out))
	}
	return string(bytes.TrimSpace(out)), nil
}

// SetSynchronous makes s replicate synchronously to any standby
// (synchronous_standby_names = '*'), or asynchronously with on false, and
// reloads its configuration. A commit on a synchronous primary returns
// only once a standby has flushed it.
func (s *Server) SetSynchronous(ctx context.Context, on bool) error {
	v := "''"
	if on {
		v = "'*'"
	}
	if err := s.Exec(ctx, `ALTER SYSTEM SET synchronous_standby_names = `+v); err != nil {
		return err
	}
	return s.Exec(ctx, `SELECT pg_reload_conf()`)
}

// WaitStandbys waits until n standbys stream from s, and, with sync, until
// that many are synchronous.
func (s *Server) WaitStandbys(ctx context.Context, n int, sync bool) error {
	q := `SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'`
	if sync {
		q += ` AND sync_state IN ('sync', 'quorum')`
	}
	for {
		got, err := func() (int, error) {
			out, err := Query(ctx, s.DSN("postgres"), q)
			if err != nil {
				return 0, err
			}
			return strconv.Atoi(out)
		}()
		if err == nil && got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgproc: %d standbys of %s streaming (sync %v), want %d: %v (last error %v)", got, s.Addr(), sync, n, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond): // polling a server process
		}
	}
}

// toolPath finds a client program of the server's version: beside the
// postgres binary, beside what that binary links to (PATH may hold links
// to the server's directory), or on PATH.
func toolPath(name string) (string, error) {
	bin, err := findBin()
	if err != nil {
		return "", err
	}
	cands := []string{filepath.Join(bin, name)}
	if real, err := filepath.EvalSymlinks(filepath.Join(bin, "postgres")); err == nil {
		cands = append(cands, filepath.Join(filepath.Dir(real), name))
	}
	for _, c := range cands {
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("pgproc: no %s beside %s or on PATH: %s", name, bin, Install)
}
