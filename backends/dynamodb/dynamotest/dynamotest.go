// Package dynamotest runs dynalite, a DynamoDB implementation on LevelDB
// that speaks DynamoDB's wire protocol, as a process of its own for the
// tests of the DynamoDB backend and the fault campaign. It is test
// support: import it only from tests and test tools.
//
// Dynalite is the npm package dynalite at Version, run by node (20 or
// later). TENURE_DYNALITE names a ready copy: its cli.js, or a directory
// holding node_modules/dynalite. Without it the package installs the
// package with npm, on first use, into a cache directory named after the
// version: $TENURE_CACHE, else $XDG_CACHE_HOME/tenure, else
// $HOME/.cache/tenure, as the other test servers are cached. Test binaries
// run in parallel serialize the install with a lock on the cache, so a
// cold cache costs one install.
//
// A Server listens on 127.0.0.1 on a port picked free at its first start
// and keeps its tables in a directory under t.TempDir(); it keeps both
// across Restart, so clients see the same tables after a restart. Kill,
// Pause and Resume kill, stop and continue its process. Everything started
// is ended by t.Cleanup.
package dynamotest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"golang.org/x/sys/unix"

	"github.com/tenure-go/tenure/internal/childproc"
)

// Version is the dynalite version the tests run.
const Version = "4.0.0"

// Env names the variable that gives a ready dynalite, skipping the
// install.
const Env = "TENURE_DYNALITE"

// Region is the region the clients name; dynalite accepts any.
const Region = "us-east-1"

// readyTimeout bounds a start under -race on busy cores.
const readyTimeout = 60 * time.Second

var (
	installMu  sync.Mutex
	installed  string
	installErr error
)

// CLI returns the path of dynalite's cli.js: the one Env names, or the
// cached install, installing it first if the cache lacks it.
func CLI() (string, error) {
	if p := os.Getenv(Env); p != "" {
		return cliIn(p)
	}
	installMu.Lock()
	defer installMu.Unlock()
	if installed == "" && installErr == nil {
		installed, installErr = install()
	}
	return installed, installErr
}

// cliIn is dynalite's cli.js given its path or a directory holding it.
func cliIn(p string) (string, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("dynamotest: %s=%s: %w", Env, p, err)
	}
	if !fi.IsDir() {
		return p, nil
	}
	for _, c := range []string{filepath.Join(p, "node_modules", "dynalite", "cli.js"), filepath.Join(p, "cli.js")} {
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	return "", fmt.Errorf("dynamotest: %s=%s holds neither cli.js nor node_modules/dynalite/cli.js", Env, p)
}

// cacheDir is where installs are kept.
func cacheDir() (string, error) {
	if d := os.Getenv("TENURE_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "tenure"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("dynamotest: no cache directory (set TENURE_CACHE or %s): %w", Env, err)
	}
	return filepath.Join(home, ".cache", "tenure"), nil
}

