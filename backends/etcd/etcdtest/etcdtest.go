// Package etcdtest runs a real etcd server inside the test process, for the
// tests of the etcd backend and of anything else that needs an etcd (the kube
// backend's API server). It is test support: import it only from _test.go
// files.
//
// A Server is a single-member cluster on 127.0.0.1 with ports picked by the
// kernel, a data directory from t.TempDir(), fast raft timings (10 ms ticks,
// 100 ms election timeout, no fsync) and a silent logger. It is ready in about
// 100 ms. Everything it starts is stopped by t.Cleanup, so goleak finds
// nothing left behind.
//
// With ElectionMs=100 the server's minimum lease TTL is 1 s (etcd grants at
// least ceil(1.5 × election timeout), in whole seconds). Start with
// DefaultTimings runs etcd's own defaults instead (100 ms ticks, 1 s election
// timeout, so a 2 s minimum lease, and fsync on), as a production server
// would.
//
// A Process is the same single-member cluster run from an etcd binary as a
// separate process, for running the tests against another etcd version
// than the one embedded (the main module's go.mod holds one).
// etcdserver/build.sh builds etcd v3.7 from the Go module proxy and caches
// it; ServerBinary finds it through ServerEnv.
package etcdtest

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

const (
	// readyTimeout bounds a start: a cold start under -race on two busy cores
	// takes far less, but a stuck server must fail the test, not hang it.
	readyTimeout = 60 * time.Second
	dialTimeout  = 5 * time.Second
)

// LeakOptions are the goleak options for a test package that stops members
// of a Cluster. They ignore one goroutine of etcd's own: a peer request
// served by a member after its storage closed and before its peer listener
// did blocks forever on the storage's lock (embed.Etcd.Close closes them in
// that order). Cluster refuses peer connections to a stopping member, which
// makes this rare; it is not made impossible. Nothing a Server, a Cluster or
// a store owns is ignored.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("go.etcd.io/etcd/server/v3/etcdserver/api/etcdhttp.newPeerHandler.versionHandler.func1"),
	}
}

// Server is a running single-member etcd. Start, Stop and Restart are called
// from the test goroutine; Endpoints and Client are safe for concurrent use.
type Server struct {
	dir      string
	defaults bool // etcd's default timings and fsync

	mu        sync.Mutex
	etcd      *embed.Etcd // nil while stopped
	clientURL url.URL     // fixed after the first start so that clients survive Restart
	peerURL   url.URL
}

// Option configures a Server.
type Option func(*Server)

// DefaultTimings makes the server run etcd's default raft timings (100 ms
// ticks, a 1 s election timeout, so a 2 s minimum lease) with fsync on,
// instead of the fast test configuration.
func DefaultTimings() Option { return func(s *Server) { s.defaults = true } }

// Start starts an etcd for the test, waits until it serves, and stops it at
// cleanup.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{dir: t.TempDir()}
	for _, o := range opts {
		o(s)
	}
	zero, _ := url.Parse("http://127.0.0.1:0") // the kernel picks the ports
	s.clientURL, s.peerURL = *zero, *zero
	if err := s.start(); err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Endpoints are the client URLs of the server, for clientv3.Config. They do
// not change across Restart.
func (s *Server) Endpoints() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []string{s.clientURL.String()}
}

// Client returns a new client of the server, closed at cleanup. It logs
// nothing.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   s.Endpoints(),
		DialTimeout: dialTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("etcdtest: client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Stop stops the server and waits until it has released its ports and
// goroutines. The data directory is kept for Restart. Stopping a stopped
// server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	e := s.etcd
	s.etcd = nil
	s.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Restart stops the server if it runs and starts it again on the same client
// port and data directory, then waits until it serves. Data survives; clients
// see errors while it is down and reconnect by themselves.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		t.Fatalf("etcdtest: restart: %v", err)
	}
}

func (s *Server) start() error {
	s.mu.Lock()
	clientURL, peerURL := s.clientURL, s.peerURL
	s.mu.Unlock()

	cfg := fastConfig("etcdtest", s.dir)
	if s.defaults {
		def := embed.NewConfig()
		cfg.TickMs, cfg.ElectionMs, cfg.UnsafeNoFsync = def.TickMs, def.ElectionMs, def.UnsafeNoFsync
	}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := startReady(cfg)
	if err != nil {
		return err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	s.etcd = e
	s.clientURL = url.URL{Scheme: "http", Host: e.Clients[0].Addr().String()}
	return nil
}

// fastConfig is the embedded-etcd configuration every server and member
// here starts from: fast ticks and elections (a 10 ms tick, a 100 ms
// election timeout, so a 1 s minimum lease), no fsync, no logs.
func fastConfig(name, dir string) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = name
	cfg.Dir = dir
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	return cfg
}

// startReady starts an etcd from cfg and waits, at most readyTimeout, until
// it serves.
func startReady(cfg *embed.Config) (*embed.Etcd, error) {
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd %s: %w", cfg.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd %s failed to start: %w", cfg.Name, err)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("etcd %s not ready after %v", cfg.Name, readyTimeout)
	}
}
