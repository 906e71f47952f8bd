package storebench

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
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
)

// Config is the shape of a measurement.
type Config struct {
	TTL   time.Duration // the lease every elector asks for
	Renew time.Duration // every elector's renew and retry period

	Candidates int // processes competing for each claim

	// Settle is how long the electors run after every claim has a leader
	// before the window opens; Window is how long the window lasts.
	Settle, Window time.Duration

	Handovers, Failovers int // rounds of each takeover measurement

	// Limit bounds the wait for one election; reaching it fails the run.
	Limit time.Duration
}

// Default is the shape the store comparisons use: TTL 2 s, renew and retry
// every 500 ms, three candidates, one TTL to settle, a 6 s window, 15
// handovers and 5 failovers.
func Default() Config {
	return Config{
		TTL: 2 * time.Second, Renew: 500 * time.Millisecond, Candidates: 3,
		Settle: 2 * time.Second, Window: 6 * time.Second,
		Handovers: 15, Failovers: 5, Limit: 30 * time.Second,
	}
}

// A Process is one candidate process: a store on a connection of its own.
type Process struct {
	Store backends.Store

	// Crash cuts the process's connection under its store, as a crash of
	// the process would: its renewals fail and it releases nothing.
	Crash func()
}

// Open opens a new candidate process for tb; whoever opens it closes it
// when tb ends.
type Open func(tb testing.TB) Process

// Report receives one figure in a unit (testing.B's ReportMetric is one).
type Report func(value float64, unit string)

// reportSpread reports the median and the largest of ds (sorting ds) as
// p50-ms and max-ms, and returns them.
func reportSpread(report Report, ds []time.Duration) (p50, top time.Duration) {
	slices.Sort(ds)
	p50, top = ds[(len(ds)-1)/2], ds[len(ds)-1]
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	report(ms(p50), "p50-ms")
	report(ms(top), "max-ms")
	return p50, top
}

// Meters are the running totals a window measures the growth of.
type Meters struct {
	// Requests is how many requests every process opened so far has
	// sent. Required.
	Requests func() int64

	// CPU lists CPU time meters, each reported in its Unit as
	// milliseconds per second of the window.
	CPU []CPUMeter
}

// A CPUMeter is CPU time used so far by something named by its Unit
// ("cpu-ms/s" for this process, "server-cpu-ms/s" for a server's).
type CPUMeter struct {
	Unit string
	Used func() time.Duration
}

// ProcessCPU is the CPU time (user and system) this process has used so
// far: its clients, and its servers where they run inside it. (getrusage
// of the calling process fails only on a system without it, which the
// benchmarks do not run on.)
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0 // not on this system: no figure rather than a wrong one
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A Fleet is the electors of some processes for some claims: one per
// process and claim.
type Fleet struct {
	els          []*elector.Elector
	won, renewed atomic.Int64
}

// StartFleet starts, over each store, one elector for each of claims
// claims (keys claims/0000, claims/0001, …) and returns once every claim
// has a leader. identity names the elector of process p for a claim; nil
// names every elector of process p "process-p". The caller stops the fleet.
func StartFleet(tb testing.TB, cfg Config, stores []backends.Store, claims int, identity func(p int, claim string) string) *Fleet {
	tb.Helper()
	if identity == nil {
		identity = func(p int, _ string) string { return fmt.Sprintf("process-%d", p) }
	}
	f := &Fleet{}
	var led sync.Map // claim → struct{}
	var leaders atomic.Int64
	allLed := make(chan struct{})
	for p, s := range stores {
		locker, err := backends.NewLocker(s)
		if err != nil {
			tb.Fatal(err)
		}
		for i := range claims {
			claim := fmt.Sprintf("claims/%04d", i)
			el, err := elector.New(locker, elector.Config{
				Key: claim, Identity: identity(p, claim), TTL: cfg.TTL,
				RenewPeriod: cfg.Renew, RetryPeriod: cfg.Renew,
				Trace: elector.Trace{Renewed: func(elector.Term, time.Duration, time.Duration) { f.renewed.Add(1) }},
				OnElected: func(ctx context.Context, _ elector.Term) {
					f.won.Add(1)
					if _, again := led.LoadOrStore(claim, struct{}{}); !again && leaders.Add(1) == int64(claims) {
						close(allLed)
					}
					<-ctx.Done()
				},
			})
			if err != nil {
				tb.Fatal(err)
			}
			f.els = append(f.els, el)
		}
	}
	for _, el := range f.els {
		if err := el.Start(context.Background()); err != nil {
			f.Stop()
			tb.Fatal(err)
		}
	}
	select {
	case <-allLed:
	case <-clock.New().After(cfg.Limit + time.Duration(claims)*cfg.Renew):
		f.Stop()
		tb.Fatalf("storebench: %d of %d claims had a leader in time", leaders.Load(), claims)
	}
	return f
}

