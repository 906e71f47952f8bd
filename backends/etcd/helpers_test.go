package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, etcdtest.LeakOptions()...)
}

// nopLogger keeps etcd clients quiet.
var nopLogger = zap.NewNop()

// testTimeout bounds every wait on a real server in these tests.
const testTimeout = 30 * time.Second

// pollEvery is how often a test re-reads a real server while it waits for
// real time (a lease's expiry) to pass.
const pollEvery = 20 * time.Millisecond

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// within returns a context that ends after d, or when t ends.
func within(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// counter counts the requests a client sends: one per unary call and one
// per message sent on a stream (a KeepAliveOnce is one, a watch creation
// one). Received stream messages are not requests.
type counter struct {
	mu       sync.Mutex
	byMethod map[string]int64 // guarded by mu
	streams  map[string]int64 // guarded by mu; streams opened, by method
	kept     map[int64]int64  // guarded by mu; keep-alive messages, by lease
	seq      []string         // guarded by mu; the methods of the requests, in the order sent
	total    atomic.Int64
}

func newCounter() *counter {
	return &counter{byMethod: make(map[string]int64), streams: make(map[string]int64), kept: make(map[int64]int64)}
}

// of is how many requests were sent for method (its last element).
func (c *counter) of(method string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byMethod[method]
}

// keepAlivesOf is how many keep-alive messages were sent for lease id.
func (c *counter) keepAlivesOf(id clientv3.LeaseID) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kept[int64(id)]
}

// opened counts a stream opened for method.
func (c *counter) opened(method string) {
	c.mu.Lock()
	c.streams[method[strings.LastIndexByte(method, '/')+1:]]++
	c.mu.Unlock()
}

// streamsOf is how many streams were opened for method (its last element).
func (c *counter) streamsOf(method string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[method]
}

func (c *counter) add(method string) {
	c.total.Add(1)
	c.mu.Lock()
	m := method[strings.LastIndexByte(method, '/')+1:]
	c.byMethod[m]++
	c.seq = append(c.seq, m)
	c.mu.Unlock()
}

// sequence is the methods of the requests sent since the last reset, in
// the order they were sent, leaving out those of the methods in skip.
func (c *counter) sequence(skip ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.seq {
		if !slices.Contains(skip, m) {
			out = append(out, m)
		}
	}
	return out
}

func (c *counter) Load() int64 { return c.total.Load() }

// String lists the counts by method, for failure messages and reports.
func (c *counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for m, n := range c.byMethod {
		parts = append(parts, fmt.Sprintf("%s=%d", m, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func (c *counter) reset() {
	c.mu.Lock()
	c.byMethod = make(map[string]int64)
	c.streams = make(map[string]int64)
	c.kept = make(map[int64]int64)
	c.seq = nil
	c.mu.Unlock()
	c.total.Store(0)
}

func (c *counter) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.add(method)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			c.opened(method)
			return &countingStream{ClientStream: cs, c: c, method: method}, nil
		}),
	}
}

type countingStream struct {
	grpc.ClientStream
	c      *counter
	method string
}

func (s *countingStream) SendMsg(m any) error {
	s.c.add(s.method)
	if req, ok := m.(*pb.LeaseKeepAliveRequest); ok {
		s.c.mu.Lock()
		s.c.kept[req.ID]++
		s.c.mu.Unlock()
	}
	return s.ClientStream.SendMsg(m)
}

