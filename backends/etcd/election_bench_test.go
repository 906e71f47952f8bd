package etcd_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
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

// The election benchmarks run three candidates, each with its own client (as
// three processes would), for one claim with a 2 s lease, renewed (tenure)
// every 500 ms, and compare tenure's elector over this store with etcd's
// concurrency.Election (whose session keeps its lease alive every TTL/3).

const (
	candidates      = 3
	handoverRounds  = 40
	failoverRounds  = 12
	electRenew      = 500 * time.Millisecond
	electionTimeout = 30 * time.Second
)

// leadership is one term as the benchmark saw it.
type leadership struct {
	cand    int
	elected time.Time // the new leader learned it leads
	ended   time.Time // the leader stopped acting (its work returned, or it decided to resign)
	// released: the old leader's Stop (tenure) or Resign (etcd) returned.
	released time.Time
	// stillLeader: when this one was elected, the previous leader still
	// reported that it led (tenure: IsLeader).
	stillLeader bool
}

// campaign is a set of candidates the benchmark drives.
type campaign interface {
	// next waits for the next election and returns it.
	next(ctx context.Context) (leadership, error)
	// resign makes candidate c give its leadership up gracefully and return
	// to the race; it fills in ended and released.
	resign(ctx context.Context, c int, l *leadership) error
	// crash kills candidate c without giving anything up (its client is
	// closed under it) and replaces it with a fresh candidate.
	crash(ctx context.Context, c int) error
	close()
}

// BenchmarkHandover measures graceful handover: the leader stops, and the
// time from the moment it stopped acting to the moment the next leader
// learns it leads. overlaps counts new leaders elected before the old one
// stopped acting (tenure: before its OnElected returned; etcd: before its
// Resign returned, which is when it learns it no longer leads). Run with
// -benchtime=1x.
func BenchmarkHandover(b *testing.B) {
	srv := etcdtest.Start(b)
	for _, impl := range campaignImpls() {
		b.Run(impl.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				measureHandover(b, srv, impl, handoverRounds)
			}
		})
	}
}

// measureHandover starts impl's candidates on srv, hands the leadership over
// gracefully rounds times, and reports the gaps (p50-ms, max-ms) and the
// overlaps.
func measureHandover(b *testing.B, srv *etcdtest.Server, impl campaignImpl, rounds int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := impl.start(b, srv)
	var gaps []time.Duration
	overlaps, stale := 0, 0
	cur, err := c.next(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for r := 0; r < rounds; r++ {
		if err := c.resign(ctx, cur.cand, &cur); err != nil {
			b.Fatal(err)
		}
		nxt, err := c.next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		gaps = append(gaps, nxt.elected.Sub(cur.ended))
		if nxt.elected.Before(cur.released) && impl.releaseIsLeadership {
			overlaps++
		}
		if nxt.elected.Before(cur.ended) || nxt.stillLeader {
			overlaps++
			stale++
		}
		cur = nxt
	}
	c.close()
	reportDurations(b, gaps)
	b.ReportMetric(float64(overlaps), "overlaps")
	b.Logf("%s: handover p50 %v, max %v, overlaps %d (old leader still leading %d) in %d rounds",
		impl.name, percentile(gaps, 50), percentile(gaps, 100), overlaps, stale, len(gaps))
}

// BenchmarkFailover measures crash failover: the leader's client is closed
// under it (it stops renewing and never releases), and the time from the
// crash to the moment the next leader learns it leads. Run with
// -benchtime=1x; each round lasts about one TTL.
func BenchmarkFailover(b *testing.B) {
	srv := etcdtest.Start(b)
	for _, impl := range campaignImpls() {
		b.Run(impl.name, func(b *testing.B) {
			wall := clock.New()
			for i := 0; i < b.N; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				c := impl.start(b, srv)
				var gaps []time.Duration
				stale := 0
				cur, err := c.next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for r := 0; r < failoverRounds; r++ {
					// Crash at a random point of the renewal cycle.
					wait(b, time.Duration(rand.Int64N(int64(time.Second))))
					crashed := wall.Now()
					if err := c.crash(ctx, cur.cand); err != nil {
						b.Fatal(err)
					}
					nxt, err := c.next(ctx)
					if err != nil {
						b.Fatal(err)
					}
					gaps = append(gaps, nxt.elected.Sub(crashed))
					if nxt.stillLeader {
						stale++
					}
					cur = nxt
				}
				c.close()
				cancel()
				reportDurations(b, gaps)
				b.ReportMetric(float64(stale), "overlaps")
				b.Logf("%s: failover p50 %v, max %v in %d rounds (TTL %v), crashed leader still leading at takeover: %d",
					impl.name, percentile(gaps, 50), percentile(gaps, 100), len(gaps), benchTTL, stale)
			}
		})
	}
}

