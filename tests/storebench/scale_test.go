package storebench_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	etcdstore "github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/backends/kube"
	"github.com/tenure-go/tenure/backends/kube/kubetest"
	"github.com/tenure-go/tenure/backends/nats/natstest"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/backends/postgres/pgtest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/storebench"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// scaleTTL is the lease every elector of BenchmarkScale asks for; each
// renews on the elector's default period (TTL/3).
const scaleTTL = 10 * time.Second

// scaleLimit bounds the wait for every claim of BenchmarkScale to lead; a
// run that reaches it reports how many led and goes on.
const scaleLimit = 120 * time.Second

// BenchmarkScale measures one process holding C claims (C = 1,000 and
// 10,000; 1,000 only with -short), each claim its own elector, every
// elector over the process's one Store and named with the process's one
// identity, TTL 10 s and the elector's default renew period (TTL/3). The
// stores: etcd with a lease per claim and with WithSharedLease, NATS, and
// PostgreSQL with and without WithBatchedKeepAlive, each on the server
// BenchmarkStores starts, and Kubernetes in session mode (WithSession) on
// a kube-apiserver over an etcd server process, whose requests are the
// HTTP requests its client sends and whose cpu-ms/s is this process's
// alone.
//
// It reports lead-s, the seconds from starting the electors until every
// claim has a leader (led, how many had one, when that did not happen
// within two minutes); then, after one TTL of settling, over a window of
// one TTL: req/s (counted as BenchmarkStores counts), terms (the terms
// begun in the window: 0 unless a leader lost its claim), cpu-ms/s as
// BenchmarkStores reports it; at the window's end rss-mb, the resident
// memory of this process (its clients only: every server is a process of
// its own), and goroutines/claim, the goroutines beyond those running
// before the electors started, per claim.
//
// Run each size on its own (-bench 'Scale/nats/claims=10000$'), so that
// memory a larger run left does not count in a smaller one's RSS.
func BenchmarkScale(b *testing.B) {
	sizes := []int{1000, 10000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	for _, st := range scaleStores(b) {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/claims=%d", st.name, n), func(b *testing.B) {
				for range b.N {
					open, m := st.open(b)
					scale(b, open, m, n, scaleLimit, scaleTTL, scaleTTL, b.ReportMetric)
				}
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// TestScaleBriefly runs BenchmarkScale's measurement with 200 claims and
// short windows on every store, so that it cannot rot unseen. Its figures
// are logged, never judged, but every claim must lead.
func TestScaleBriefly(t *testing.T) {
	for _, st := range scaleStores(t) {
		t.Run(st.name, func(t *testing.T) {
			open, m := st.open(t)
			scale(t, open, m, 200, scaleLimit, 0, time.Second, func(v float64, unit string) {
				t.Logf("%g %s", v, unit)
				if unit == "led" {
					t.Errorf("%g of 200 claims led within %v", v, scaleLimit)
				}
			})
		})
	}
}

// scaleStores starts BenchmarkScale's servers for tb, as startStores does.
func scaleStores(tb testing.TB) []store {
	etcdSrv := etcdtest.Start(tb, etcdtest.DefaultTimings())
	natsSrv := natstest.Start(tb)
	kubeSrv := kubetest.Start(tb)
	pg := pgtest.Shared(tb)
	dsn := pg.DSN(pg.NewDatabase(tb))
	pgCPU := storebench.CPUMeter{Unit: "server-cpu-ms/s", Used: pg.CPU}
	return []store{
		{name: "etcd", open: func(tb testing.TB) (storebench.Open, storebench.Meters) { return openEtcd(tb, etcdSrv) }},
		{name: "etcd-shared", open: func(tb testing.TB) (storebench.Open, storebench.Meters) {
			return openEtcd(tb, etcdSrv, etcdstore.WithSharedLease(0))
		}},
		{name: "kube-session", open: func(tb testing.TB) (storebench.Open, storebench.Meters) { return openKube(tb, kubeSrv) }},
		{name: "nats", open: func(tb testing.TB) (storebench.Open, storebench.Meters) { return openNATS(tb, natsSrv) }},
		{name: "postgres", open: func(tb testing.TB) (storebench.Open, storebench.Meters) { return openPostgres(tb, dsn, pgCPU) }},
		{name: "postgres-batched", open: func(tb testing.TB) (storebench.Open, storebench.Meters) {
			return openPostgres(tb, dsn, pgCPU, postgres.WithBatchedKeepAlive(0))
		}},
	}
}

// openKube opens Kubernetes stores in session mode (WithSession with
// DefaultSessionBatch), each with a client of its own, in a namespace of
// the measurement's own; a request is an HTTP request a store's client
// sends.
func openKube(tb testing.TB, srv *kubetest.Server) (storebench.Open, storebench.Meters) {
	var reqs atomic.Int64
	ns := namespace()
	admin := kubernetes.NewForConfigOrDie(srv.RESTConfig())
	if _, err := admin.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("create namespace %s: %v", ns, err)
	}
	open := func(tb testing.TB) storebench.Process {
		cfg := rest.CopyConfig(srv.RESTConfig())
		cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the server decides
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTrip(func(r *http.Request) (*http.Response, error) {
				reqs.Add(1)
				return rt.RoundTrip(r)
			})
		}
		s, err := kube.New(kubernetes.NewForConfigOrDie(cfg), kube.WithNamespace(ns), kube.WithSession(kube.DefaultSessionBatch))
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return storebench.Process{Store: s, Crash: func() { s.Close() }}
	}
	return open, storebench.Meters{Requests: reqs.Load, CPU: []storebench.CPUMeter{processCPU}}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// scale runs claims electors over one process's store, and reports as
// BenchmarkScale says.
func scale(tb testing.TB, open storebench.Open, m storebench.Meters, claims int, limit, settle, window time.Duration, report storebench.Report) {
	tb.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	proc := open(tb)
	locker, err := backends.NewLocker(proc.Store)
	if err != nil {
		tb.Fatal(err)
	}
	goroutines0 := runtime.NumGoroutine()
	var won, renewed, leaders atomic.Int64
	led := make([]atomic.Bool, claims)
	allLed := make(chan struct{})
	els := make([]*elector.Elector, claims)
	for i := range els {
		els[i], err = elector.New(locker, elector.Config{
			Key: fmt.Sprintf("claims/%05d", i), Identity: "process-0", TTL: scaleTTL,
			Trace: elector.Trace{Renewed: func(elector.Term, time.Duration, time.Duration) { renewed.Add(1) }},
			OnElected: func(ctx context.Context, _ elector.Term) {
				won.Add(1)
				if !led[i].Swap(true) && leaders.Add(1) == int64(claims) {
					close(allLed)
				}
				<-ctx.Done()
			},
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	defer stopScale(els)
	wall := clock.New()
	t0 := wall.Now()
	for _, el := range els {
		if err := el.Start(context.Background()); err != nil {
			tb.Fatal(err)
		}
	}
	select {
	case <-allLed:
		report(wall.Since(t0).Seconds(), "lead-s")
	case <-wall.After(limit):
		report(float64(leaders.Load()), "led")
	}
	tb.Logf("%d of %d claims led after %v", leaders.Load(), claims, wall.Since(t0).Round(time.Millisecond))
	cfg := storebench.Config{Settle: settle, Window: window}
	storebench.Window(tb, cfg, m, won.Load, renewed.Load, report)
	report(float64(rss())/(1<<20), "rss-mb")
	report(float64(runtime.NumGoroutine()-goroutines0)/float64(claims), "goroutines/claim")
}

// stopScale stops els, a bounded number at once.
func stopScale(els []*elector.Elector) {
	sem := make(chan struct{}, 256)
	done := make(chan struct{}, len(els))
	for _, el := range els {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; done <- struct{}{} }()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = el.Stop(ctx)
		}()
	}
	for range els {
		<-done
	}
}

// rss is this process's resident set size in bytes (VmRSS), 0 where
// /proc does not say.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "VmRSS:" {
			kb, _ := strconv.ParseInt(string(f[1]), 10, 64)
			return kb << 10
		}
	}
	return 0
}
