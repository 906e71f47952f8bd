package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// renewOnce keeps e alive once, which starts the store's watch of its
// entries, and waits until that watch is established.
func renewOnce(t *testing.T, s *etcd.Store, e backends.Entry) {
	t.Helper()
	if _, err := s.KeepAlive(testContext(t), e.Key, e.Revision, e.TTL); err != nil {
		t.Fatalf("KeepAlive(%q, rev %d): %v", e.Key, e.Revision, err)
	}
	waitFor(t, 10*time.Second, "the store's watch of its entries", func(context.Context) bool { return s.Watching() })
}

// TestRenewalCostsOneRequest checks that renewing an entry the store wrote is
// one keep-alive message and nothing else, in both lease modes. Before, each
// renewal also read the key to verify its revision: two requests.
func TestRenewalCostsOneRequest(t *testing.T) {
	leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
		f := newFixture(t, opts...)
		ctx := testContext(t)
		e := mustCreate(t, f.store, "claim", "v", 2*time.Second)
		// The first renewal also starts the store's watch of its entries:
		// one request, once per store, perhaps counted after the reset.
		if _, err := f.store.KeepAlive(ctx, "claim", e.Revision, 2*time.Second); err != nil {
			t.Fatalf("first KeepAlive: %v", err)
		}
		f.reqs.reset()
		const n = 5
		for i := 0; i < n; i++ {
			got, err := f.store.KeepAlive(ctx, "claim", e.Revision, 2*time.Second)
			if err != nil || got.Revision != e.Revision || got.CreateRevision != e.CreateRevision || string(got.Value) != "v" {
				t.Fatalf("KeepAlive %d = %+v, %v; want revision %d, value v", i, got, err, e.Revision)
			}
		}
		if got, ka, w := f.reqs.Load(), f.reqs.of("LeaseKeepAlive"), f.reqs.of("Watch"); ka != n || got-w != n || w > 1 {
			t.Errorf("%d renewals cost %d requests (%s), want %d keep-alives and nothing else", n, got, f.reqs, n)
		}
	})
}

// TestSharedBatchIsOneKeepAlive checks that a batch of renewals on the shared
// lease is one keep-alive message, whatever the number of entries. Before,
// each batch also read the entries' keys.
func TestSharedBatchIsOneKeepAlive(t *testing.T) {
	f := newFixture(t, etcd.WithSharedLease(0))
	const n = 50
	entries := make([]backends.Entry, n)
	for i := range entries {
		entries[i] = mustCreate(t, f.store, fmt.Sprintf("claims/%03d", i), "v", 2*time.Second)
	}
	ctx := testContext(t)
	// The first renewal also starts the store's watch of its entries: one
	// request, once per store, perhaps counted after the reset.
	if _, err := f.store.KeepAlive(ctx, entries[0].Key, entries[0].Revision, 2*time.Second); err != nil {
		t.Fatalf("first KeepAlive: %v", err)
	}
	f.reqs.reset()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = f.store.KeepAlive(ctx, e.Key, e.Revision, 2*time.Second)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("KeepAlive(%q): %v", entries[i].Key, err)
		}
	}
	// The first call may start a batch at once, and the others wait for
	// the next: at most two batches, each one keep-alive.
	if got, ka, w := f.reqs.Load(), f.reqs.of("LeaseKeepAlive"), f.reqs.of("Watch"); got-w != ka || ka > 2 || w > 1 {
		t.Errorf("%d renewals cost %d requests (%s), want at most 2 keep-alives and nothing else", n, got, f.reqs)
	}
}

