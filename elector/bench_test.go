package elector_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

// The failover benchmarks run three candidates on a memstore in real time
// with a 2s TTL and 500ms renewals, the settings the peers were measured
// with. Each iteration is one trial; the metrics are p50 and max over the
// trials, and the number of two-leader overlaps seen. Crash trials take
// about a TTL each, so run the full set with -benchtime=50x:
//
//	go test -run '^$' -bench 'Handover|CrashFailover' -benchtime=50x ./elector/

func BenchmarkHandover(b *testing.B)      { benchFailover(b, false) }
func BenchmarkCrashFailover(b *testing.B) { benchFailover(b, true) }

func benchFailover(b *testing.B, crash bool) {
	clk := clock.New()
	store := memstore.New()
	defer store.Close()
	sl, err := backends.NewLocker(store)
	if err != nil {
		b.Fatal(err)
	}
	s := newSampler(clk)
	defer s.stop()

	type node struct {
		e  *elector.Elector
		fl *electortest.Locker
	}
	var nodes []node
	var retired []node
	spawn := func() {
		fl := electortest.Wrap(sl)
		e, err := elector.New(fl.Watching(electortest.WatchPass), elector.Config{
			Key: "bench", Identity: fmt.Sprintf("node-%d", len(nodes)+len(retired)),
			TTL: 2 * time.Second, RenewPeriod: 500 * time.Millisecond, Clock: clk,
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		s.add(e)
		nodes = append(nodes, node{e, fl})
	}
	defer func() {
		for _, n := range append(nodes, retired...) {
			n.fl.Uncrash()
			if err := n.e.Stop(context.Background()); err != nil {
				b.Error(err)
			}
		}
	}()
	for range 3 {
		spawn()
	}
	leader := func() int {
		for i, n := range nodes {
			if n.e.IsLeader() {
				return i
			}
		}
		return -1
	}
	waitFor := func(cond func() bool) {
		deadline := clk.Now().Add(10 * time.Second)
		for !cond() {
			if clk.Now().After(deadline) {
				b.Fatal("no leader within 10s")
			}
			runtime.Gosched()
		}
	}
	waitFor(func() bool { return leader() >= 0 })

	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		old := leader()
		if old < 0 {
			waitFor(func() bool { old = leader(); return old >= 0 })
		}
		oldE := nodes[old].e
		start := clk.Now()
		if crash {
			nodes[old].fl.Crash()
		} else if err := oldE.Stop(context.Background()); err != nil {
			b.Fatal(err)
		}
		var at time.Time
		waitFor(func() bool {
			var ok bool
			at, ok = s.firstLeadingSince(start, oldE)
			return ok
		})
		took = append(took, at.Sub(start))

		retired = append(retired, nodes[old])
		nodes = slices.Delete(nodes, old, old+1)
		if crash {
			// Let the crashed node's calls return so it can be stopped.
			n := retired[len(retired)-1]
			n.fl.Uncrash()
			if err := n.e.Stop(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
		spawn()
	}
	b.StopTimer()

	slices.Sort(took)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
	b.ReportMetric(ms(took[len(took)-1]), "max-ms")
	overlaps := s.overlaps()
	b.ReportMetric(float64(len(overlaps)), "overlaps")
	b.ReportMetric(0, "ns/op")
	for _, o := range overlaps {
		b.Errorf("two leaders at once: %s", o)
	}
}

// sampler polls IsLeader of every elector it knows, as fast as it can, and
// records for each the intervals it saw it lead. A recorded interval runs
// from a clock reading taken after a true answer to one taken before the
// last true answer, so it lies inside the real interval: an overlap of
// recorded intervals is a real overlap.
type sampler struct {
	clk  clock.Clock
	mu   sync.Mutex
	els  []*sampled // guarded by mu
	quit chan struct{}
	done chan struct{}
}

type sampled struct {
	e         *elector.Elector
	leading   bool       // guarded by sampler.mu
	intervals []interval // guarded by sampler.mu
}

type interval struct{ from, to time.Time }

func newSampler(clk clock.Clock) *sampler {
	s := &sampler{clk: clk, quit: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *sampler) add(e *elector.Elector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.els = append(s.els, &sampled{e: e})
}

func (s *sampler) stop() {
	close(s.quit)
	<-s.done
}

func (s *sampler) run() {
	defer close(s.done)
	for {
		select {
		case <-s.quit:
			return
		default:
		}
		s.mu.Lock()
		for _, x := range s.els {
			before := s.clk.Now()
			leads := x.e.IsLeader()
			after := s.clk.Now()
			switch {
			case leads && !x.leading:
				x.intervals = append(x.intervals, interval{from: after, to: before})
			case leads:
				x.intervals[len(x.intervals)-1].to = before
			}
			x.leading = leads
		}
		s.mu.Unlock()
		runtime.Gosched()
	}
}

// firstLeadingSince returns when an elector other than not was first seen
// leading in an interval that began after t.
func (s *sampler) firstLeadingSince(t time.Time, not *elector.Elector) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.els {
		if x.e == not {
			continue
		}
		for _, iv := range x.intervals {
			if iv.from.After(t) {
				return iv.from, true
			}
		}
	}
	return time.Time{}, false
}

// overlaps lists every pair of recorded intervals of different electors
// that intersect.
func (s *sampler) overlaps() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i, x := range s.els {
		for _, y := range s.els[i+1:] {
			for _, a := range x.intervals {
				for _, b := range y.intervals {
					if a.from.Before(b.to) && b.from.Before(a.to) {
						out = append(out, fmt.Sprintf("%s [%v, %v] and %s [%v, %v]", x.e.Holder(), a.from, a.to, y.e.Holder(), b.from, b.to))
					}
				}
			}
		}
	}
	return out
}
