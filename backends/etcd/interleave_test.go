package etcd_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// hook is a step of a test run inside a store's request; it returns
// whether it fired (it ran its step for this request).
type hook func(method string, req any) bool

// hookClient is a client of a store under test that runs a step of the
// test at a chosen point of the store's requests: after etcd answered a
// unary request and before the store sees the answer (after), or just
// before a lease keep-alive message goes out (send). A hook that fired is
// removed, so each runs once; it runs on one request at a time.
type hookClient struct {
	mu      sync.Mutex
	after   hook // guarded by mu
	send    hook // guarded by mu
	instead hook // guarded by mu
}

func (hc *hookClient) onAfter(h hook) { hc.arm(&hc.after, h) }
func (hc *hookClient) onSend(h hook)  { hc.arm(&hc.send, h) }

// dropOnce makes the first unary request h fires on fail as unavailable
// without reaching etcd: to the store, a write with an unknown outcome.
func (hc *hookClient) dropOnce(h hook) { hc.arm(&hc.instead, h) }

func (hc *hookClient) arm(slot *hook, h hook) {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	*slot = h
}

// run takes the hook in slot, runs it, and puts it back unless it fired
// or another was armed meanwhile. It reports whether the hook fired.
func (hc *hookClient) run(slot *hook, method string, req any) bool {
	hc.mu.Lock()
	h := *slot
	*slot = nil
	hc.mu.Unlock()
	if h == nil {
		return false
	}
	if h(method, req) {
		return true
	}
	hc.mu.Lock()
	if *slot == nil {
		*slot = h
	}
	hc.mu.Unlock()
	return false
}

func (hc *hookClient) client(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if hc.run(&hc.instead, method, req) {
					return status.Error(codes.Unavailable, "dropped by the test")
				}
				err := invoker(ctx, method, req, reply, cc, opts...)
				if err == nil {
					hc.run(&hc.after, method, req)
				}
				return err
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				cs, err := streamer(ctx, desc, cc, method, opts...)
				if err != nil || !strings.HasSuffix(method, "/LeaseKeepAlive") {
					return cs, err
				}
				return &hookedKeepAlive{ClientStream: cs, hc: hc, method: method}, nil
			}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

type hookedKeepAlive struct {
	grpc.ClientStream
	hc     *hookClient
	method string
}

func (s *hookedKeepAlive) SendMsg(m any) error {
	s.hc.run(&s.hc.send, s.method, m)
	return s.ClientStream.SendMsg(m)
}

// putsKey reports whether req is a transaction whose success branch puts
// key: a store's CreateIfAbsent or CompareAndSet of it.
func putsKey(req any, key string) bool {
	txn, ok := req.(*pb.TxnRequest)
	if !ok {
		return false
	}
	for _, op := range txn.Success {
		if p := op.GetRequestPut(); p != nil && string(p.Key) == key {
			return true
		}
	}
	return false
}

