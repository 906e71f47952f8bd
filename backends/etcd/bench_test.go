package etcd_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/elector"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The benchmarks compare the store with etcd's own concurrency.Election, on
// the same etcd server process in the same run, with the lease the peers table of
// the project's facts uses: 2 s.
const (
	benchTTL = 2 * time.Second
	// benchRenew is how often a holder renews: the elector's default,
	// TTL/3, jittered downward by up to 15% like the elector's.
	benchRenew = benchTTL / 3
	// benchWindow is how long a request rate is measured, after one TTL of
	// warm-up.
	benchWindow = 4 * time.Second
)

// BenchmarkHeldClaims measures the requests per second one process sends to
// etcd, at steady state, while it holds n claims (each on its own key) and
// renews each every TTL/3. Compared: the store with a lease per entry and
// with one shared lease (WithSharedLease), renewed by a plain loop per claim
// and by n electors (package elector, default timings), and etcd's
// concurrency.Election with a session (lease) per election or one session
// for all. Requests are counted by a gRPC client interceptor: one per unary
// call, one per message sent on a stream. Run with -benchtime=1x; the metric
// is req/s.
func BenchmarkHeldClaims(b *testing.B) {
	srv := etcdtest.Start(b)
	impls := []struct {
		name string
		hold func(b *testing.B, cli *clientv3.Client, prefix string, n int) (stop func())
	}{
		{"store=per-entry-lease", holdStore()},
		{"store=shared-lease", holdStore(etcd.WithSharedLease(0))},
		{"elector=per-entry-lease", holdElectors()},
		{"elector=shared-lease", holdElectors(etcd.WithSharedLease(0))},
		{"etcd-election=session-each", holdElections(false)},
		{"etcd-election=one-session", holdElections(true)},
	}
	for _, n := range []int{1, 100, 1000} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("%s/claims=%d", impl.name, n), func(b *testing.B) {
				reqs := newCounter()
				cli := newClient(b, srv.Endpoints(), reqs)
				stop := impl.hold(b, cli, newPrefix(b), n)
				defer stop()
				wait(b, benchTTL) // every claim renewed at least once: steady state
				for i := 0; i < b.N; i++ {
					reqs.reset()
					wait(b, benchWindow)
					got := reqs.Load()
					b.ReportMetric(float64(got)/benchWindow.Seconds(), "req/s")
					if n == 1000 || testing.Verbose() {
						b.Logf("%s, %d claims: %d requests in %v (%s)", impl.name, n, got, benchWindow, reqs)
					}
				}
			})
		}
	}
}

// wait blocks for d of real time.
func wait(b testing.TB, d time.Duration) {
	b.Helper()
	<-clock.New().After(d)
}

// holdStore creates n claims through a StoreLocker and renews each on its own
// goroutine every benchRenew (jittered), as n electors would.
func holdStore(opts ...etcd.Option) func(b *testing.B, cli *clientv3.Client, prefix string, n int) func() {
	return func(b *testing.B, cli *clientv3.Client, prefix string, n int) func() {
		s := openStore(b, cli, prefix, opts...)
		locker, err := backends.NewLocker(s)
		if err != nil {
			b.Fatal(err)
		}
		holder, err := backends.NewHolder("bench")
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		wall := clock.New()
		for i := 0; i < n; i++ {
			lease, err := locker.TryAcquire(ctx, fmt.Sprintf("claims/%04d", i), holder, benchTTL)
			if err != nil {
				b.Fatalf("acquire %d: %v", i, err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					t := wall.Timer(benchRenew - time.Duration(rand.Int64N(int64(benchRenew*15/100))))
					select {
					case <-ctx.Done():
						t.Stop()
						return
					case <-t.C:
					}
					rctx, rcancel := context.WithTimeout(ctx, benchRenew)
					next, err := locker.Renew(rctx, lease)
					rcancel()
					if err != nil {
						if ctx.Err() == nil {
							mu.Lock()
							if firstErr == nil {
								firstErr = err
							}
							mu.Unlock()
						}
						continue
					}
					lease = next
				}
			}()
		}
		return func() {
			cancel()
			wg.Wait()
			if firstErr != nil {
				b.Errorf("a renewal failed: %v", firstErr)
			}
		}
	}
}

// holdElections wins n etcd elections (each on its own prefix), with a
// session each or one shared session; the sessions' leases are kept alive
// by the client's own keep-alive stream.
func holdElections(shareSession bool) func(b *testing.B, cli *clientv3.Client, prefix string, n int) func() {
	return func(b *testing.B, cli *clientv3.Client, prefix string, n int) func() {
		ctx := testContext(b)
		var sessions []*concurrency.Session
		newSession := func() *concurrency.Session {
			s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(benchTTL/time.Second)))
			if err != nil {
				b.Fatalf("session: %v", err)
			}
			sessions = append(sessions, s)
			return s
		}
		var shared *concurrency.Session
		if shareSession {
			shared = newSession()
		}
		for i := 0; i < n; i++ {
			s := shared
			if s == nil {
				s = newSession()
			}
			e := concurrency.NewElection(s, fmt.Sprintf("%selections/%04d", prefix, i))
			if err := e.Campaign(ctx, "bench"); err != nil {
				b.Fatalf("campaign %d: %v", i, err)
			}
		}
		return func() {
			for _, s := range sessions {
				s.Close()
			}
		}
	}
}

// holdElectors runs n electors, each for its own key, over one store, and
// waits until all of them lead.
func holdElectors(opts ...etcd.Option) func(b *testing.B, cli *clientv3.Client, prefix string, n int) func() {
	return func(b *testing.B, cli *clientv3.Client, prefix string, n int) func() {
		s := openStore(b, cli, prefix, opts...)
		locker, err := backends.NewLocker(s)
		if err != nil {
			b.Fatal(err)
		}
		var leading sync.WaitGroup
		leading.Add(n)
		els := make([]*elector.Elector, n)
		for i := range els {
			var once sync.Once
			el, err := elector.New(locker, elector.Config{
				Key:      fmt.Sprintf("claims/%04d", i),
				Identity: "bench",
				TTL:      benchTTL,
				OnElected: func(ctx context.Context, _ elector.Term) {
					once.Do(leading.Done)
				},
			})
			if err != nil {
				b.Fatal(err)
			}
			if err := el.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			els[i] = el
		}
		leading.Wait()
		return func() {
			var wg sync.WaitGroup
			for _, el := range els {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_ = el.Stop(context.Background())
				}()
			}
			wg.Wait()
		}
	}
}
