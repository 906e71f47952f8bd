// Package etcdproc runs etcd servers as processes of their own, for the
// test helpers that need one: etcdtest (the etcd store's tests) and
// kubetest (the kube-apiserver's storage). It links no etcd package: a
// server is started from a binary and judged ready by its /health
// endpoint, so that a module whose tests need an etcd server does not
// require etcd's client.
package etcdproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/internal/tools/toolbuild"
)

const (
	// ReadyTimeout bounds a start: a cold start under -race on two busy
	// cores takes far less, but a stuck server must fail the test, not
	// hang it.
	ReadyTimeout = 60 * time.Second
	// startTries bounds the attempts to start a server: its ports are
	// picked free and then bound by etcd, and another process may take one
	// in between.
	startTries = 3
	// pollInterval is how often WaitReady asks a starting server.
	pollInterval = 10 * time.Millisecond
)

// Binary36 is the etcd v3.6 binary of the pinned tools module, built and
// cached on first use unless TENURE_ETCD36_SERVER names one.
func Binary36() (string, error) { return toolbuild.Etcd36.Path() }

// Process is a single-member etcd running from a binary on 127.0.0.1
// ports, with fast timings (10 ms ticks, 100 ms election timeout, so a 1 s
// minimum lease, no fsync) unless it was started with etcd's defaults. Its
// methods are safe for concurrent use. The process dies with its starter
// (package childproc).
type Process struct {
	bin, dir, log string
	client, peer  string // host:port
	defaults      bool   // etcd's default timings and fsync

	mu   sync.Mutex
	proc *childproc.Process // nil while stopped
}

// Start starts the etcd binary bin with its data and log under dir and
// waits until it serves. With defaults, it runs etcd's default raft
// timings (100 ms ticks, a 1 s election timeout, so a 2 s minimum lease)
// with fsync on.
func Start(bin, dir string, defaults bool) (*Process, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("etcd data directory: %w", err)
	}
	var err error
	for try := 0; try < startTries; try++ {
		p := &Process{bin: bin, dir: filepath.Join(dir, fmt.Sprintf("data%d", try)), log: filepath.Join(dir, fmt.Sprintf("etcd%d.log", try)), defaults: defaults}
		if p.client, err = FreePort(); err != nil {
			continue
		}
		if p.peer, err = FreePort(); err != nil {
			continue
		}
		if err = p.start(); err == nil {
			return p, nil
		}
	}
	return nil, err
}

// Endpoints are the client URLs of the process. They do not change across
// Restart.
func (p *Process) Endpoints() []string { return []string{"http://" + p.client} }

// Stop kills the process (SIGKILL: a crash) and waits until it has exited.
// The data directory is kept for Restart. Stopping a stopped process does
// nothing.
func (p *Process) Stop() {
	p.mu.Lock()
	proc := p.proc
	p.proc = nil
	p.mu.Unlock()
	if proc != nil {
		Kill(proc)
	}
}

// CPU is the CPU time (user and system) the current process has used; 0
// while stopped.
func (p *Process) CPU() time.Duration {
	p.mu.Lock()
	proc := p.proc
	p.mu.Unlock()
	if proc == nil {
		return 0
	}
	return proc.CPU()
}

// Restart stops the process if it runs and starts it again on the same
// ports and data directory, then waits until it serves.
func (p *Process) Restart() error {
	p.Stop()
	return p.start()
}

func (p *Process) start() error {
	client, peer := "http://"+p.client, "http://"+p.peer
	proc, err := Run(p.bin, p.log, []string{
		"--name", "etcdtest",
		"--data-dir", p.dir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "etcdtest=" + peer,
	}, !p.defaults)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.proc = proc
	p.mu.Unlock()
	if err := WaitReady(p.bin, client, proc); err != nil {
		p.Stop()
		return fmt.Errorf("%w\n%s", err, LogTail(p.log))
	}
	return nil
}

// Run starts the etcd binary bin with args, and the fast test timings if
// fast, logging to the file logPath (warnings and errors only, unless args
// name a --log-level). The process dies with its starter (package
// childproc).
func Run(bin, logPath string, args []string, fast bool) (*childproc.Process, error) {
	argv := append([]string{bin}, args...)
	if fast {
		argv = append(argv, "--heartbeat-interval", "10", "--election-timeout", "100", "--unsafe-no-fsync")
	}
	if !slices.Contains(args, "--log-level") {
		argv = append(argv, "--log-level", "warn")
	}
	p, err := childproc.Start(childproc.Spec{Argv: argv, Log: logPath})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return p, nil
}

// Kill kills an etcd process (SIGKILL: a crash) and returns once it was
// reaped.
func Kill(p *childproc.Process) {
	p.Signal(syscall.SIGKILL)
	<-p.Done()
}

// WaitReady waits until the etcd process bin at the client URL endpoint
// reports itself healthy, at most ReadyTimeout; it fails at once if the
// process exits. etcd's /health answers healthy only when the member has
// a leader and a linearizable read through it succeeds.
func WaitReady(bin, endpoint string, proc *childproc.Process) error {
	ctx, cancel := context.WithTimeout(context.Background(), ReadyTimeout)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	tk := time.NewTicker(pollInterval)
	defer tk.Stop()
	for {
		err := healthy(ctx, hc, endpoint)
		if err == nil {
			return nil
		}
		select {
		case <-proc.Done():
			return fmt.Errorf("etcd %s exited before serving: %v", bin, proc.Wait())
		case <-ctx.Done():
			return fmt.Errorf("etcd %s not ready after %v: %w", bin, ReadyTimeout, errors.Join(err, ctx.Err()))
		case <-tk.C:
		}
	}
}

// healthy asks endpoint's /health once.
func healthy(ctx context.Context, hc *http.Client, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return err
	}
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(body, &h); err != nil {
		return fmt.Errorf("/health: %s: %q", resp.Status, body)
	}
	if resp.StatusCode != http.StatusOK || h.Health != "true" {
		return fmt.Errorf("/health: %s: not healthy (%s)", resp.Status, h.Reason)
	}
	return nil
}

// LogTail is the end of an etcd process's log, for a failure message.
func LogTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "etcd log:\n" + strings.TrimSpace(string(bytes.Join(lines, []byte("\n"))))
}

// FreePort picks a free 127.0.0.1 port, as host:port. Another process may
// take it before etcd binds it: starters try again.
func FreePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("pick a port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
