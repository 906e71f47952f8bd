// Package rollout measures rolling updates of three candidates with
// preferred candidates (elector.Config.Candidacy): each old process is
// replaced by a new one of higher priority, started before the old one
// stops, over the filestore and over a real etcd server process. It
// holds only a benchmark and its helpers.
//
//	go test -run '^$' -bench Rollout -benchtime 100x ./tests/rollout/
//
// Each iteration is one rollout. Reported per rollout: leader changes
// (changes/rollout), terms that overlapped another's work (overlaps),
// and the time from one leader's work ending to the next one's starting,
// summed over the rollout, as a mean over the rollouts
// (leaderless-ms/rollout) and their median (leaderless-p50-ms); beside
// them, the median of the same gap for one graceful handover without
// candidacies (Stop, and a follower's watch takes the claim), as
// handover-ms.
package rollout

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/elector"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, etcdtest.LeakOptions()...) }

const (
	ttl = 2 * time.Second // etcd's leases are whole seconds
	key = "rollout"
)

// opener opens a store as one more process would: its own handle (its
// own client, for etcd) over the shared state.
type opener func(tb testing.TB) backends.Store

// storeOpener returns the opener of store name for b: a directory of its
// own for the filestore, an etcd server process of its own for etcd.
func storeOpener(b *testing.B, name string) opener {
	if name == "filestore" {
		dir := b.TempDir()
		return func(tb testing.TB) backends.Store {
			s, err := filestore.Open(context.Background(), dir)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { s.Close() })
			return s
		}
	}
	srv := etcdtest.Start(b)
	return func(tb testing.TB) backends.Store {
		cli, err := clientv3.New(clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			tb.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := etcd.New(ctx, cli, "rollout/")
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close(); cli.Close() })
		return s
	}
}

// ledger records, across every candidate, when leaders' work starts and
// ends: leader changes, overlaps and the gaps between them.
type ledger struct {
	clk     clock.Clock
	mu      sync.Mutex
	changed chan struct{} // a term started
	acting  int           // guarded by mu: terms whose work runs
	terms   int           // guarded by mu
	over    int           // guarded by mu: terms that started while another's work ran
	ended   time.Time     // guarded by mu: when the last work ended, zero while one runs
	gap     time.Duration // guarded by mu: summed from a work's end to the next one's start
	leader  string        // guarded by mu
}

func newLedger() *ledger { return &ledger{clk: clock.New(), changed: make(chan struct{}, 1024)} }

func (l *ledger) work(id string) func(ctx context.Context, _ elector.Term) {
	return func(ctx context.Context, _ elector.Term) {
		l.mu.Lock()
		now := l.clk.Now()
		if l.acting > 0 {
			l.over++
		}
		if !l.ended.IsZero() {
			l.gap += now.Sub(l.ended)
		}
		l.acting++
		l.terms++
		l.leader = id
		l.mu.Unlock()
		l.changed <- struct{}{}
		<-ctx.Done()
		l.mu.Lock()
		l.acting--
		if l.acting == 0 {
			l.ended = l.clk.Now()
		}
		l.mu.Unlock()
	}
}

func (l *ledger) snapshot() (terms, over int, gap time.Duration, leader string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.terms, l.over, l.gap, l.leader
}

// await waits until cond holds, checking at each new term and every 5ms.
func await(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	clk := clock.New()
	end := clk.Now().Add(30 * time.Second)
	for !cond() {
		if clk.Now().After(end) {
			tb.Fatalf("not within 30s: %s", what)
		}
		clk.Sleep(5 * time.Millisecond)
	}
}

type candidate struct {
	e      *elector.Elector
	locker *backends.StoreLocker
}

