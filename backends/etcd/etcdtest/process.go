package etcdtest

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/internal/testrig/etcdproc"
	"github.com/tenure-go/tenure/internal/tools/toolbuild"
)

// ServerEnv names the environment variable that gives the path of an etcd
// v3.7 server binary for StartProcess; without it, ServerBinary builds one
// (backends/etcd/etcdtest/etcdserver/build.sh) and caches it.
const ServerEnv = "TENURE_ETCD_SERVER"

// ServerBinary returns the etcd v3.7 binary: the one ServerEnv names, or
// the one its tools module builds and caches on first use. It fails the
// test if the build fails.
func ServerBinary(t testing.TB) string {
	t.Helper()
	bin, err := toolbuild.Etcd37.Path()
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	return bin
}

// Process is a single-member etcd running as a separate process from a
// binary, on 127.0.0.1 ports, with fast timings (10 ms ticks, 100 ms
// election timeout, so a 1 s minimum lease, no fsync) unless
// DefaultTimings. Stop, Restart and StartProcess are called from the test
// goroutine; Endpoints and Client are safe for concurrent use. The process
// is killed at cleanup, and, should the test process die first, by the
// kernel (package childproc).
type Process struct {
	*etcdproc.Process
}

// StartProcess starts the etcd binary bin for the test, waits until it
// serves, and kills it at cleanup.
func StartProcess(t testing.TB, bin string, opts ...Option) *Process {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	p, err := etcdproc.Start(bin, t.TempDir(), o.defaults)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(p.Stop)
	return &Process{p}
}

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

// Restart stops the process if it runs and starts it again on the same
// ports and data directory, then waits until it serves.
func (p *Process) Restart(t testing.TB) {
	t.Helper()
	if err := p.Process.Restart(); err != nil {
		t.Fatalf("etcdtest: restart: %v", err)
	}
}