// TestForeignChangeSeenBeforeOwnWriteIsRegistered checks that a change of a
// key by another client that the store's watch delivers after the store's own
// write of the key (a create, or a compare-and-set of its own entry)
// committed, but before the writer registered its entry, must withdraw the
// store's word for that entry. A client interceptor runs the step there: once
// etcd answered the create's transaction, another client deletes the key, and
// the step waits until the store's watch has delivered the delete. Before,
// the watch's handler found no entry to withdraw, the write then registered
// its entry as vouched for, and every renewal was one keep-alive of a live
// lease that reported the deleted key held.
func TestForeignChangeSeenBeforeOwnWriteIsRegistered(t *testing.T) {
	servers(t, func(t *testing.T, start func(testing.TB) server) {
		leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
			for _, op := range []string{"create", "cas"} {
				t.Run(op, func(t *testing.T) {
					f := newFixtureOn(t, start(t))
					hc := &hookClient{}
					s := openStore(t, hc.client(t, f.srv.Endpoints()), f.prefix, opts...)
					ctx := testContext(t)
					// An earlier renewal started the store's watch of its prefix.
					renewOnce(t, s, mustCreate(t, s, "other", "v", 2*time.Second))
					write := func() (backends.Entry, error) {
						return s.CreateIfAbsent(ctx, "k", []byte("v"), 2*time.Second)
					}
					if op == "cas" {
						prev := mustCreate(t, s, "k", "v0", 2*time.Second)
						write = func() (backends.Entry, error) {
							return s.CompareAndSet(ctx, "k", prev.Revision, []byte("v"), 2*time.Second)
						}
					}

					var deleted int64
					hc.onAfter(func(method string, req any) bool {
						if !putsKey(req, f.prefix+"k") {
							return false
						}
						del, err := f.raw.Delete(ctx, f.prefix+"k")
						if err != nil || del.Deleted != 1 {
							t.Errorf("delete behind the store's back: %v, %+v", err, del)
							return true
						}
						deleted = del.Header.Revision
						waitFor(t, 10*time.Second, "the store's watch delivers the delete", func(context.Context) bool {
							return s.Seen() >= deleted
						})
						return true
					})
					e, err := write()
					if err != nil {
						t.Fatalf("%s: %v", op, err)
					}
					if deleted == 0 {
						t.Fatalf("the step did not run after the %s's transaction", op)
					}
					if s.Vouched("k", e.Revision) {
						t.Errorf("the store vouches for k at %d, deleted at %d before the write was registered", e.Revision, deleted)
					}
					for i := range 2 {
						if _, err := s.KeepAlive(ctx, "k", e.Revision, 2*time.Second); !errors.Is(err, backends.ErrNotFound) || backends.Classify(err) != backends.ClassLost {
							t.Errorf("renewal %d of k at %d, deleted at %d: %v; want lost (ErrNotFound)", i, e.Revision, deleted, err)
						}
					}
				})
			}
		})
	})
}

// deletesKey reports whether req is a transaction that deletes key: a
// store's CompareAndDelete of it.
func deletesKey(req any, key string) bool {
	txn, ok := req.(*pb.TxnRequest)
	if !ok {
		return false
	}
	for _, op := range txn.Success {
		if d := op.GetRequestDeleteRange(); d != nil && string(d.Key) == key {
			return true
		}
	}
	return false
}

// readsKey reports whether req is a read of key alone.
func readsKey(req any, key string) bool {
	r, ok := req.(*pb.RangeRequest)
	return ok && string(r.Key) == key && len(r.RangeEnd) == 0
}

// TestRenewalAfterUnknownDeleteReadsAfterItsKeepAlive checks that an entry of
// the store's own that a delete with an unknown outcome may still remove is
// no longer vouched for, and its renewal is verified by a read; that read
// must come after the keep-alive's send. Here the delete is applied late,
// just before the keep-alive goes out (a client interceptor runs it there).
// Before, the renewal read the key first, found it, then sent the keep-alive,
// which the lease, still alive, answered: the renewal reported the deleted
// entry held, in both lease modes.
func TestRenewalAfterUnknownDeleteReadsAfterItsKeepAlive(t *testing.T) {
	servers(t, func(t *testing.T, start func(testing.TB) server) {
		leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
			f := newFixtureOn(t, start(t))
			hc := &hookClient{}
			s := openStore(t, hc.client(t, f.srv.Endpoints()), f.prefix, opts...)
			ctx := testContext(t)
			e := mustCreate(t, s, "k", "v", 2*time.Second)
			renewOnce(t, s, e)

			hc.dropOnce(func(_ string, req any) bool { return deletesKey(req, f.prefix+"k") })
			if err := s.CompareAndDelete(ctx, "k", e.Revision); backends.Classify(err) != backends.ClassTransient {
				t.Fatalf("CompareAndDelete whose request is dropped = %v, want a transient error (outcome unknown)", err)
			}
			if s.Vouched("k", e.Revision) {
				t.Fatal("the store still vouches for an entry a delete with an unknown outcome may remove")
			}
			var applied bool
			hc.onSend(func(string, any) bool {
				// The delete with the unknown outcome is applied now.
				resp, err := f.raw.Txn(ctx).
					If(clientv3.Compare(clientv3.ModRevision(f.prefix+"k"), "=", e.Revision)).
					Then(clientv3.OpDelete(f.prefix + "k")).Commit()
				applied = err == nil && resp.Succeeded
				return true
			})
			_, err := s.KeepAlive(ctx, "k", e.Revision, 2*time.Second)
			if !applied {
				t.Fatal("the late delete did not run before the keep-alive's send")
			}
			if !errors.Is(err, backends.ErrNotFound) || backends.Classify(err) != backends.ClassLost {
				t.Errorf("renewal whose keep-alive was sent after its entry's delete = %v, want lost (ErrNotFound)", err)
			}
		})
	})
}

