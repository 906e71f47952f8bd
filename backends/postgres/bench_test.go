package postgres_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/backends/postgres/pgtest"
	"github.com/tenure-go/tenure/elector"
)

// The benchmarks run the shape the etcd store's benchmarks run (TTL 2 s,
// renewal every 500 ms, three candidates, each a store on its own pool as
// three processes would have), on a private server so that its CPU time is
// theirs alone. Run them beside etcd's in one invocation:
//
//	go test -run '^$' -bench 'Elections|Handover|Failover' ./backends/etcd ./backends/postgres
//
// Figures from a shared 2-core machine are indicative only.

const (
	benchTTL      = 2 * time.Second
	benchRenew    = 500 * time.Millisecond
	benchCands    = 3
	benchWindow   = 5 * time.Second
	benchLimit    = 60 * time.Second
	benchRounds   = 20
	benchFailover = 4
)

// stmtCounter counts the statements a pool sends, batched ones included,
// and among them the keep-alive statements (one per renewal, or one per
// batch).
type stmtCounter struct{ n, renew atomic.Int64 }

func (c *stmtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	if strings.Contains(d.SQL, "beat = beat + 1 WHERE key = $1 AND rev = $2") || strings.Contains(d.SQL, "unnest($1::text[], $2::bigint[], $3::bigint[])") {
		c.renew.Add(1)
	}
	return ctx
}
func (c *stmtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The statements of a batch (a create's, a transaction's) are not queries
// to a tracer: each is counted as its answer is read.
func (c *stmtCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (c *stmtCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.n.Add(1)
}
func (c *stmtCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// countingStore counts KeepAlive calls: the renewals.
type countingStore struct {
	*postgres.Store
	renewals *atomic.Int64
}

func (s countingStore) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	s.renewals.Add(1)
	return s.Store.KeepAlive(ctx, key, rev, ttl)
}

// benchStore opens a store on a pool of its own whose statements c counts.
func benchStore(b *testing.B, dsn, tbl string, c *stmtCounter, opts ...postgres.Option) *postgres.Store {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.ConnConfig.Tracer = c
	cfg.MaxConns = 32
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	s, err := postgres.New(context.Background(), pool, append([]postgres.Option{postgres.WithTable("public", tbl)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close(); pool.Close() })
	return s
}

// serverCPU is the CPU time the server's processes have used.
func serverCPU(b *testing.B, srv *pgtest.Server) time.Duration {
	var ticks int64
	for _, pid := range srv.Pids() {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // a backend that just exited
		}
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		u, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14
		s, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
		ticks += u + s
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}

// fleet is benchCands candidates, each running an elector per claim.
type fleet struct {
	b       *testing.B
	stores  []*postgres.Store
	lockers []backends.Locker
	leading atomic.Int64

	mu      sync.Mutex
	els     map[[2]int]*elector.Elector // guarded by mu; by candidate, claim
	elected chan int                    // candidate elected, in order
	overlap atomic.Int64
	holders map[int]int // guarded by mu; claim -> candidates leading it
}

func newFleet(b *testing.B, stores []*postgres.Store, renewals *atomic.Int64) *fleet {
	f := &fleet{b: b, stores: stores, els: map[[2]int]*elector.Elector{}, elected: make(chan int, 1024), holders: map[int]int{}}
	for _, s := range stores {
		l, err := backends.NewLocker(countingStore{s, renewals})
		if err != nil {
			b.Fatal(err)
		}
		f.lockers = append(f.lockers, l)
	}
	b.Cleanup(f.stopAll)
	return f
}

func (f *fleet) start(cand, claim int) {
	el, err := elector.New(f.lockers[cand], elector.Config{
		Key:         fmt.Sprintf("claim-%03d", claim),
		Identity:    fmt.Sprintf("cand-%d", cand),
		TTL:         benchTTL,
		RenewPeriod: benchRenew,
		OnElected: func(ctx context.Context, _ elector.Term) {
			f.mu.Lock()
			f.holders[claim]++
			if f.holders[claim] > 1 {
				f.overlap.Add(1)
			}
			f.mu.Unlock()
			f.leading.Add(1)
			f.elected <- cand
			<-ctx.Done()
			f.leading.Add(-1)
			f.mu.Lock()
			f.holders[claim]--
			f.mu.Unlock()
		},
	})
	if err != nil {
		f.b.Fatal(err)
	}
	if err := el.Start(context.Background()); err != nil {
		f.b.Fatal(err)
	}
	f.mu.Lock()
	f.els[[2]int{cand, claim}] = el
	f.mu.Unlock()
}

func (f *fleet) stop(cand, claim int) {
	f.mu.Lock()
	el := f.els[[2]int{cand, claim}]
	delete(f.els, [2]int{cand, claim})
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), benchLimit)
	defer cancel()
	el.Stop(ctx)
}

func (f *fleet) stopAll() {
	f.mu.Lock()
	var keys [][2]int
	for k := range f.els {
		keys = append(keys, k)
	}
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		go func() { defer wg.Done(); f.stop(k[0], k[1]) }()
	}
	wg.Wait()
}

