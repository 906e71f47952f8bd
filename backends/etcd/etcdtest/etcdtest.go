// Package etcdtest runs real etcd servers as processes of their own, for
// the tests of the etcd backend and of anything else that needs an etcd
// (the kube backend's API server). It is test support: import it only
// from _test.go files.
//
// A Server is a single-member cluster on 127.0.0.1 with ports picked free,
// a data directory from t.TempDir(), fast raft timings (10 ms ticks, 100 ms
// election timeout, no fsync) and its log in a file. Start runs the etcd
// v3.6 binary of a pinned tools module (etcdserver36/build.sh), built and
// cached on first use unless TENURE_ETCD36_SERVER names one. Everything
// it starts is killed at cleanup, and, should the test process die first,
// by the kernel (package childproc).
//
// With ElectionMs=100 the server's minimum lease TTL is 1 s (etcd grants at
// least ceil(1.5 × election timeout), in whole seconds). Start with
// DefaultTimings runs etcd's own defaults instead (100 ms ticks, 1 s election
// timeout, so a 2 s minimum lease, and fsync on), as a production server
// would.
//
// StartProcess runs the same single-member cluster from another etcd
// binary, for running the tests against another etcd version:
// etcdserver/build.sh builds etcd v3.7 from the Go module proxy and caches
// it; ServerBinary finds it through ServerEnv.
package etcdtest

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/internal/testrig/etcdproc"
)

const (
	// readyTimeout bounds a start: a cold start under -race on two busy cores
	// takes far less, but a stuck server must fail the test, not hang it.
	readyTimeout = etcdproc.ReadyTimeout
	dialTimeout  = 5 * time.Second
)

// LeakOptions are the goleak options for a test package that runs etcd
// servers. Every server is a process of its own, so there are none; the
// function stays so that a package's TestMain need not change when a
// server leaves something behind again.
func LeakOptions() []goleak.Option { return nil }

// Server is a running single-member etcd: a Process of the etcd v3.6
// binary.
type Server = Process

// Option configures a Server.
type Option func(*options)

type options struct {
	defaults bool // etcd's default timings and fsync
}

// DefaultTimings makes the server run etcd's default raft timings (100 ms
// ticks, a 1 s election timeout, so a 2 s minimum lease) with fsync on,
// instead of the fast test configuration.
func DefaultTimings() Option { return func(o *options) { o.defaults = true } }

// Start starts an etcd v3.6 server for the test, waits until it serves,
// and kills it at cleanup.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	return StartProcess(t, binary36(t), opts...)
}

// binary36 is the etcd v3.6 binary, built if need be.
func binary36(t testing.TB) string {
	t.Helper()
	bin, err := etcdproc.Binary36()
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	return bin
}