func start(tb testing.TB, open opener, l *ledger, id string, candidacy bool, prio int64) candidate {
	tb.Helper()
	sl, err := backends.NewLocker(open(tb))
	if err != nil {
		tb.Fatal(err)
	}
	e, err := elector.New(sl, elector.Config{
		Key: key, Identity: id, TTL: ttl,
		Candidacy: candidacy, Priority: prio,
		OnElected: l.work(id),
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return candidate{e: e, locker: sl}
}

func stop(tb testing.TB, c candidate) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.e.Stop(ctx); err != nil {
		tb.Fatal(err)
	}
}

// declared reports whether id's candidacy is listed.
func declared(c candidate, id string) bool {
	cs, _, err := c.locker.Candidates(context.Background(), key)
	if err != nil {
		return false
	}
	for _, x := range cs {
		if x.Holder.ID == id {
			return true
		}
	}
	return false
}

func BenchmarkRollout(b *testing.B) {
	for _, name := range []string{"filestore", "etcd"} {
		b.Run(name, func(b *testing.B) {
			open := storeOpener(b, name)
			handover := measureHandover(b, open)
			l := newLedger()
			procs := make([]candidate, 3)
			for i := range procs {
				procs[i] = start(b, open, l, fmt.Sprintf("g0-p%d", i), true, 0)
			}
			await(b, "a first leader", func() bool { t, _, _, _ := l.snapshot(); return t == 1 })
			for i := range procs {
				id := fmt.Sprintf("g0-p%d", i)
				await(b, id+" declared", func() bool { return declared(procs[0], id) })
			}
			terms0, over0, gap0, _ := l.snapshot()
			var gaps []time.Duration // each rollout's leaderless time
			b.ResetTimer()
			for n := 1; n <= b.N; n++ {
				_, _, before, _ := l.snapshot()
				for i := range procs {
					id := fmt.Sprintf("g%d-p%d", n, i)
					next := start(b, open, l, id, true, int64(n))
					// Ready: its candidacy is listed, so a leader that
					// stops sees it.
					await(b, id+" declared", func() bool { return declared(next, id) })
					stop(b, procs[i])
					procs[i] = next
				}
				gen := fmt.Sprintf("g%d-", n)
				await(b, "a leader of the new generation", func() bool {
					_, _, _, ld := l.snapshot()
					return len(ld) > len(gen) && ld[:len(gen)] == gen
				})
				_, _, after, _ := l.snapshot()
				gaps = append(gaps, after-before)
			}
			b.StopTimer()
			terms, over, gap, _ := l.snapshot()
			rollouts := float64(b.N)
			b.ReportMetric(float64(terms-terms0)/rollouts, "changes/rollout")
			b.ReportMetric(float64(over-over0), "overlaps")
			b.ReportMetric(float64((gap-gap0).Microseconds())/1000/rollouts, "leaderless-ms/rollout")
			b.ReportMetric(float64(median(gaps).Microseconds())/1000, "leaderless-p50-ms")
			b.ReportMetric(float64(handover.Microseconds())/1000, "handover-ms")
			for _, p := range procs {
				stop(b, p)
			}
		})
	}
}

// measureHandover is the median, over 20 graceful handovers without
// candidacies, of the time from the leader's work ending (Stop) to the
// next leader's work starting.
func measureHandover(b *testing.B, open opener) time.Duration {
	b.Helper()
	l := newLedger()
	var gaps []time.Duration
	cur := start(b, open, l, "h-0", false, 0)
	await(b, "a first leader", func() bool { t, _, _, _ := l.snapshot(); return t == 1 })
	for i := 1; i <= 20; i++ {
		next := start(b, open, l, fmt.Sprintf("h-%d", i), false, 0)
		// The follower has met the held claim and waits on its watch.
		await(b, "the follower's first attempt", func() bool { _, ok := next.e.Leader(); return ok })
		_, _, before, _ := l.snapshot()
		stop(b, cur)
		await(b, "the next leader", func() bool { t, _, _, _ := l.snapshot(); return t == i+1 })
		_, _, after, _ := l.snapshot()
		gaps = append(gaps, after-before)
		cur = next
	}
	stop(b, cur)
	return median(gaps)
}

// median is the middle of ds (the upper one of an even count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