func reportDurations(b *testing.B, ds []time.Duration) {
	b.ReportMetric(float64(percentile(ds, 50))/float64(time.Millisecond), "p50-ms")
	b.ReportMetric(float64(percentile(ds, 100))/float64(time.Millisecond), "max-ms")
}

// percentile is the p-th percentile of ds (nearest rank).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}

type campaignImpl struct {
	name  string
	start func(b *testing.B, srv *etcdtest.Server) campaign
	// releaseIsLeadership: the old leader learns it no longer leads only
	// when its release returns (etcd's Resign); tenure's elector stops
	// leading before it releases.
	releaseIsLeadership bool
}

func campaignImpls() []campaignImpl {
	return []campaignImpl{
		{name: "tenure=per-entry-lease", start: func(b *testing.B, srv *etcdtest.Server) campaign { return startTenure(b, srv) }},
		{name: "tenure=shared-lease", start: func(b *testing.B, srv *etcdtest.Server) campaign {
			return startTenure(b, srv, etcd.WithSharedLease(100*time.Millisecond))
		}},
		// Each candidate's store also leads a claim of its own, as a
		// process that shares one lease among its claims does: its lease is
		// kept alive by those renewals, and a write on it needs no lease
		// request before it.
		{name: "tenure=shared-lease/holding", start: func(b *testing.B, srv *etcdtest.Server) campaign {
			return startTenureHolding(b, srv, etcd.WithSharedLease(100*time.Millisecond))
		}},
		{name: "etcd-election", start: startEtcdElection, releaseIsLeadership: true},
	}
}

// tenureCampaign runs elector.Electors over stores on separate clients.
type tenureCampaign struct {
	b      *testing.B
	srv    *etcdtest.Server
	prefix string
	opts   []etcd.Option
	wall   clock.Clock
	events chan leadership
	// holding: each candidate's store also leads a claim of its own.
	holding bool

	wg      sync.WaitGroup // reapers of crashed candidates
	spawned atomic.Int64   // candidates spawned, for their own claims' keys

	mu      sync.Mutex
	cands   []*tenureCand    // guarded by mu
	leading *elector.Elector // guarded by mu; the elector that last won
}

// tenureCand is one candidate process: a client, a store, and the elector
// it runs for the claim (a new one each time it returns to the race).
type tenureCand struct {
	cli    *clientv3.Client
	store  *etcd.Store
	locker *backends.StoreLocker
	el     *elector.Elector // guarded by the campaign's mu
	other  *elector.Elector // the claim of its own it leads (holding), or nil
	ended  chan time.Time   // when its OnElected returned
}

func startTenure(b *testing.B, srv *etcdtest.Server, opts ...etcd.Option) campaign {
	return newTenureCampaign(b, srv, false, opts)
}

// startTenureHolding is startTenure with candidates that also lead a claim
// of their own each, on the same store.
func startTenureHolding(b *testing.B, srv *etcdtest.Server, opts ...etcd.Option) campaign {
	return newTenureCampaign(b, srv, true, opts)
}