// Won is how many terms the fleet's electors have begun.
func (f *Fleet) Won() int64 { return f.won.Load() }

// Renewed is how many renewals extended a term.
func (f *Fleet) Renewed() int64 { return f.renewed.Load() }

// Stop stops every elector of the fleet, at once.
func (f *Fleet) Stop() { stopAll(f.els) }

// Steady measures claims claims held by cfg.Candidates processes: once
// every claim has a leader, it measures a Window of the fleet.
func Steady(tb testing.TB, cfg Config, open Open, claims int, m Meters, report Report) {
	tb.Helper()
	stores := make([]backends.Store, cfg.Candidates)
	for p := range stores {
		stores[p] = open(tb).Store
	}
	f := StartFleet(tb, cfg, stores, claims, nil)
	defer f.Stop()
	Window(tb, cfg, m, f.Won, f.Renewed, report)
	tb.Logf("%d claims × %d candidates", claims, cfg.Candidates)
}

// Window lets cfg.Settle pass, then measures cfg.Window of running
// elections and reports: req/s and req/renewal (from m.Requests and
// renewals; no req/renewal without renewals), each of m.CPU in
// milliseconds per second, and terms, how far terms grew (the terms begun:
// 0 unless a leader lost its claim, when nothing was done to it).
func Window(tb testing.TB, cfg Config, m Meters, terms, renewals func() int64, report Report) {
	tb.Helper()
	wall := clock.New()
	<-wall.After(cfg.Settle)
	cpu0 := make([]time.Duration, len(m.CPU))
	for i, c := range m.CPU {
		cpu0[i] = c.Used()
	}
	req0, terms0, renewals0, t0 := m.Requests(), terms(), renewals(), wall.Now()
	<-wall.After(cfg.Window)
	secs := wall.Since(t0).Seconds()
	reqs, renewed, begun := m.Requests()-req0, renewals()-renewals0, terms()-terms0
	report(float64(reqs)/secs, "req/s")
	if renewed > 0 {
		report(float64(reqs)/float64(renewed), "req/renewal")
	}
	for i, c := range m.CPU {
		report(float64((c.Used()-cpu0[i]).Microseconds())/1000/secs, c.Unit)
	}
	report(float64(begun), "terms")
	tb.Logf("window of %.1fs: %d requests, %d renewals, %d terms begun", secs, reqs, renewed, begun)
}

