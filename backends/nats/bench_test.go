package nats

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/nats-io/nats.go"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/nats/natstest"
	"github.com/tenure-go/tenure/elector"
)

// The settings the etcd and kube benchmarks use, so the numbers compare:
// TTL 2 s, renew and retry every 500 ms, three candidates per claim, each
// candidate in its own "process" (connection and Store).
const (
	benchTTL       = 2 * time.Second
	benchRenew     = 500 * time.Millisecond
	candidates     = 3
	competeWindow  = 6 * time.Second
	handoverRounds = 15
	failoverRounds = 5
)

// wait lets d pass on the real clock: a benchmark's measuring window.
func wait(d time.Duration) { <-clock.New().After(d) }

// cpuTime is the CPU time (user and system) the process has used, the
// in-process server included.
func cpuTime(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCompetingClaims measures what elections with competitors cost
// on one server (sync always): n claims, three candidates each, one per
// process (each its own connection and Store, running one elector of every
// claim); followers wait on the store's watch.
//
// Metrics: req/s, the messages the three connections send (every publish,
// message get, stream info and consumer request is one); cpu-ms/s, the CPU
// time of the whole process (server included) per second; terms, the
// elections won during the window (0 for a steady leader); req/renewal,
// the messages per renewal the electors made. Then handover: p50-ms and
// max-ms from the moment a leader that stops gracefully stopped acting to
// the moment the next one learns it leads; and failover: from the moment
// the leader's connection is closed under it (a crash: no release) to the
// moment the next one leads. Run with -benchtime=1x. Indicative only on a
// shared machine.
func BenchmarkCompetingClaims(b *testing.B) {
	srv := natstest.Start(b)
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			bucket := newBucketName()
			var won, renewed atomic.Int64
			var conns []*nats.Conn
			var els []*elector.Elector
			var led sync.Map
			var leading sync.WaitGroup
			leading.Add(n)
			for p := range candidates {
				s := open(b, srv.URL(), bucket, 1)
				conns = append(conns, s.nc)
				locker, err := backends.NewLocker(s)
				if err != nil {
					b.Fatal(err)
				}
				for i := range n {
					claim := fmt.Sprintf("claims/%04d", i)
					el, err := elector.New(locker, elector.Config{
						Key: claim, Identity: fmt.Sprintf("process-%d", p), TTL: benchTTL,
						RenewPeriod: benchRenew, RetryPeriod: benchRenew,
						Trace: elector.Trace{Renewed: func(elector.Term, time.Duration, time.Duration) { renewed.Add(1) }},
						OnElected: func(ctx context.Context, _ elector.Term) {
							won.Add(1)
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
			defer stopAll(els)
			leading.Wait()
			wait(benchTTL) // steady state
			sent := func() (n uint64) {
				for _, nc := range conns {
					n += nc.Stats().OutMsgs
				}
				return n
			}
			for i := 0; i < b.N; i++ {
				msgs0, won0, renewed0, cpu0 := sent(), won.Load(), renewed.Load(), cpuTime(b)
				wait(competeWindow)
				cpu, msgs, r := cpuTime(b)-cpu0, sent()-msgs0, renewed.Load()-renewed0
				b.ReportMetric(float64(msgs)/competeWindow.Seconds(), "req/s")
				b.ReportMetric(float64(cpu.Milliseconds())/competeWindow.Seconds(), "cpu-ms/s")
				b.ReportMetric(float64(won.Load()-won0), "terms")
				if r > 0 {
					b.ReportMetric(float64(msgs)/float64(r), "req/renewal")
				}
				b.Logf("%d claims × %d candidates: %d messages in %v, %d renewals, %v CPU, %d terms won", n, candidates, msgs, competeWindow, r, cpu, won.Load()-won0)
			}
		})
	}
	b.Run("handover", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			measureTakeover(b, srv, false, handoverRounds)
		}
	})
	b.Run("failover", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			measureTakeover(b, srv, true, failoverRounds)
		}
	})
}

func stopAll(els []*elector.Elector) {
	var wg sync.WaitGroup
	for _, el := range els {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = el.Stop(ctx)
		})
	}
	wg.Wait()
}

// benchCandidate is one candidate of a takeover measurement.
type benchCandidate struct {
	s     *Store
	el    *elector.Elector
	ended atomic.Int64 // wall ns when its last term stopped acting
}

type election struct {
	c  *benchCandidate
	at time.Time
}

// measureTakeover runs three candidates of one claim and, rounds times,
// ends the leader, gracefully (Stop) or by a crash (its connection closed
// under it, at a random point of its renewal cycle), measures until the
// next candidate leads, and replaces the ended one with a fresh candidate.
func measureTakeover(b *testing.B, srv *natstest.Server, crash bool, rounds int) {
	wall := clock.New()
	bucket := newBucketName()
	elected := make(chan election, 16)
	var all []*benchCandidate
	start := func() {
		c := &benchCandidate{s: open(b, srv.URL(), bucket, 1)}
		locker, err := backends.NewLocker(c.s)
		if err != nil {
			b.Fatal(err)
		}
		c.el, err = elector.New(locker, elector.Config{
			Key: "leader", Identity: fmt.Sprintf("c%d", len(all)), TTL: benchTTL,
			RenewPeriod: benchRenew, RetryPeriod: benchRenew,
			OnElected: func(ctx context.Context, _ elector.Term) {
				elected <- election{c, wall.Now()}
				<-ctx.Done()
				c.ended.Store(wall.Now().UnixNano())
			},
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.el.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		all = append(all, c)
	}
	for range candidates {
		start()
	}
	defer func() {
		els := make([]*elector.Elector, len(all))
		for i, c := range all {
			els[i] = c.el
		}
		stopAll(els)
	}()
	next := func() election {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		select {
		case e := <-elected:
			return e
		case <-ctx.Done():
			b.Fatal("no election within 30s")
			return election{}
		}
	}
	cur := next()
	var gaps []time.Duration
	for range rounds {
		var from time.Time
		if crash {
			wait(time.Duration(rand.Int64N(int64(benchRenew))))
			from = wall.Now()
			cur.c.s.nc.Close()
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = cur.c.el.Stop(ctx)
			cancel()
			from = time.Unix(0, cur.c.ended.Load())
		}
		nxt := next()
		if nxt.c == cur.c {
			b.Fatal("the ended candidate was elected again")
		}
		gaps = append(gaps, nxt.at.Sub(from))
		start()
		cur = nxt
	}
	slices.Sort(gaps)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(gaps[len(gaps)/2]), "p50-ms")
	b.ReportMetric(ms(gaps[len(gaps)-1]), "max-ms")
	b.Logf("crash=%v: p50 %v, max %v over %d rounds", crash, gaps[len(gaps)/2], gaps[len(gaps)-1], len(gaps))
}