// TestKeepAliveCatchesForeignChange checks that a renewal vouches for an
// entry on the rule that only its writer and its lease's expiry change it. A
// change by anyone else is outside that rule; the store's watch catches it,
// and from then on the entry's renewals fail: a deleted one is lost, a
// rewritten one a conflict that reports the rewrite.
func TestKeepAliveCatchesForeignChange(t *testing.T) {
	servers(t, func(t *testing.T, start func(testing.TB) server) {
		leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
			f := newFixtureOn(t, start(t), opts...)
			ctx := testContext(t)
			peer := f.peer(t)
			a := mustCreate(t, f.store, "a", "v", 2*time.Second)
			b := mustCreate(t, f.store, "b", "v", 2*time.Second)
			renewOnce(t, f.store, a)
			if !f.store.Vouched("a", a.Revision) || !f.store.Vouched("b", b.Revision) {
				t.Fatal("the store does not vouch for the entries it wrote")
			}

			// Out of the rule: another store rewrites a, a client deletes b.
			put, err := peer.CompareAndSet(ctx, "a", a.Revision, []byte("other"), 2*time.Second)
			if err != nil {
				t.Fatalf("peer CompareAndSet: %v", err)
			}
			del, err := f.raw.Delete(ctx, f.prefix+"b")
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the store's watch sees the changes", func(context.Context) bool {
				return f.store.Seen() >= del.Header.Revision
			})
			if f.store.Vouched("a", a.Revision) || f.store.Vouched("b", b.Revision) {
				t.Error("the store still vouches for entries changed behind its back")
			}

			_, err = f.store.KeepAlive(ctx, "a", a.Revision, 2*time.Second)
			if ce := conflict(t, "KeepAlive of a rewritten entry", err); !ce.Found || ce.Current.Revision != put.Revision || string(ce.Current.Value) != "other" {
				t.Errorf("KeepAlive of a rewritten entry: conflict %+v, want current revision %d, value other", ce, put.Revision)
			}
			if _, err := f.store.KeepAlive(ctx, "b", b.Revision, 2*time.Second); !errors.Is(err, backends.ErrNotFound) || backends.Classify(err) != backends.ClassLost {
				t.Errorf("KeepAlive of a deleted entry = %v, want lost (ErrNotFound)", err)
			}
		})
	})
}

// TestKeepAliveByPeerIsVerified checks that a store never vouches for an
// entry it did not write: its writer may delete it at any time (a holder
// releasing what it holds is within the rule). A peer renewing it right after
// the delete, before any watch could tell it, finds it lost.
func TestKeepAliveByPeerIsVerified(t *testing.T) {
	servers(t, func(t *testing.T, start func(testing.TB) server) {
		leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
			f := newFixtureOn(t, start(t), opts...)
			ctx := testContext(t)
			peer := f.peer(t, opts...)
			// 5 s: a peer's first renewal is guarded by the whole seconds
			// etcd reports left (TestFirstKeepAliveOfAPeersEntry).
			e := mustCreate(t, f.store, "k", "v", 5*time.Second)
			if _, err := peer.KeepAlive(ctx, "k", e.Revision, 5*time.Second); err != nil {
				t.Fatalf("peer KeepAlive: %v", err)
			}
			if peer.Vouched("k", e.Revision) {
				t.Error("a peer vouches for an entry it did not write")
			}
			if err := f.store.CompareAndDelete(ctx, "k", e.Revision); err != nil {
				t.Fatalf("CompareAndDelete: %v", err)
			}
			if _, err := peer.KeepAlive(ctx, "k", e.Revision, 5*time.Second); !errors.Is(err, backends.ErrNotFound) || backends.Classify(err) != backends.ClassLost {
				t.Errorf("peer KeepAlive after the writer's delete = %v, want lost (ErrNotFound)", err)
			}
		})
	})
}

// TestKeepAliveDuringOwnDelete checks that a delete of the store's own,
// applied by etcd before a keep-alive's send but not yet answered when the
// keep-alive is, must not let the keep-alive vouch for the deleted entry. The
// delete begins between the store's check and the keep-alive's send (a client
// interceptor runs it there), and its answer is held back until the
// keep-alive returns.
func TestKeepAliveDuringOwnDelete(t *testing.T) {
	servers(t, func(t *testing.T, start func(testing.TB) server) {
		leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
			f := newFixtureOn(t, start(t))
			rc := &raceClient{applied: make(chan struct{}), release: make(chan struct{})}
			s := openStore(t, rc.client(t, f.srv.Endpoints()), f.prefix, opts...)
			ctx := testContext(t)
			e := mustCreate(t, s, "k", "v", 2*time.Second)
			renewOnce(t, s, e)

			delErr := make(chan error, 1)
			rc.onSend = func() {
				rc.holdTxn.Store(true)
				go func() { delErr <- s.CompareAndDelete(ctx, "k", e.Revision) }()
				<-rc.applied
			}
			// The store's watch would see the delete too, perhaps before the
			// keep-alive's answer: hold it back, so that the store knows of
			// the delete only as its own write in flight.
			rc.holdWatch.Store(true)
			rc.armed.Store(true)
			_, err := s.KeepAlive(ctx, "k", e.Revision, 2*time.Second)
			close(rc.release)
			if err := <-delErr; err != nil {
				t.Fatalf("CompareAndDelete: %v", err)
			}
			if !errors.Is(err, backends.ErrNotFound) || backends.Classify(err) != backends.ClassLost {
				t.Errorf("KeepAlive sent after its entry's delete was applied = %v, want lost (ErrNotFound)", err)
			}
		})
	})
}