// install puts dynalite into the cache unless it is there, and returns its
// cli.js. The install goes to a private directory beside the cache entry
// and is renamed into place, under a lock on the cache, so that an
// interrupted install never leaves a partial entry and parallel test
// binaries install once.
func install() (string, error) {
	cache, err := cacheDir()
	if err != nil {
		return "", err
	}
	dest := filepath.Join(cache, "dynalite-"+Version)
	cli := filepath.Join(dest, "node_modules", "dynalite", "cli.js")
	if _, err := os.Stat(cli); err == nil {
		return cli, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("dynamotest: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(cache, ".dynalite.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("dynamotest: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("dynamotest: lock the cache: %w", err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN)
	if _, err := os.Stat(cli); err == nil {
		return cli, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("dynamotest: dynalite is not installed and npm is not on PATH (install node 20 and npm, or set %s): %w", Env, err)
	}
	tmp, err := os.MkdirTemp(cache, ".dynalite-install.")
	if err != nil {
		return "", fmt.Errorf("dynamotest: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-save", "dynalite@"+Version)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("dynamotest: npm install dynalite@%s (set %s to skip it): %w\n%s", Version, Env, err, strings.TrimSpace(string(out)))
	}
	if _, err := os.Stat(filepath.Join(tmp, "node_modules", "dynalite", "cli.js")); err != nil {
		return "", fmt.Errorf("dynamotest: npm installed no dynalite cli.js: %w", err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return "", fmt.Errorf("dynamotest: %w", err)
	}
	return cli, nil
}

// Server is one dynalite process. Its methods are called from the test
// goroutine; Endpoint and HostPort are safe for concurrent use.
type Server struct {
	t    testing.TB
	node string
	cli  string
	dir  string
	log  string
	port int

	mu   sync.Mutex
	proc *childproc.Process // nil while stopped
}

// Start starts a dynalite server keeping its tables on disk and waits
// until it answers.
func Start(t testing.TB) *Server {
	t.Helper()
	cli, err := CLI()
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("dynamotest: node is not on PATH: %v", err)
	}
	// A port picked free may be taken by another process before the
	// server binds it: try again on fresh ports.
	for range 3 {
		dir := t.TempDir()
		s := &Server{t: t, node: node, cli: cli, dir: filepath.Join(dir, "data"), log: filepath.Join(dir, "dynalite.log"), port: freePort(t)}
		if err = s.launch(); err == nil {
			if err = s.waitReady(); err == nil {
				t.Cleanup(s.Stop)
				return s
			}
		}
		s.Stop()
	}
	t.Fatalf("dynamotest: %v", err)
	return nil
}

// Argv is the command line that runs dynalite's cli (see CLI) with node,
// listening on addr (127.0.0.1:PORT) and keeping its tables in dir, with
// tables created and deleted at once (no CREATING state to wait out).
func Argv(node, cli, addr, dir string) []string {
	host, port, _ := net.SplitHostPort(addr)
	return []string{node, cli, "--host", host, "--port", port, "--path", dir,
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"}
}

// WaitReady waits until the dynalite p runs answers HTTP at addr, at most
// d. It fails at once if p exits.
func WaitReady(addr string, p *childproc.Process, d time.Duration) error {
	deadline := time.Now().Add(d)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.Get("http://" + addr)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("dynamotest: dynalite at %s not ready within %v: %w", addr, d, err)
		}
		select {
		case <-p.Done():
			return fmt.Errorf("dynamotest: dynalite at %s exited before serving: %v", addr, p.Wait())
		case <-tick.C:
		}
	}
}

// launch starts the server's process without waiting for it.
func (s *Server) launch() error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return fmt.Errorf("dynamotest: %w", err)
	}
	p, err := childproc.Start(childproc.Spec{Argv: Argv(s.node, s.cli, s.HostPort(), s.dir), Log: s.log})
	if err != nil {
		return fmt.Errorf("dynamotest: start dynalite: %w", err)
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

// waitReady waits until the launched server answers, at most
// readyTimeout.
func (s *Server) waitReady() error {
	if err := WaitReady(s.HostPort(), s.running(), readyTimeout); err != nil {
		return fmt.Errorf("%w\n%s", err, logTail(s.log))
	}
	return nil
}

func (s *Server) running() *childproc.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// HostPort is the server's address, 127.0.0.1:PORT.
func (s *Server) HostPort() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Endpoint is the server's URL, http://127.0.0.1:PORT.
func (s *Server) Endpoint() string { return "http://" + s.HostPort() }

// Stop shuts the server down (SIGTERM, after a SIGCONT should it be
// paused; SIGKILL if it has not exited within 10 s); its tables stay on
// disk. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Terminate(10 * time.Second)
	}
}

// Kill kills the server with SIGKILL and waits until it is gone; its
// tables stay on disk as the last write left them.
func (s *Server) Kill() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Signal(syscall.SIGKILL)
		p.Wait()
	}
}

// Restart starts a stopped or killed server again on the same port and
// data directory (stopping it first if it runs).
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.launch(); err != nil {
		s.t.Fatal(err)
	}
	if err := s.waitReady(); err != nil {
		s.Stop()
		s.t.Fatal(err)
	}
}

// Pause stops the server with SIGSTOP and returns once every thread of it
// has stopped: its connections stay open and nothing is answered until
// Resume.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	if p := s.running(); p == nil || !p.Pause() {
		t.Fatal("dynamotest: pause: the server process is not running")
	}
}

// Resume continues a paused server.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	if p := s.running(); p == nil || !p.Signal(syscall.SIGCONT) {
		t.Fatal("dynamotest: resume: the server process is not running")
	}
}

// CPU is the CPU time the server's current process has used; 0 while
// stopped.
func (s *Server) CPU() time.Duration {
	p := s.running()
	if p == nil {
		return 0
	}
	return p.CPU()
}

// Client returns a DynamoDB client of the server, with static
// credentials. Its idle connections are closed when t ends.
func (s *Server) Client(t testing.TB) *dynamodb.Client {
	t.Helper()
	return ClientAt(t, s.Endpoint())
}

// ClientAt returns a DynamoDB client of the server at endpoint (a proxy in
// front of a Server, say), with static credentials and the SDK's default
// retries. Its idle connections are closed when t ends.
func ClientAt(t testing.TB, endpoint string, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return dynamodb.New(dynamodb.Options{
		Region:       Region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("tenure", "tenure-test-secret", ""),
		HTTPClient:   &http.Client{Transport: tr},
	}, opts...)
}

var tableSeq atomic.Int64

// NewTable names a table no other test of the process uses.
func NewTable() string {
	return fmt.Sprintf("tenure-%d-%d", os.Getpid(), tableSeq.Add(1))
}

// freePort is a port the kernel had free a moment ago. Another process may
// take it before the server binds it; the start then fails loudly.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("dynamotest: pick a port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// logTail is the end of a server's log, for a failure message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "dynalite log:\n" + strings.Join(lines, "\n")
}
