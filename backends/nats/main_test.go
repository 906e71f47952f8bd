package nats

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/backends/nats/natstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, natstest.LeakOptions()...)
}

// bucketSeq names each test's bucket uniquely within the process.
var bucketSeq atomic.Int64

func newBucketName() string { return fmt.Sprintf("t%d", bucketSeq.Add(1)) }

// connect dials urls (comma-separated) as a client of its own, closed by
// t.Cleanup. It retries for ever, so that clients ride out restarts and
// partitions.
func connect(t testing.TB, urls string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.RetryOnFailedConnect(false))
	if err != nil {
		t.Fatalf("connect %s: %v", urls, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// open opens a Store over bucket through a connection of its own, as
// another process would, creating the bucket with replicas if needed.
func open(t testing.TB, urls, bucket string, replicas int, opts ...Option) *Store {
	t.Helper()
	nc := connect(t, urls)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, nc, bucket, append([]Option{WithCreate(replicas)}, opts...)...)
	if err != nil {
		t.Fatalf("New(%s, %q): %v", urls, bucket, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// fleet is every store a test opened, so that moving a fake clock can first
// bring every store's sightings up to date.
type fleet struct {
	mu     sync.Mutex
	stores []*Store // guarded by mu
}

func (f *fleet) add(s *Store) {
	f.mu.Lock()
	f.stores = append(f.stores, s)
	f.mu.Unlock()
}

// observe has every open store read every key of its bucket, so that each
// has seen the current message of each key before time passes.
func (f *fleet) observe(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	all := append([]*Store(nil), f.stores...)
	f.mu.Unlock()
	for _, s := range all {
		if err := s.checkOpen("list", ""); err != nil {
			continue
		}
		if _, err := s.List(context.Background(), ""); err != nil {
			t.Errorf("observe: List on bucket %s: %v", s.bucket, err)
		}
	}
}

// within is a context that ends after d, or when t ends: a bound on a
// wait, never a timing assertion.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitUntil polls cond every 10ms until it holds, failing t after limit.
func waitUntil(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tk := time.NewTicker(10 * time.Millisecond)
	defer tk.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %v", what, limit)
		case <-tk.C:
		}
	}
}
