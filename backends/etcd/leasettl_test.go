package etcd_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// TestListAsksLeasesAtOnce lists entries on five leases of their own, with
// every lease TTL request held until all five are in flight: a listing
// waits for one round trip of them, not one per lease (it sent them one
// after the other, and the first one's wait for the others ran out).
func TestListAsksLeasesAtOnce(t *testing.T) {
	const n = 5
	srv := etcdtest.Start(t)
	prefix := newPrefix(t)
	writer := openStore(t, newClient(t, srv.Endpoints(), nil), prefix)
	for i := range n {
		mustCreate(t, writer, "k"+string(rune('a'+i)), "v", 10*time.Second)
	}

	var mu sync.Mutex
	inFlight, most := 0, 0
	all := make(chan struct{})
	hold := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if !strings.HasSuffix(method, "/LeaseTimeToLive") {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		if most == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-ctx.Done():
		case <-time.After(5 * time.Second): // bounds the failure, never the success
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(), DialOptions: []grpc.DialOption{hold}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	reader := openStore(t, cli, prefix)
	es, err := reader.List(testContext(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != n {
		t.Fatalf("listed %d entries, want %d", len(es), n)
	}
	for _, e := range es {
		if e.TTL != 10*time.Second || e.Remaining <= 0 {
			t.Errorf("%s: TTL %v, remaining %v, want 10s and some left", e.Key, e.TTL, e.Remaining)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != n {
		t.Errorf("at most %d lease TTL requests in flight at once, want %d", most, n)
	}
}