// TestRenewalOfPeersEntryReadsAfterItsKeepAlive checks that a store never
// vouches for a peer's entry, and the peer may release it at any time (within
// the rule). A release just before the renewal's keep-alive goes out (a
// client interceptor runs it there) makes the renewal lost, on the first
// renewal (which reads the key first, to learn its lease) and on a later one.
// Before, the renewal read the key, then sent the keep-alive, which the
// lease, still alive after the release, answered: the renewal reported the
// released entry held, with a full TTL.
func TestRenewalOfPeersEntryReadsAfterItsKeepAlive(t *testing.T) {
	servers(t, func(t *testing.T, start func(testing.TB) server) {
		for _, first := range []bool{true, false} {
			name := map[bool]string{true: "first", false: "later"}[first]
			t.Run(name, func(t *testing.T) {
				leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
					f := newFixtureOn(t, start(t))
					hc := &hookClient{}
					s := openStore(t, hc.client(t, f.srv.Endpoints()), f.prefix, opts...)
					writer := f.peer(t)
					ctx := testContext(t)
					// 5 s: a first renewal of a peer's entry needs more than
					// its guard left (TestFirstKeepAliveOfAPeersEntry).
					e := mustCreate(t, writer, "k", "v", 5*time.Second)
					if !first {
						if _, err := s.KeepAlive(ctx, "k", e.Revision, 5*time.Second); err != nil {
							t.Fatalf("renewal of the peer's entry: %v", err)
						}
					}
					var released bool
					hc.onSend(func(string, any) bool {
						released = writer.CompareAndDelete(ctx, "k", e.Revision) == nil
						return true
					})
					_, err := s.KeepAlive(ctx, "k", e.Revision, 5*time.Second)
					if !released {
						t.Fatal("the peer's release did not run before the keep-alive's send")
					}
					if !errors.Is(err, backends.ErrNotFound) || backends.Classify(err) != backends.ClassLost {
						t.Errorf("renewal whose keep-alive was sent after the peer released the entry = %v, want lost (ErrNotFound)", err)
					}
				})
			})
		}
	})
}

// TestFirstRenewalOfReleasedEntryIsLost checks that the first renewal of a
// peer's entry reads the key to learn its lease, then asks etcd which keys
// the lease carries. If the peer released the entry in between (a client
// interceptor runs the release right after the read was answered), the lease
// carries no key: the claim is lost. Before, that answered ErrUnsupported
// (fatal), as for a lease that carries other keys, and an elector backed off
// as if the store were broken.
func TestFirstRenewalOfReleasedEntryIsLost(t *testing.T) {
	servers(t, func(t *testing.T, start func(testing.TB) server) {
		f := newFixtureOn(t, start(t))
		hc := &hookClient{}
		s := openStore(t, hc.client(t, f.srv.Endpoints()), f.prefix)
		writer := f.peer(t)
		ctx := testContext(t)
		e := mustCreate(t, writer, "k", "v", 5*time.Second)
		var released bool
		hc.onAfter(func(_ string, req any) bool {
			if !readsKey(req, f.prefix+"k") {
				return false
			}
			released = writer.CompareAndDelete(ctx, "k", e.Revision) == nil
			return true
		})
		_, err := s.KeepAlive(ctx, "k", e.Revision, 5*time.Second)
		if !released {
			t.Fatal("the peer's release did not run after the renewal's read")
		}
		if !errors.Is(err, backends.ErrNotFound) || backends.Classify(err) != backends.ClassLost {
			t.Errorf("first renewal of an entry released after its read = %v, want lost (ErrNotFound)", err)
		}
	})
}