// Takeover measures, over cfg.Handovers rounds (or cfg.Failovers with
// crash), how long one claim of cfg.Candidates processes goes without a
// leader when its leader ends: gracefully (its elector stops and releases
// the claim), from the moment the leader stopped acting, or by a crash
// (Process.Crash, at a random point of its renewal cycle), from the crash.
// Either way the ended process is replaced by a fresh one. It reports
// p50-ms and max-ms, and overlaps: new leaders elected while the previous
// one still reported that it led (must be 0).
func Takeover(tb testing.TB, cfg Config, open Open, crash bool, report Report) {
	tb.Helper()
	type cand struct {
		proc  Process
		el    *elector.Elector
		ended atomic.Int64 // wall ns when its last term stopped acting
	}
	type election struct {
		c  *cand
		at time.Time
		// overlap: the candidate that led before still reported that it
		// led (IsLeader) when this one was elected.
		overlap bool
	}
	wall := clock.New()
	var leading atomic.Pointer[cand] // the candidate elected last
	elected := make(chan election, 16)
	var all []*cand
	defer func() {
		els := make([]*elector.Elector, len(all))
		for i, c := range all {
			els[i] = c.el
		}
		stopAll(els)
	}()
	start := func() {
		c := &cand{proc: open(tb)}
		locker, err := backends.NewLocker(c.proc.Store)
		if err != nil {
			tb.Fatal(err)
		}
		c.el, err = elector.New(locker, elector.Config{
			Key: "leader", Identity: fmt.Sprintf("candidate-%d", len(all)), TTL: cfg.TTL,
			RenewPeriod: cfg.Renew, RetryPeriod: cfg.Renew,
			OnElected: func(ctx context.Context, _ elector.Term) {
				at := wall.Now()
				prev := leading.Swap(c)
				elected <- election{c, at, prev != nil && prev != c && prev.el.IsLeader()}
				<-ctx.Done()
				c.ended.Store(wall.Now().UnixNano())
			},
		})
		if err != nil {
			tb.Fatal(err)
		}
		if err := c.el.Start(context.Background()); err != nil {
			tb.Fatal(err)
		}
		all = append(all, c)
	}
	next := func() election {
		select {
		case e := <-elected:
			return e
		case <-wall.After(cfg.Limit):
			tb.Fatalf("storebench: no election within %v", cfg.Limit)
			return election{}
		}
	}
	for range cfg.Candidates {
		start()
	}
	rounds := cfg.Handovers
	if crash {
		rounds = cfg.Failovers
	}
	cur := next()
	var gaps []time.Duration
	overlaps := 0
	for range rounds {
		var from time.Time
		if crash {
			<-wall.After(time.Duration(rand.Int64N(int64(cfg.Renew))))
			from = wall.Now()
			cur.c.proc.Crash()
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), cfg.Limit)
			err := cur.c.el.Stop(ctx)
			cancel()
			if err != nil {
				tb.Fatalf("storebench: stop the leader: %v", err)
			}
			from = time.Unix(0, cur.c.ended.Load())
		}
		nxt := next()
		if nxt.c == cur.c {
			tb.Fatal("storebench: the ended candidate was elected again")
		}
		if nxt.overlap {
			overlaps++
		}
		gaps = append(gaps, nxt.at.Sub(from))
		start()
		cur = nxt
	}
	p50, top := reportSpread(report, gaps)
	report(float64(overlaps), "overlaps")
	tb.Logf("crash=%v: p50 %v, max %v over %d rounds, %d overlaps", crash, p50, top, len(gaps), overlaps)
}

// stopAll stops els at once, each within a bound.
func stopAll(els []*elector.Elector) {
	var wg sync.WaitGroup
	for _, el := range els {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = el.Stop(ctx)
		})
	}
	wg.Wait()
}