func (f *fleet) next() int {
	select {
	case c := <-f.elected:
		return c
	case <-time.After(benchLimit): // a bound on waiting, not a measurement
		f.b.Fatal("no election")
		return -1
	}
}

// BenchmarkElections holds 1 and 100 claims with three candidates each and
// measures, over a window once every claim has a leader: req/s, the
// statements all candidates send a second (renewals, and the followers'
// reads: with no expiry events each follower reads its claim about once a
// TTL); req/renewal, those per renewal; renew-req/renewal, keep-alive
// statements per renewal (1 without batching); renewals/s; and
// server-cpu-ms/s, the server processes' CPU time per second.
func BenchmarkElections(b *testing.B) {
	for _, mode := range []struct {
		name string
		opts []postgres.Option
	}{
		{"renew=each", nil},
		{"renew=batched", []postgres.Option{postgres.WithBatchedKeepAlive(0)}},
	} {
		for _, claims := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/claims=%d", mode.name, claims), func(b *testing.B) {
				srv := pgtest.Start(b)
				dsn, tbl := srv.DSN(srv.NewDatabase(b)), newTable()
				var stmts stmtCounter
				var renewals atomic.Int64
				var stores []*postgres.Store
				for range benchCands {
					stores = append(stores, benchStore(b, dsn, tbl, &stmts, mode.opts...))
				}
				f := newFleet(b, stores, &renewals)
				for claim := range claims {
					for c := range benchCands {
						f.start(c, claim)
					}
				}
				for range claims {
					f.next()
				}
				for range b.N {
					s0, k0, r0, cpu0, t0 := stmts.n.Load(), stmts.renew.Load(), renewals.Load(), serverCPU(b, srv), time.Now()
					time.Sleep(benchWindow) // the measurement window
					secs := time.Since(t0).Seconds()
					s, k, r, cpu := stmts.n.Load()-s0, stmts.renew.Load()-k0, renewals.Load()-r0, serverCPU(b, srv)-cpu0
					b.ReportMetric(float64(s)/secs, "req/s")
					b.ReportMetric(float64(r)/secs, "renewals/s")
					if r > 0 {
						b.ReportMetric(float64(s)/float64(r), "req/renewal")
						b.ReportMetric(float64(k)/float64(r), "renew-req/renewal")
					}
					b.ReportMetric(float64(cpu.Milliseconds())/secs, "server-cpu-ms/s")
				}
				b.ReportMetric(float64(f.overlap.Load()), "overlaps")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkHandover: the leader of one claim stops (releasing it) and
// starts again as a follower; the time from the start of its Stop to the
// next election, over benchRounds rounds.
func BenchmarkHandover(b *testing.B) {
	srv := pgtest.Start(b)
	dsn, tbl := srv.DSN(srv.NewDatabase(b)), newTable()
	var stmts stmtCounter
	var renewals atomic.Int64
	var stores []*postgres.Store
	for range benchCands {
		stores = append(stores, benchStore(b, dsn, tbl, &stmts))
	}
	f := newFleet(b, stores, &renewals)
	for c := range benchCands {
		f.start(c, 0)
	}
	leader := f.next()
	var took []time.Duration
	for range b.N {
		for range benchRounds {
			t0 := time.Now()
			f.stop(leader, 0)
			next := f.next()
			took = append(took, time.Since(t0))
			f.start(leader, 0)
			leader = next
		}
	}
	reportDurations(b, took)
	b.ReportMetric(float64(f.overlap.Load()), "overlaps")
}

// BenchmarkFailover: the leader's store is closed under it (a crash: no
// release); the time from the crash to the next election.
func BenchmarkFailover(b *testing.B) {
	srv := pgtest.Start(b)
	dsn, tbl := srv.DSN(srv.NewDatabase(b)), newTable()
	var stmts stmtCounter
	var renewals atomic.Int64
	var took []time.Duration
	for range b.N {
		for range benchFailover {
			var stores []*postgres.Store
			for range benchCands {
				stores = append(stores, benchStore(b, dsn, tbl, &stmts))
			}
			f := newFleet(b, stores, &renewals)
			for c := range benchCands {
				f.start(c, 0)
			}
			leader := f.next()
			t0 := time.Now()
			stores[leader].Close() // every later call fails: no renewal, no release
			f.next()
			took = append(took, time.Since(t0))
			if f.overlap.Load() > 0 {
				b.Errorf("overlap after a crash")
			}
			f.stopAll()
		}
	}
	reportDurations(b, took)
}

func reportDurations(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(ds[len(ds)/2]), "p50-ms")
	b.ReportMetric(ms(ds[len(ds)-1]), "max-ms")
	b.ReportMetric(0, "ns/op")
}