func newTenureCampaign(b *testing.B, srv *etcdtest.Server, holding bool, opts []etcd.Option) campaign {
	c := &tenureCampaign{b: b, srv: srv, prefix: newPrefix(b), opts: opts, holding: holding, wall: clock.New(), events: make(chan leadership, 16)}
	c.cands = make([]*tenureCand, candidates)
	for i := range c.cands {
		c.spawn(i)
	}
	return c
}

// spawn starts a fresh candidate i (a new process, as far as etcd can tell).
func (c *tenureCampaign) spawn(i int) {
	b := c.b
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: nopLogger})
	if err != nil {
		b.Fatal(err)
	}
	s, err := etcd.New(context.Background(), cli, c.prefix, c.opts...)
	if err != nil {
		b.Fatal(err)
	}
	locker, err := backends.NewLocker(s)
	if err != nil {
		b.Fatal(err)
	}
	cand := &tenureCand{cli: cli, store: s, locker: locker, ended: make(chan time.Time, 1)}
	if c.holding {
		// A key of its own, named per spawn: a crashed candidate's claim
		// may still be held while its successor starts.
		other, err := elector.New(locker, elector.Config{
			Key:         fmt.Sprintf("own/%d/%d", i, c.spawned.Add(1)),
			Identity:    fmt.Sprintf("candidate-%d", i),
			TTL:         benchTTL,
			RenewPeriod: electRenew,
			RetryPeriod: electRenew,
			OnElected:   func(ctx context.Context, _ elector.Term) { <-ctx.Done() },
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := other.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		cand.other = other
	}
	c.mu.Lock()
	c.cands[i] = cand
	c.mu.Unlock()
	c.elect(i, cand)
}

// elect starts a new elector for candidate i on its store: the candidate
// joins the race, or returns to it after it resigned, in the same process,
// as an Election campaigns again on its session.
func (c *tenureCampaign) elect(i int, cand *tenureCand) {
	b := c.b
	var el *elector.Elector
	el, err := elector.New(cand.locker, elector.Config{
		Key:         "leader",
		Identity:    fmt.Sprintf("candidate-%d", i),
		TTL:         benchTTL,
		RenewPeriod: electRenew,
		RetryPeriod: electRenew,
		OnElected: func(ctx context.Context, term elector.Term) {
			now := c.wall.Now()
			c.mu.Lock()
			prev := c.leading
			c.leading = el
			c.mu.Unlock()
			still := prev != nil && prev.IsLeader()
			c.events <- leadership{cand: i, elected: now, stillLeader: still}
			<-ctx.Done()
			cand.ended <- c.wall.Now()
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	c.mu.Lock()
	cand.el = el
	c.mu.Unlock()
	if err := el.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
}

func (c *tenureCampaign) next(ctx context.Context) (leadership, error) {
	select {
	case l := <-c.events:
		return l, nil
	case <-ctx.Done():
		return leadership{}, fmt.Errorf("no leader elected: %w", ctx.Err())
	}
}

// resign stops candidate i's elector (its leader's work ends, then it
// releases the claim) and starts a new one on the same store, which
// returns to the race.
func (c *tenureCampaign) resign(ctx context.Context, i int, l *leadership) error {
	c.mu.Lock()
	cand := c.cands[i]
	el := cand.el
	c.mu.Unlock()
	if err := el.Stop(ctx); err != nil {
		return fmt.Errorf("stop candidate %d: %w", i, err)
	}
	l.released = c.wall.Now()
	l.ended = <-cand.ended
	c.elect(i, cand)
	return nil
}

func (c *tenureCampaign) crash(ctx context.Context, i int) error {
	c.mu.Lock()
	cand := c.cands[i]
	el := cand.el
	c.mu.Unlock()
	cand.cli.Close() // under the store: renewals fail, nothing is released
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		// The crashed elector demotes by its deadline; reap it afterwards.
		_ = el.Stop(ctx)
		if cand.other != nil {
			_ = cand.other.Stop(ctx)
		}
		cand.store.Close()
		<-cand.ended
	}()
	c.spawn(i)
	return nil
}

func (c *tenureCampaign) retire(cand *tenureCand) {
	if cand.other != nil {
		_ = cand.other.Stop(context.Background())
	}
	cand.store.Close()
	cand.cli.Close()
}

func (c *tenureCampaign) close() {
	c.mu.Lock()
	cands := slices.Clone(c.cands)
	els := make([]*elector.Elector, len(cands))
	for i, cand := range cands {
		els[i] = cand.el
	}
	c.mu.Unlock()
	for i, cand := range cands {
		_ = els[i].Stop(context.Background())
		c.retire(cand)
	}
	c.wg.Wait()
}

// etcdCampaign runs concurrency.Elections, a session (and client) each.
type etcdCampaign struct {
	b      *testing.B
	srv    *etcdtest.Server
	prefix string
	wall   clock.Clock
	events chan leadership
	wg     sync.WaitGroup

	mu    sync.Mutex
	cands []*etcdCand // guarded by mu
}

type etcdCand struct {
	cli    *clientv3.Client
	cancel context.CancelFunc
	resign chan chan [2]time.Time // asks the leader to resign; answered with ended, released
}

func startEtcdElection(b *testing.B, srv *etcdtest.Server) campaign {
	c := &etcdCampaign{b: b, srv: srv, prefix: newPrefix(b), wall: clock.New(), events: make(chan leadership, 16)}
	c.cands = make([]*etcdCand, candidates)
	for i := range c.cands {
		c.spawn(i)
	}
	return c
}

func (c *etcdCampaign) spawn(i int) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: nopLogger})
	if err != nil {
		c.b.Fatal(err)
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(benchTTL/time.Second)))
	if err != nil {
		c.b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cand := &etcdCand{cli: cli, cancel: cancel, resign: make(chan chan [2]time.Time)}
	c.mu.Lock()
	c.cands[i] = cand
	c.mu.Unlock()
	e := concurrency.NewElection(sess, c.prefix+"leader")
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer sess.Orphan() // a crashed client cannot revoke; a resigned one already did
		for {
			if err := e.Campaign(ctx, fmt.Sprint(i)); err != nil {
				return
			}
			select {
			case c.events <- leadership{cand: i, elected: c.wall.Now()}:
			case <-ctx.Done():
				return
			}
			select {
			case reply := <-cand.resign:
				ended := c.wall.Now()
				err := e.Resign(ctx)
				reply <- [2]time.Time{ended, c.wall.Now()}
				if err != nil {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
}

func (c *etcdCampaign) next(ctx context.Context) (leadership, error) {
	select {
	case l := <-c.events:
		return l, nil
	case <-ctx.Done():
		return leadership{}, fmt.Errorf("no leader elected: %w", ctx.Err())
	}
}

func (c *etcdCampaign) resign(ctx context.Context, i int, l *leadership) error {
	c.mu.Lock()
	cand := c.cands[i]
	c.mu.Unlock()
	reply := make(chan [2]time.Time, 1)
	select {
	case cand.resign <- reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case t := <-reply:
		l.ended, l.released = t[0], t[1]
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *etcdCampaign) crash(ctx context.Context, i int) error {
	c.mu.Lock()
	cand := c.cands[i]
	c.mu.Unlock()
	cand.cli.Close() // the session's keep-alive stops; its lease expires
	cand.cancel()
	c.spawn(i)
	return nil
}

func (c *etcdCampaign) close() {
	c.mu.Lock()
	cands := slices.Clone(c.cands)
	c.mu.Unlock()
	for _, cand := range cands {
		cand.cancel()
		cand.cli.Close()
	}
	c.wg.Wait()
}
