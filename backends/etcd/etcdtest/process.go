package etcdtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/internal/childproc"
)

// ServerEnv names the environment variable that gives the path of an etcd
// server binary for StartProcess: `make test` builds etcd v3.7 with
// backends/etcd/etcdtest/etcdserver/build.sh and sets it.
const ServerEnv = "TENURE_ETCD_SERVER"

// ServerBinary returns the etcd binary named by ServerEnv. Without one it
// fails the test when it runs in CI (CI set, as CI systems do), where `make test` must have
// set it, and skips it otherwise, saying how to run it.
func ServerBinary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(ServerEnv)
	switch {
	case bin != "":
		return bin
	case os.Getenv("CI") != "":
		t.Fatalf("etcdtest: %s is not set: in CI the tests run against a real etcd v3.7 server; run them with `make test`, which builds it (backends/etcd/etcdtest/etcdserver/build.sh)", ServerEnv)
	default:
		t.Skipf("etcdtest: %s is not set: skipping the run against a real etcd server process; `make test` builds one and sets it", ServerEnv)
	}
	return ""
}

// Process is a single-member etcd running as a separate process from a
// binary, on 127.0.0.1 ports, with fast timings (10 ms ticks, 100 ms
// election timeout, so a 1 s minimum lease, no fsync) unless
// DefaultTimings. Stop, Restart and StartProcess are called from the test
// goroutine; Endpoints and Client are safe for concurrent use. The process
// is killed at cleanup, and, should the test process die first, by the
// kernel (package childproc).
type Process struct {
	bin, dir, log string
	client, peer  string // host:port
	defaults      bool   // etcd's default timings and fsync

	mu   sync.Mutex
	proc *childproc.Process // nil while stopped
}

// StartProcess starts the etcd binary bin for the test, waits until it
// serves, and kills it at cleanup.
func StartProcess(t testing.TB, bin string, opts ...Option) *Process {
	t.Helper()
	dir := t.TempDir()
	var err error
	for try := 0; try < startTries; try++ {
		p := &Process{bin: bin, dir: filepath.Join(dir, fmt.Sprintf("data%d", try)), log: filepath.Join(dir, fmt.Sprintf("etcd%d.log", try))}
		for _, o := range opts {
			o(p)
		}
		if p.client, err = freePort(); err != nil {
			continue
		}
		if p.peer, err = freePort(); err != nil {
			continue
		}
		if err = p.start(); err == nil {
			t.Cleanup(p.Stop)
			return p
		}
	}
	t.Fatalf("etcdtest: %v", err)
	return nil
}

// Endpoints are the client URLs of the process. They do not change across
// Restart.
func (p *Process) Endpoints() []string { return []string{"http://" + p.client} }

// Client returns a new client of the process, closed at cleanup.
func (p *Process) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: p.Endpoints(), DialTimeout: dialTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Version is what the process answers to a status request, like "3.7.3".
func (p *Process) Version(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	resp, err := p.Client(t).Status(ctx, p.Endpoints()[0])
	if err != nil {
		t.Fatalf("etcdtest: status: %v", err)
	}
	return resp.Version
}

// Stop kills the process (SIGKILL: a crash) and waits until it has exited.
// The data directory is kept for Restart. Stopping a stopped process does
// nothing.
func (p *Process) Stop() {
	p.mu.Lock()
	proc := p.proc
	p.proc = nil
	p.mu.Unlock()
	if proc != nil {
		kill(proc)
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
func (p *Process) Restart(t testing.TB) {
	t.Helper()
	p.Stop()
	if err := p.start(); err != nil {
		t.Fatalf("etcdtest: restart: %v", err)
	}
}

func (p *Process) start() error {
	client, peer := "http://"+p.client, "http://"+p.peer
	proc, err := run(p.bin, p.log, []string{
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
	if err := waitReady(p.bin, p.Endpoints(), proc); err != nil {
		p.Stop()
		return fmt.Errorf("%w\n%s", err, logTail(p.log))
	}
	return nil
}

// run starts the etcd binary bin with args, and the fast test timings if
// fast, logging to the file logPath. The process dies with the test
// process (package childproc).
func run(bin, logPath string, args []string, fast bool) (*childproc.Process, error) {
	argv := append([]string{bin}, args...)
	if fast {
		argv = append(argv, "--heartbeat-interval", "10", "--election-timeout", "100", "--unsafe-no-fsync")
	}
	argv = append(argv, "--log-level", "warn")
	p, err := childproc.Start(childproc.Spec{Argv: argv, Log: logPath})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	return p, nil
}

// kill kills an etcd process (SIGKILL: a crash) and returns once it was
// reaped.
func kill(p *childproc.Process) {
	p.Signal(syscall.SIGKILL)
	<-p.Done()
}

// waitReady waits until the etcd process bin at endpoints answers a
// linearizable read, at most readyTimeout; it fails at once if the process
// exits.
func waitReady(bin string, endpoints []string, proc *childproc.Process) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: dialTimeout, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("etcd %s: client: %w", bin, err)
	}
	defer cli.Close()
	tk := clock.New().Ticker(pollInterval)
	defer tk.Stop()
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Get(rctx, "health")
		rcancel()
		if err == nil {
			return nil
		}
		select {
		case <-proc.Done():
			return fmt.Errorf("etcd %s exited before serving: %v", bin, proc.Wait())
		case <-ctx.Done():
			return fmt.Errorf("etcd %s not ready after %v: %w", bin, readyTimeout, errors.Join(err, ctx.Err()))
		case <-tk.C:
		}
	}
}

// logTail is the end of an etcd process's log, for a failure message.
func logTail(path string) string {
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