// Observer measures, over cfg.Handovers graceful handovers of one claim
// among cfg.Candidates processes, how long an observer (elector.Observe,
// in a process of its own) takes to report each new leader: from the
// moment the new leader sent the request that took the claim
// (Term.AcquiredAt) to the observer delivering it, held at that token. The
// claim changes at the store somewhere within that request, whose answer
// the store's watch event often overtakes, so the figure includes the
// write's own round trip and is never negative. Each stopped leader is
// replaced by a fresh process. It reports
// p50-ms and max-ms, and stale: observations of a leader at a token below
// one the observer had already delivered (must be 0).
func Observer(tb testing.TB, cfg Config, open Open, report Report) {
	tb.Helper()
	wall := clock.New()
	var won sync.Map                    // token → when its acquiring request was sent
	wonSignal := make(chan struct{}, 1) // a token was stored in won
	var all []*elector.Elector
	defer func() { stopAll(all) }()
	start := func() {
		locker, err := backends.NewLocker(open(tb).Store)
		if err != nil {
			tb.Fatal(err)
		}
		el, err := elector.New(locker, elector.Config{
			Key: "observed", Identity: fmt.Sprintf("candidate-%d", len(all)), TTL: cfg.TTL,
			RenewPeriod: cfg.Renew, RetryPeriod: cfg.Renew,
			Trace: elector.Trace{ElectionWon: func(t elector.Term, _ time.Duration) {
				won.Store(t.Token, t.AcquiredAt)
				select {
				case wonSignal <- struct{}{}:
				default:
				}
			}},
		})
		if err != nil {
			tb.Fatal(err)
		}
		if err := el.Start(context.Background()); err != nil {
			tb.Fatal(err)
		}
		all = append(all, el)
	}
	for range cfg.Candidates {
		start()
	}
	locker, err := backends.NewLocker(open(tb).Store)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := elector.Observe(ctx, locker, elector.ObserverConfig{Key: "observed", RetryPeriod: cfg.Renew, Clock: wall})
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	defer func() {
		cancel()
		for range ch {
		}
	}()
	var last int64 // the highest token delivered
	stale := 0
	// nextLeader waits for the observer to deliver a leader above token
	// after, and returns it with the time of its delivery.
	nextLeader := func(after int64) (elector.Leader, time.Time) {
		timer := wall.Timer(cfg.Limit)
		defer timer.Stop()
		for {
			select {
			case obs := <-ch:
				at := wall.Now()
				ld, ok := obs.Leader()
				if !ok {
					continue
				}
				if ld.Token < last {
					stale++
				}
				last = max(last, ld.Token)
				if ld.Token > after {
					return ld, at
				}
			case <-timer.C:
				tb.Fatalf("storebench: the observer reported no leader above token %d within %v", after, cfg.Limit)
				return elector.Leader{}, time.Time{}
			}
		}
	}
	// wonAt is when the request that took token was sent, waiting (within
	// cfg.Limit) for the winner's hook if the observer was quicker.
	wonAt := func(token int64) time.Time {
		timer := wall.Timer(cfg.Limit)
		defer timer.Stop()
		for {
			if v, ok := won.Load(token); ok {
				return v.(time.Time)
			}
			select {
			case <-wonSignal:
			case <-timer.C:
				tb.Fatalf("storebench: token %d was observed but never won", token)
			}
		}
	}
	ld, _ := nextLeader(0)
	var delays []time.Duration
	for range cfg.Handovers {
		var cur *elector.Elector
		for _, el := range all {
			if el.Holder() == ld.Holder {
				cur = el
			}
		}
		if cur == nil {
			tb.Fatalf("storebench: the observed leader %s is no candidate", ld.Holder)
		}
		stopCtx, stopCancel := context.WithTimeout(context.Background(), cfg.Limit)
		err := cur.Stop(stopCtx)
		stopCancel()
		if err != nil {
			tb.Fatalf("storebench: stop the leader: %v", err)
		}
		nxt, at := nextLeader(ld.Token)
		delays = append(delays, at.Sub(wonAt(nxt.Token)))
		start()
		ld = nxt
	}
	p50, top := reportSpread(report, delays)
	report(float64(stale), "stale")
	tb.Logf("observer: p50 %v, max %v over %d handovers, %d stale", p50, top, len(delays), stale)
}

