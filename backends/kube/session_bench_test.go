package kube

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// BenchmarkSession compares session mode (WithSession) with per-claim
// renewal, and with client-go's leaderelection where the comparison
// applies, on one real API server in one run. Run it with a fixed count:
//
//	go test -run '^$' -bench Session -benchtime=5x ./backends/kube/
//
// claims=1000: one process holds 1000 claims (one Store, one client) and
// renews each on its own goroutine every 2 s (jittered down by up to 15%),
// with a 6 s TTL; the metrics are the API requests per second it sends and
// the renewals per second that failed (timed out: more than the server
// keeps up with), over windows of 4 s after a warm-up of one renewal
// period.
//
// elections=100: BenchmarkElections100's steady state (100 elections of
// three candidates, each candidate j of every election in process j; lease
// 2 s, renewal and retry every 500 ms), in session mode, per-claim mode and
// with client-go; the metric is API requests per second of all three
// processes.
//
// handover and crash: BenchmarkHandover's three candidates, per-claim and
// session mode. handover stops the leader gracefully; crash cuts the
// leader's connection to the API server (every request fails at once, as
// for a process that died or was cut off) and measures until another
// candidate leads.
func BenchmarkSession(b *testing.B) {
	c := startCluster(b)
	modes := []struct {
		name string
		opts []Option
	}{
		{"per-claim", nil},
		{"session", []Option{WithSession(DefaultSessionBatch)}},
	}
	for _, m := range modes {
		b.Run("claims=1000/"+m.name, func(b *testing.B) { benchHeld(b, c, 1000, m.opts) })
	}
	for _, m := range modes {
		b.Run("elections=100/candidates=3/"+m.name, func(b *testing.B) {
			ns := c.namespace(b)
			var n atomic.Int64
			lockers := make([]backends.Locker, candidates)
			for j := range lockers {
				s, err := New(kubernetes.NewForConfigOrDie(counted(c.srv.RESTConfig(), &n)), append([]Option{WithNamespace(ns)}, m.opts...)...)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				if lockers[j], err = backends.NewLocker(s); err != nil {
					b.Fatal(err)
				}
			}
			benchElections(b, &n, candidates, func(i, j int, rec *elected) candidate {
				return startTenure(b, lockers[j], fmt.Sprintf("election %d", i), fmt.Sprintf("node-%d-%d", i, j), benchRenew, rec)
			})
		})
	}
	b.Run("elections=100/candidates=3/client-go", func(b *testing.B) {
		ns := c.namespace(b)
		var n atomic.Int64
		clients := make([]kubernetes.Interface, candidates)
		for j := range clients {
			clients[j] = kubernetes.NewForConfigOrDie(counted(c.srv.RESTConfig(), &n))
		}
		benchElections(b, &n, candidates, func(i, j int, rec *elected) candidate {
			return startClientGo(b, clients[j], ns, fmt.Sprintf("election-%d", i), fmt.Sprintf("node-%d-%d", i, j), rec)
		})
	})
	for _, m := range modes {
		b.Run("handover/"+m.name, func(b *testing.B) {
			ns := c.namespace(b)
			benchHandover(b, func(name string, rec *elected) (candidate, string) {
				s := c.store(b, ns, nil, nil, m.opts...)
				l, err := backends.NewLocker(s)
				if err != nil {
					b.Fatal(err)
				}
				return startTenure(b, l, "handover", name, benchRenew, rec), name
			})
		})
	}
	for _, m := range modes {
		b.Run("crash/"+m.name, func(b *testing.B) { benchCrash(b, c, m.opts) })
	}
}

const (
	heldTTL    = 6 * time.Second
	heldRenew  = 2 * time.Second
	heldWindow = 4 * time.Second
)

// benchHeld holds n claims in one store and measures its requests per
// second at steady state.
func benchHeld(b *testing.B, c *cluster, n int, opts []Option) {
	ns := c.namespace(b)
	var reqs atomic.Int64
	s, err := New(kubernetes.NewForConfigOrDie(counted(c.srv.RESTConfig(), &reqs)), append([]Option{WithNamespace(ns)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
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
	var failed atomic.Int64
	var firstErr atomic.Value
	defer func() {
		cancel()
		wg.Wait()
		// Per-claim mode may ask more of the server than it can give on a
		// small machine: renewals then time out. Reported, not fatal.
		if err, _ := firstErr.Load().(error); err != nil {
			b.Logf("%d renewals failed; the first: %v", failed.Load(), err)
		}
	}()
	for i := range n {
		claim, err := locker.TryAcquire(ctx, fmt.Sprintf("claims/%04d", i), holder, heldTTL)
		if err != nil {
			b.Fatalf("acquire %d: %v", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				t := time.NewTimer(heldRenew - rand.N(heldRenew*15/100))
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				rctx, rcancel := context.WithTimeout(ctx, heldRenew)
				next, err := locker.Renew(rctx, claim)
				rcancel()
				if err != nil {
					if ctx.Err() == nil && failed.Add(1) == 1 {
						firstErr.Store(err)
					}
					continue
				}
				claim = next
			}
		}()
	}
	settle := time.NewTimer(heldRenew) // every claim renewed at least once
	<-settle.C
	b.ResetTimer()
	began, before, failedBefore := time.Now(), reqs.Load(), failed.Load()
	for range b.N {
		window := time.NewTimer(heldWindow)
		<-window.C
	}
	b.StopTimer()
	secs := time.Since(began).Seconds()
	b.ReportMetric(float64(reqs.Load()-before)/secs, "req/s")
	b.ReportMetric(float64(failed.Load()-failedBefore)/secs, "failed/s")
	b.ReportMetric(0, "ns/op")
}

// errCrashed is what every request of a crashed candidate fails with.
var errCrashed = errors.New("connection cut: the process crashed")

// crashable returns a config whose requests fail at once while dead is set.
func crashable(cfg *rest.Config, dead *atomic.Bool) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if dead.Load() {
				return nil, errCrashed
			}
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

// crashCandidate is a tenure candidate whose connection can be cut.
type crashCandidate struct {
	*tenureCandidate
	dead *atomic.Bool
}

// benchCrash measures crash failover: the leader's connection is cut, and
// the time until another candidate leads is reported.
func benchCrash(b *testing.B, c *cluster, opts []Option) {
	ns := c.namespace(b)
	rec := newElected()
	byName := map[string]crashCandidate{}
	seq := 0
	spawn := func() {
		seq++
		name := fmt.Sprintf("node-%d", seq)
		dead := new(atomic.Bool)
		s := c.store(b, ns, nil, crashable(c.srv.RESTConfig(), dead), opts...)
		l, err := backends.NewLocker(s)
		if err != nil {
			b.Fatal(err)
		}
		byName[name] = crashCandidate{startTenure(b, l, "crash", name, benchRenew, rec), dead}
	}
	defer func() {
		for _, cand := range byName {
			cand.stop()
		}
	}()
	for range candidates {
		spawn()
	}
	leader, _ := rec.waitLeader(b, time.Time{}, "")
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		pause := time.NewTimer(rand.N(2 * benchRenew))
		<-pause.C
		began := time.Now()
		byName[leader].dead.Store(true)
		next, at := rec.waitLeader(b, began, leader)
		took = append(took, at.Sub(began))
		byName[leader].stop() // its release fails: the claim was taken already
		delete(byName, leader)
		leader = next
		spawn()
	}
	b.StopTimer()
	reportTakeovers(b, took, rec)
}
