package etcd_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/elector"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// competeWindow is how long BenchmarkCompetingClaims measures, after every
// claim has a leader and one TTL has passed.
const competeWindow = 6 * time.Second

// BenchmarkCompetingClaims measures what elections with competitors cost:
// n claims, three candidates for each, one per process (each process its
// own client, and for tenure its own store, running one candidate of every
// claim). TTL 2 s; tenure renews and retries every 500 ms and its followers
// wait on the watch; etcd's concurrency.Election keeps its sessions alive
// every TTL/3 and its followers wait on the watch. Compared in the same
// run, on one server with etcd's default timings and fsync: tenure with a
// lease per claim and with one shared lease per process, and Election with
// a session per candidate and with one session per process.
//
// Tenure runs with its electors named two ways: names=per-process, one
// Identity per process, and names=per-claim, each claim's elector named on
// its own (as a program may well do); the cost must not depend on it.
//
// Metrics: req/s, the requests the three clients send (a gRPC client
// interceptor: one per unary call, one per message sent on a stream);
// cpu-ms/s, the CPU time of the whole test process (server included) per
// second; terms, the elections won during the window (0 for a steady
// leader); req/renewal, for tenure, the requests per renewal its electors
// made in the window. Run with -benchtime=1x.
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
				for i := 0; i < b.N; i++ {
					reqs.reset()
					before, renewed, cpu0 := c.won.Load(), c.renewed.Load(), cpuTime(b)
					wait(b, competeWindow)
					cpu := cpuTime(b) - cpu0
					got := reqs.Load()
					b.ReportMetric(float64(got)/competeWindow.Seconds(), "req/s")
					b.ReportMetric(float64(cpu.Milliseconds())/competeWindow.Seconds(), "cpu-ms/s")
					b.ReportMetric(float64(c.won.Load()-before), "terms")
					if r := c.renewed.Load() - renewed; r > 0 {
						b.ReportMetric(float64(got)/float64(r), "req/renewal")
					}
					b.Logf("%s, %d claims × %d candidates: %d requests in %v (%s), %v CPU, %d terms won",
						impl.name, n, candidates, got, competeWindow, reqs, cpu, c.won.Load()-before)
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

// competeCounts is what the candidates of one run report: the elections
// won, and (tenure only) the renewals that extended a term.
type competeCounts struct {
	won, renewed atomic.Int64
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// competeTenure runs, in each process (client), a store and one elector per
// claim, and waits until every claim has a leader. With namePerClaim each
// claim's elector has an Identity of its own; otherwise every elector of a
// process has the process's.
func competeTenure(namePerClaim bool, opts ...etcd.Option) func(b *testing.B, clis []*clientv3.Client, prefix string, n int, c *competeCounts) func() {
	return func(b *testing.B, clis []*clientv3.Client, prefix string, n int, c *competeCounts) func() {
		var led sync.Map // claim → struct{}
		var leading sync.WaitGroup
		leading.Add(n)
		var els []*elector.Elector
		for p, cli := range clis {
			s := openStore(b, cli, prefix, opts...)
			locker, err := backends.NewLocker(s)
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; i < n; i++ {
				claim := fmt.Sprintf("claims/%04d", i)
				id := fmt.Sprintf("process-%d", p)
				if namePerClaim {
					id = fmt.Sprintf("process-%d/%s", p, claim)
				}
				el, err := elector.New(locker, elector.Config{
					Key:         claim,
					Identity:    id,
					TTL:         benchTTL,
					RenewPeriod: electRenew,
					RetryPeriod: electRenew,
					Trace: elector.Trace{
						Renewed: func(elector.Term, time.Duration, time.Duration) { c.renewed.Add(1) },
					},
					OnElected: func(ctx context.Context, _ elector.Term) {
						c.won.Add(1)
						if _, again := led.LoadOrStore(claim, struct{}{}); !again {
							leading.Done()
						}
						<-ctx.Done()
					},
				})
				if err != nil {
					b.Fatal(err)
				}
				els = append(els, el)
			}
		}
		for _, el := range els {
			if err := el.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
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