// Transfer measures, over cfg.Handovers rounds, how long one claim of
// cfg.Candidates processes takes to move when its leader hands it to a
// named follower with Elector.Transfer: from the call to the target's
// election. Each round's target is the follower started last, once it has
// seen the claim held (so it waits on its watch, or on its timer where
// the store has none, as any follower does); the old leader, a follower
// now that waits out the transfer's bound, is then replaced by a fresh
// process, as Takeover replaces an ended one. It reports p50-ms and
// max-ms; overlaps, targets elected while the old leader still reported
// that it led (must be 0); missed, transfers after which another
// candidate than the target was elected (0 unless the target did not
// take the claim within the bound, or the transfer failed), whose time
// counts to that election; and failed, transfers whose store requests
// failed (Transfer returned an error: the term ended all the same, and the
// claim was released plainly or left to expire), each timed, as every
// round is, from the call to the next election.
func Transfer(tb testing.TB, cfg Config, open Open, report Report) {
	tb.Helper()
	type cand struct {
		id   string
		el   *elector.Elector
		seen atomic.Int64 // the token of the last leader it observed
	}
	type election struct {
		c       *cand
		token   int64
		at      time.Time
		overlap bool // the candidate that led before still reported that it led
	}
	wall := clock.New()
	var leading atomic.Pointer[cand] // the candidate elected last
	elected := make(chan election, 16)
	sawSignal := make(chan struct{}, 1) // some candidate observed a leader
	var all []*cand
	live := map[*cand]bool{}
	defer func() {
		els := make([]*elector.Elector, len(all))
		for i, c := range all {
			els[i] = c.el
		}
		stopAll(els)
	}()
	start := func() {
		c := &cand{id: fmt.Sprintf("candidate-%d", len(all))}
		locker, err := backends.NewLocker(open(tb).Store)
		if err != nil {
			tb.Fatal(err)
		}
		c.el, err = elector.New(locker, elector.Config{
			Key: "transferred", Identity: c.id, TTL: cfg.TTL,
			RenewPeriod: cfg.Renew, RetryPeriod: cfg.Renew,
			OnElected: func(ctx context.Context, t elector.Term) {
				at := wall.Now()
				prev := leading.Swap(c)
				elected <- election{c, t.Token, at, prev != nil && prev != c && prev.el.IsLeader()}
				<-ctx.Done()
			},
			OnNewLeader: func(ld elector.Leader) {
				c.seen.Store(ld.Token)
				select {
				case sawSignal <- struct{}{}:
				default:
				}
			},
		})
		if err != nil {
			tb.Fatal(err)
		}
		if err := c.el.Start(context.Background()); err != nil {
			tb.Fatal(err)
		}
		all = append(all, c)
		live[c] = true
	}
	next := func() election {
		select {
		case e := <-elected:
			return e
		case <-wall.After(cfg.Limit):
			tb.Fatalf("storebench: no election within %v", cfg.Limit)
			return election{}
		}
	}
	// await waits until c has observed the leader at token.
	await := func(c *cand, token int64) {
		timer := wall.Timer(cfg.Limit)
		defer timer.Stop()
		for c.seen.Load() < token {
			select {
			case <-sawSignal:
			case <-timer.C:
				tb.Fatalf("storebench: %s did not observe the leader at token %d within %v", c.id, token, cfg.Limit)
			}
		}
	}
	for range cfg.Candidates {
		start()
	}
	cur := next()
	var gaps []time.Duration
	overlaps, missed, failed := 0, 0, 0
	for range cfg.Handovers {
		var target *cand
		for _, c := range all {
			if live[c] && c != cur.c {
				target = c // the live follower started last
			}
		}
		if target == nil {
			tb.Fatal("storebench: no follower to transfer to")
		}
		await(target, cur.token)
		from := wall.Now()
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Limit)
		err := cur.c.el.Transfer(ctx, target.id)
		cancel()
		if err != nil {
			// The term has ended all the same; the claim is released or
			// left to expire, and the round is timed to whoever leads next.
			failed++
			tb.Logf("storebench: transfer to %s: %v", target.id, err)
		}
		nxt := next()
		if nxt.c != target {
			missed++
		}
		if nxt.overlap {
			overlaps++
		}
		gaps = append(gaps, nxt.at.Sub(from))
		if nxt.c == cur.c { // after a failed transfer: it leads again
			cur = nxt
			continue
		}
		ctx, cancel = context.WithTimeout(context.Background(), cfg.Limit)
		err = cur.c.el.Stop(ctx)
		cancel()
		if err != nil {
			tb.Fatalf("storebench: stop the old leader: %v", err)
		}
		live[cur.c] = false
		start()
		cur = nxt
	}
	p50, top := reportSpread(report, gaps)
	report(float64(overlaps), "overlaps")
	report(float64(missed), "missed")
	report(float64(failed), "failed")
	tb.Logf("transfer: p50 %v, max %v over %d rounds, %d overlaps, %d missed, %d failed", p50, top, len(gaps), overlaps, missed, failed)
}
