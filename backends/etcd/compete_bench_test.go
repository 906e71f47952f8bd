package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/internal/testrig/storebench"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// BenchmarkCompetingClaims measures what elections with competitors cost:
// BenchmarkCompetingClaims runs n claims, three candidates for each, one per
// process (each process its own client, and for tenure its own store, running
// one candidate of every claim). TTL 2 s; tenure renews and retries every 500
// ms and its followers wait on the watch; etcd's concurrency.Election keeps
// its sessions alive every TTL/3 and its followers wait on the watch.
// Compared in the same run, on one server with etcd's default timings and
// fsync: tenure with a lease per claim and with one shared lease per process,
// and Election with a session per candidate and with one session per process.
//
// Tenure runs with its electors named two ways: names=per-process, one
// Identity per process, and names=per-claim, each claim's elector named on
// its own (as a program may well do); the cost must not depend on it.
//
// Metrics: req/s, the requests the three clients send (a gRPC client
// interceptor: one per unary call, one per message sent on a stream);
// cpu-ms/s, the CPU time of the whole test process and of its etcd server per
// second; terms, the elections won during the window (0 for a steady
// leader); req/renewal, for tenure, the requests per renewal its electors
// made in the window. The window (6 s, after one TTL) and tenure's fleet
// are tests/storebench's, which measures the etcd store beside the
// other stores the same way. Run with -benchtime=1x.
//
// Then, on the same server, graceful handover (as BenchmarkHandover
// measures it, competeHandovers rounds) for tenure in both lease modes
// (with a shared lease, candidates that hold nothing else, whose lease
// idles between their terms, and candidates that lead a claim of their own
// on the same store, whose lease its renewals keep alive) and for
// Election: p50-ms and max-ms from the moment the leader stopped acting to
// the moment the next one learns it leads.
func BenchmarkCompetingClaims(b *testing.B) {
	srv := etcdtest.Start(b, etcdtest.DefaultTimings())
	impls := []struct {
		name  string
		start func(b *testing.B, clis []*clientv3.Client, prefix string, n int, c *competeCounts) (stop func())
	}{
		{"tenure=per-claim-lease/names=per-process", competeTenure(false)},
		{"tenure=per-claim-lease/names=per-claim", competeTenure(true)},
		{"tenure=shared-lease/names=per-process", competeTenure(false, etcd.WithSharedLease(0))},
		{"tenure=shared-lease/names=per-claim", competeTenure(true, etcd.WithSharedLease(0))},
		{"etcd-election=session-each", competeElections(false)},
		{"etcd-election=session-per-process", competeElections(true)},
	}
	for _, n := range []int{1, 100} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("%s/claims=%d", impl.name, n), func(b *testing.B) {
				reqs := newCounter()
				clis := make([]*clientv3.Client, candidates)
				for i := range clis {
					clis[i] = newClient(b, srv.Endpoints(), reqs)
				}
				var c competeCounts
				stop := impl.start(b, clis, newPrefix(b), n, &c)
				defer stop()
				wait(b, benchTTL) // steady state
				cfg := storebench.Default()
				cfg.Settle = 0
				for i := 0; i < b.N; i++ {
					reqs.reset()
					storebench.Window(b, cfg, storebench.Meters{
						Requests: reqs.Load,
						CPU:      []storebench.CPUMeter{{Unit: "cpu-ms/s", Used: func() time.Duration { return storebench.ProcessCPU() + srv.CPU() }}},
					}, c.terms, c.renewals, b.ReportMetric)
					b.Logf("%s, %d claims × %d candidates: %s", impl.name, n, candidates, reqs)
				}
			})
		}
	}
	for _, impl := range campaignImpls() {
		b.Run("handover/"+impl.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				measureHandover(b, srv, impl, competeHandovers)
			}
		})
	}
}

// competeHandovers is how many graceful handovers BenchmarkCompetingClaims
// measures per implementation.
const competeHandovers = 15

// competeCounts is what the candidates of one run report: tenure's
// fleet, or the elections etcd's candidates won.
type competeCounts struct {
	fleet *storebench.Fleet // tenure
	won   atomic.Int64      // etcd's Election
}

// terms is how many terms the candidates have begun.
func (c *competeCounts) terms() int64 {
	if c.fleet != nil {
		return c.fleet.Won()
	}
	return c.won.Load()
}

// renewals is how many renewals extended a term (tenure only).
func (c *competeCounts) renewals() int64 {
	if c.fleet != nil {
		return c.fleet.Renewed()
	}
	return 0
}

// competeTenure runs, in each process (client), a store and one elector per
// claim (the shared fleet of tests/storebench), and waits until every
// claim has a leader. With namePerClaim each claim's elector has an
// Identity of its own; otherwise every elector of a process has the
// process's.
func competeTenure(namePerClaim bool, opts ...etcd.Option) func(b *testing.B, clis []*clientv3.Client, prefix string, n int, c *competeCounts) func() {
	return func(b *testing.B, clis []*clientv3.Client, prefix string, n int, c *competeCounts) func() {
		stores := make([]backends.Store, len(clis))
		for p, cli := range clis {
			stores[p] = openStore(b, cli, prefix, opts...)
		}
		var identity func(p int, claim string) string
		if namePerClaim {
			identity = func(p int, claim string) string { return fmt.Sprintf("process-%d/%s", p, claim) }
		}
		cfg := storebench.Default()
		cfg.TTL, cfg.Renew = benchTTL, electRenew
		c.fleet = storebench.StartFleet(b, cfg, stores, n, identity)
		return c.fleet.Stop
	}
}

// competeElections runs, in each process (client), one campaign per claim,
// with a session per campaign or one for the process, and waits until
// every claim has a leader. Followers wait inside Campaign.
func competeElections(sessionPerProcess bool) func(b *testing.B, clis []*clientv3.Client, prefix string, n int, c *competeCounts) func() {
	return func(b *testing.B, clis []*clientv3.Client, prefix string, n int, c *competeCounts) func() {
		ctx, cancel := context.WithCancel(context.Background())
		var sessions []*concurrency.Session
		newSession := func(cli *clientv3.Client) *concurrency.Session {
			s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(benchTTL/time.Second)))
			if err != nil {
				b.Fatalf("session: %v", err)
			}
			sessions = append(sessions, s)
			return s
		}
		var led sync.Map
		var leading sync.WaitGroup
		leading.Add(n)
		var wg sync.WaitGroup
		for _, cli := range clis {
			var shared *concurrency.Session
			if sessionPerProcess {
				shared = newSession(cli)
			}
			for i := 0; i < n; i++ {
				s := shared
				if s == nil {
					s = newSession(cli)
				}
				claim := fmt.Sprintf("%selections/%04d", prefix, i)
				e := concurrency.NewElection(s, claim)
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := e.Campaign(ctx, "bench"); err != nil {
						return // cancelled while following
					}
					c.won.Add(1)
					if _, again := led.LoadOrStore(claim, struct{}{}); !again {
						leading.Done()
					}
				}()
			}
		}
		leading.Wait()
		return func() {
			cancel()
			wg.Wait()
			for _, s := range sessions {
				s.Close()
			}
		}
	}
}