// raceClient is a client whose next keep-alive message, once armed, first
// runs onSend; whose next transaction, once holdTxn is set, is applied by
// etcd, reported on applied, and answered only after release is closed;
// and whose watch streams, once holdWatch is set, deliver nothing more
// until release is closed.
type raceClient struct {
	armed, holdTxn   atomic.Bool
	holdWatch        atomic.Bool
	onSend           func()
	applied, release chan struct{}
}

func (rc *raceClient) client(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				err := invoker(ctx, method, req, reply, cc, opts...)
				if strings.HasSuffix(method, "/Txn") && rc.holdTxn.CompareAndSwap(true, false) {
					close(rc.applied)
					<-rc.release
				}
				return err
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				cs, err := streamer(ctx, desc, cc, method, opts...)
				if err != nil {
					return cs, err
				}
				switch {
				case strings.HasSuffix(method, "/LeaseKeepAlive"):
					return &raceStream{ClientStream: cs, rc: rc}, nil
				case strings.HasSuffix(method, "/Watch"):
					return &heldWatch{ClientStream: cs, rc: rc}, nil
				}
				return cs, nil
			}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

type raceStream struct {
	grpc.ClientStream
	rc *raceClient
}

func (s *raceStream) SendMsg(m any) error {
	if s.rc.armed.CompareAndSwap(true, false) {
		s.rc.onSend()
	}
	return s.ClientStream.SendMsg(m)
}

// heldWatch holds back what a watch stream receives while holdWatch is set,
// until release is closed.
type heldWatch struct {
	grpc.ClientStream
	rc *raceClient
}

func (s *heldWatch) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if s.rc.holdWatch.Load() {
		<-s.rc.release
	}
	return err
}

// TestKeepAliveAfterCompaction checks that when etcd compacted revisions the
// store's watch had not yet delivered, the store withdraws its word for its
// entries (a change among those revisions would go unseen), and a read that
// finds an entry unchanged gives it back: the renewal after that read is one
// keep-alive again.
func TestKeepAliveAfterCompaction(t *testing.T) {
	servers(t, func(t *testing.T, start func(testing.TB) server) {
		f := newFixtureOn(t, start(t))
		ctx := testContext(t)
		e := mustCreate(t, f.store, "k", "v", 2*time.Second)
		put, err := f.raw.Put(ctx, f.prefix+"other", "v")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.raw.Compact(ctx, put.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
		// The first renewal starts the watch from e's revision, compacted.
		if _, err := f.store.KeepAlive(ctx, "k", e.Revision, 2*time.Second); err != nil {
			t.Fatalf("KeepAlive: %v", err)
		}
		waitFor(t, 10*time.Second, "the store withdraws its word after the compaction", func(context.Context) bool {
			return !f.store.Vouched("k", e.Revision)
		})
		waitFor(t, 10*time.Second, "the store's watch is established again", func(context.Context) bool { return f.store.Watching() })
		f.reqs.reset()
		if _, err := f.store.KeepAlive(ctx, "k", e.Revision, 2*time.Second); err != nil {
			t.Fatalf("KeepAlive after the compaction: %v", err)
		}
		if got := f.reqs.of("Range"); got != 1 {
			t.Errorf("renewal after the compaction read %d times (%s), want once", got, f.reqs)
		}
		if !f.store.Vouched("k", e.Revision) {
			t.Fatal("the store does not vouch for an entry a read found unchanged after the compaction")
		}
		f.reqs.reset()
		if _, err := f.store.KeepAlive(ctx, "k", e.Revision, 2*time.Second); err != nil {
			t.Fatalf("KeepAlive: %v", err)
		}
		if got, ka := f.reqs.Load(), f.reqs.of("LeaseKeepAlive"); got != 1 || ka != 1 {
			t.Errorf("renewal after the store vouches again cost %d requests (%s), want one keep-alive", got, f.reqs)
		}
	})
}
