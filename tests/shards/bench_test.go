package servertest

import (
	"context"
	"flag"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/shardstest"
)

var steadyWindow = flag.Duration("shards.steady", 20*time.Second, "how long BenchmarkEtcdSteady counts requests per iteration")

// BenchmarkEtcdLeave measures what happens when a member owning 64 of 256
// shards (four members) leaves gracefully, with a lease per claim and with
// one shared lease per member.
func BenchmarkEtcdLeave(b *testing.B) {
	b.Run("lease-per-claim", func(b *testing.B) { shardstest.BenchLeave(b, 256, 4, timing(), etcdStores(b)) })
	b.Run("shared-lease", func(b *testing.B) {
		shardstest.BenchLeave(b, 256, 4, timing(), etcdStores(b, etcd.WithSharedLease(0)))
	})
}

// BenchmarkEtcdCrash measures what happens when a member owning 64 of 256
// shards is cut off from etcd, as a crashed process is.
func BenchmarkEtcdCrash(b *testing.B) {
	b.Run("lease-per-claim", func(b *testing.B) { shardstest.BenchCrash(b, 256, 4, timing(), etcdStores(b)) })
	b.Run("shared-lease", func(b *testing.B) {
		shardstest.BenchCrash(b, 256, 4, timing(), etcdStores(b, etcd.WithSharedLease(0)))
	})
}

// BenchmarkEtcdScale measures 32 members of a group of 10,000 shards
// (with -short, 8 members of 2,000) over one etcd server process, each
// member with a client and a shared lease of its own, with the elector's
// default timings (TTL 15 s, renewals every 5 s): convergence, a graceful
// leave and a crash, as shardstest.BenchScale measures them on memstore,
// and the requests per second per member once converged (req/s/member,
// over -shards.steady). It runs with the shared lease's default batch
// interval and with a batch of 1 s: at the default timings the elector's
// renewal grid has a step of 750 ms (Jitter × RenewPeriod), and a batch
// shorter than the step sends a keep-alive at each point of the grid that
// renewals land on, a longer one one keep-alive for two of them. Run it
// with -benchtime=1x.
func BenchmarkEtcdScale(b *testing.B) {
	count, members := 10000, 32
	if testing.Short() {
		count, members = 2000, 8
	}
	for _, batch := range []time.Duration{etcd.DefaultSharedBatch, time.Second} {
		b.Run(fmt.Sprintf("S=%d/M=%d/batch=%v", count, members, batch), func(b *testing.B) {
			srv := etcdtest.Start(b)
			var c counter
			newStore := countedStores(b, srv, &c, batch)
			shardstest.BenchScale(b, count, members, elector.Config{}, newStore, shardstest.Steady{Requests: c.n.Load, Window: *steadyWindow})
		})
	}
}

// countedStores returns a store factory over srv whose stores each have a
// client of their own, counted by c, and a shared lease batched every
// batch.
func countedStores(b *testing.B, srv *etcdtest.Server, c *counter, batch time.Duration) func(int) backends.Store {
	return func(int) backends.Store {
		cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(), DialOptions: c.dialOptions()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cli.Close() })
		s, err := etcd.New(context.Background(), cli, "/tenure/", etcd.WithSharedLease(batch))
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
}

// counter counts the gRPC requests of the clients it is dialled into: each
// unary call and each message sent on a stream (a lease keep-alive, a watch
// request).
type counter struct{ n atomic.Int64 }

func (c *counter) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			c.n.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return &countingStream{ClientStream: cs, c: c}, nil
		}),
	}
}

type countingStream struct {
	grpc.ClientStream
	c *counter
}

func (s *countingStream) SendMsg(m any) error {
	s.c.n.Add(1)
	return s.ClientStream.SendMsg(m)
}

// BenchmarkEtcdSteady counts every etcd request of four members holding S
// shards (S/4 each, and their memberships) once they have settled, over
// -shards.steady per iteration, with the elector's default timings (TTL 15
// s, renewals every 5 s) and a shared lease per member, batched every
// interval. It reports req/s for the four members together: with a shared
// lease it should not grow with S.
func BenchmarkEtcdSteady(b *testing.B) {
	for _, c := range []struct {
		count    int
		interval time.Duration
	}{{64, etcd.DefaultSharedBatch}, {256, etcd.DefaultSharedBatch}, {256, 2 * time.Second}} {
		count, interval := c.count, c.interval
		b.Run(fmt.Sprintf("S=%d/batch=%v", count, interval), func(b *testing.B) {
			srv := etcdtest.Start(b)
			var c counter
			newStore := countedStores(b, srv, &c, interval)
			g := shardstest.New(b, count, elector.Config{}, newStore)
			ids := []string{"m0", "m1", "m2", "m3"}
			for _, id := range ids {
				g.Add(id)
			}
			g.Await("settle", time.Minute, ids...)
			// Let the acquisitions' renewals settle into their rhythm.
			<-time.After(elector.DefaultTTL)
			b.ResetTimer()
			var total int64
			var elapsed time.Duration
			for range b.N {
				before, start := c.n.Load(), time.Now()
				<-time.After(*steadyWindow)
				total += c.n.Load() - before
				elapsed += time.Since(start)
				if !g.Settled(ids...) {
					b.Fatal("ownership changed during the steady window")
				}
			}
			b.ReportMetric(float64(total)/elapsed.Seconds(), "req/s")
		})
	}
}