// newClient returns a client of endpoints, counting its requests into c if c
// is not nil, closed at cleanup.
func newClient(t testing.TB, endpoints []string, c *counter) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if c != nil {
		cfg.DialOptions = c.dialOptions()
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatalf("client of %v: %v", endpoints, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// prefixes hands out a distinct key prefix per store, so that tests sharing
// a server never see each other's keys.
var prefixes atomic.Int64

func newPrefix(t testing.TB) string {
	return fmt.Sprintf("test/%s/%d/", t.Name(), prefixes.Add(1))
}

// openStore returns a store over cli under prefix, closed at cleanup.
func openStore(t testing.TB, cli *clientv3.Client, prefix string, opts ...etcd.Option) *etcd.Store {
	t.Helper()
	s, err := etcd.New(testContext(t), cli, prefix, opts...)
	if err != nil {
		t.Fatalf("etcd.New(%q): %v", prefix, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// server is an etcd the tests run against: a process of the v3.6 or the
// v3.7 server (etcdtest.Process).
type server interface {
	Endpoints() []string
	Client(t testing.TB) *clientv3.Client
	Restart(t testing.TB)
}

// servers runs fn against an etcd v3.6 server process (the version of the
// client go.mod pins) and against an etcd v3.7 server process (etcdtest.ServerBinary: skipped
// locally without one, failed in CI): start starts a server of that kind.
// etcd from v3.7 answers keys-only reads from its index, without leases.
func servers(t *testing.T, fn func(t *testing.T, start func(testing.TB) server)) {
	t.Run("etcd=v3.6", func(t *testing.T) {
		fn(t, func(t testing.TB) server { return etcdtest.Start(t) })
	})
	t.Run("etcd=v3.7", func(t *testing.T) {
		bin := etcdtest.ServerBinary(t)
		fn(t, func(t testing.TB) server { return etcdtest.StartProcess(t, bin) })
	})
}

// fixture is a server with one store on it.
type fixture struct {
	srv    server
	cli    *clientv3.Client // the store's client
	raw    *clientv3.Client // another client, for looking behind the store's back
	reqs   *counter         // the store client's requests
	store  *etcd.Store
	prefix string
}

func newFixture(t testing.TB, opts ...etcd.Option) *fixture {
	t.Helper()
	return newFixtureOn(t, etcdtest.Start(t), opts...)
}

// newFixtureOn is newFixture on srv.
func newFixtureOn(t testing.TB, srv server, opts ...etcd.Option) *fixture {
	t.Helper()
	f := &fixture{srv: srv, reqs: newCounter(), prefix: newPrefix(t)}
	f.cli = newClient(t, f.srv.Endpoints(), f.reqs)
	f.raw = f.srv.Client(t)
	f.store = openStore(t, f.cli, f.prefix, opts...)
	return f
}

// peer opens another store (with its own client) on the fixture's prefix, as
// a second process would.
func (f *fixture) peer(t testing.TB, opts ...etcd.Option) *etcd.Store {
	t.Helper()
	return openStore(t, newClient(t, f.srv.Endpoints(), nil), f.prefix, opts...)
}

// waitFor polls cond on real time until it holds, failing the test after
// limit.
func waitFor(t testing.TB, limit time.Duration, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tk := clock.New().Ticker(pollEvery)
	defer tk.Stop()
	for !cond(ctx) {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %v", what, limit)
		case <-tk.C:
		}
	}
}

// waitAbsent waits until key is absent from s.
func waitAbsent(t testing.TB, s backends.Store, key string, limit time.Duration) {
	t.Helper()
	waitFor(t, limit, fmt.Sprintf("%q gone", key), func(ctx context.Context) bool {
		_, err := s.Get(ctx, key)
		return errors.Is(err, backends.ErrNotFound)
	})
}

// mustCreate creates key or fails the test.
func mustCreate(t testing.TB, s backends.Store, key, value string, ttl time.Duration) backends.Entry {
	t.Helper()
	e, err := s.CreateIfAbsent(testContext(t), key, []byte(value), ttl)
	if err != nil {
		t.Fatalf("CreateIfAbsent(%q, ttl %v): %v", key, ttl, err)
	}
	return e
}

// conflict returns err's *ConflictError or fails the test.
func conflict(t testing.TB, what string, err error) *backends.ConflictError {
	t.Helper()
	var ce *backends.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: error %v, want a *backends.ConflictError", what, err)
	}
	return ce
}
