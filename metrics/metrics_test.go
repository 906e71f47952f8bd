package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/metrics"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	ttl         = 10 * time.Second
	renewPeriod = 3 * time.Second
	margin      = 100 * time.Millisecond
)

func config(clk *clocktest.Clock, id string, tr elector.Trace) elector.Config {
	return elector.Config{
		Key: "jobs", Identity: id, Clock: clk,
		TTL: ttl, RenewPeriod: renewPeriod, SafetyMargin: margin, DisableJitter: true,
		Trace: tr,
	}
}

// barrier bounds a wait in real time, so a broken test fails instead of
// hanging.
func barrier(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func recv[T any](t *testing.T, ctx context.Context, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

func start(t *testing.T, l backends.Locker, cfg elector.Config) *elector.Elector {
	t.Helper()
	e, err := elector.New(l, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	return e
}

func compare(t *testing.T, m prometheus.Collector, want string, names ...string) {
	t.Helper()
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

// value reads one series from m: name{labels} as "k=v,k=v" sorted by name.
func value(t *testing.T, m prometheus.Collector, name, labels string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			var ls []string
			for _, l := range s.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			if strings.Join(ls, ",") == labels {
				switch {
				case s.Counter != nil:
					return s.Counter.GetValue()
				case s.Gauge != nil:
					return s.Gauge.GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{%s}", name, labels)
	return 0
}

// newLocker is a locker on a memory store driven by clk, closed when the
// test ends.
func newLocker(t *testing.T, clk *clocktest.Clock) backends.Locker {
	t.Helper()
	store := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { store.Close() })
	l, err := backends.NewLocker(store)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestElection drives two real electors on a memory store and the fake
// clock through an election, a renewal, a handover and a stop, and checks
// the series at each step.
func TestElection(t *testing.T) {
	ctx := barrier(t)
	clk := clocktest.New(time.Time{})
	locker := newLocker(t, clk)
	m, err := metrics.New(prometheus.NewPedanticRegistry(), metrics.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}

	wonA, renewedA := make(chan struct{}, 4), make(chan struct{}, 4)
	a := start(t, locker, config(clk, "a", metrics.Join(m.Trace("jobs"), elector.Trace{
		ElectionWon: func(elector.Term, time.Duration) { wonA <- struct{}{} },
		Renewed:     func(elector.Term, time.Duration, time.Duration) { renewedA <- struct{}{} },
	})))
	recv(t, ctx, wonA, "a elected")
	compare(t, m, `
# HELP tenure_leader Electors of this process that lead the key (1 while one leads).
# TYPE tenure_leader gauge
tenure_leader{key="jobs"} 1
# HELP tenure_elections_won_total Attempts that took the claim.
# TYPE tenure_elections_won_total counter
tenure_elections_won_total{key="jobs"} 1
# HELP tenure_deadline_remaining_seconds Time from the scrape to the local deadline of the term this process leads; negative once past it.
# TYPE tenure_deadline_remaining_seconds gauge
tenure_deadline_remaining_seconds{key="jobs"} 9.9
# HELP tenure_elections_lost_total Attempts that did not take the claim, by error class (lost: another holder has it).
# TYPE tenure_elections_lost_total counter
tenure_elections_lost_total{class="fatal",key="jobs"} 0
tenure_elections_lost_total{class="lost",key="jobs"} 0
tenure_elections_lost_total{class="transient",key="jobs"} 0
`, "tenure_leader", "tenure_elections_won_total", "tenure_deadline_remaining_seconds", "tenure_elections_lost_total")

	// The time left is read at the scrape: it falls between renewals...
	if err := clk.BlockUntil(ctx, 2); err != nil { // the renewal timer and the term's end
		t.Fatal(err)
	}
	clk.Add(time.Second)
	if got := value(t, m, "tenure_deadline_remaining_seconds", "key=jobs"); got != 8.9 {
		t.Errorf("1s after the election: deadline remaining %v, want 8.9", got)
	}
	// ...and a renewal moves it on.
	clk.Add(renewPeriod - time.Second)
	recv(t, ctx, renewedA, "a renewed")
	compare(t, m, `
# HELP tenure_deadline_remaining_seconds Time from the scrape to the local deadline of the term this process leads; negative once past it.
# TYPE tenure_deadline_remaining_seconds gauge
tenure_deadline_remaining_seconds{key="jobs"} 9.9
# HELP tenure_renew_duration_seconds Round trip of renewals, answered or failed.
# TYPE tenure_renew_duration_seconds histogram
tenure_renew_duration_seconds_bucket{key="jobs",le="0.001"} 1
tenure_renew_duration_seconds_bucket{key="jobs",le="0.0025"} 1
tenure_renew_duration_seconds_bucket{key="jobs",le="0.005"} 1
tenure_renew_duration_seconds_bucket{key="jobs",le="0.01"} 1
tenure_renew_duration_seconds_bucket{key="jobs",le="0.025"} 1
tenure_renew_duration_seconds_bucket{key="jobs",le="0.05"} 1
tenure_renew_duration_seconds_bucket{key="jobs",le="0.1"} 1
tenure_renew_duration_seconds_bucket{key="jobs",le="0.25"} 1
tenure_renew_duration_seconds_bucket{key="jobs",le="0.5"} 1
tenure_renew_duration_seconds_bucket{key="jobs",le="1"} 1
tenure_renew_duration_seconds_bucket{key="jobs",le="2.5"} 1
tenure_renew_duration_seconds_bucket{key="jobs",le="5"} 1
tenure_renew_duration_seconds_bucket{key="jobs",le="10"} 1
tenure_renew_duration_seconds_bucket{key="jobs",le="+Inf"} 1
tenure_renew_duration_seconds_sum{key="jobs"} 0
tenure_renew_duration_seconds_count{key="jobs"} 1
`, "tenure_deadline_remaining_seconds", "tenure_renew_duration_seconds")

	// b campaigns, loses to a, and takes over when a stops.
	lostB, wonB := make(chan backends.Class, 4), make(chan struct{}, 4)
	b := start(t, locker, config(clk, "b", metrics.Join(m.Trace("jobs"), elector.Trace{
		ElectionLost: func(c backends.Class, _ time.Duration) { lostB <- c },
		ElectionWon:  func(elector.Term, time.Duration) { wonB <- struct{}{} },
	})))
	if c := recv(t, ctx, lostB, "b lost"); c != backends.ClassLost {
		t.Errorf("b lost with class %v, want lost", c)
	}
	if got := value(t, m, "tenure_elections_lost_total", "class=lost,key=jobs"); got < 1 {
		t.Errorf("elections lost (lost) = %v, want at least 1", got)
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	recv(t, ctx, wonB, "b elected")
	compare(t, m, `
# HELP tenure_leader Electors of this process that lead the key (1 while one leads).
# TYPE tenure_leader gauge
tenure_leader{key="jobs"} 1
# HELP tenure_elections_won_total Attempts that took the claim.
# TYPE tenure_elections_won_total counter
tenure_elections_won_total{key="jobs"} 2
`, "tenure_leader", "tenure_elections_won_total")
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	compare(t, m, `
# HELP tenure_leader Electors of this process that lead the key (1 while one leads).
# TYPE tenure_leader gauge
tenure_leader{key="jobs"} 0
# HELP tenure_demotions_total Terms ended, by reason.
# TYPE tenure_demotions_total counter
tenure_demotions_total{key="jobs",reason="expired"} 0
tenure_demotions_total{key="jobs",reason="fatal"} 0
tenure_demotions_total{key="jobs",reason="lost"} 0
tenure_demotions_total{key="jobs",reason="panic"} 0
tenure_demotions_total{key="jobs",reason="stopped"} 2
`, "tenure_leader", "tenure_demotions_total", "tenure_deadline_remaining_seconds")
	for _, tr := range [][2]string{{"follower", "acquiring"}, {"acquiring", "leader"}, {"leader", "demoting"}} {
		if got := value(t, m, "tenure_state_transitions_total", "from="+tr[0]+",key=jobs,to="+tr[1]); got < 2 {
			t.Errorf("transitions %s -> %s = %v, want at least 2", tr[0], tr[1], got)
		}
	}
}

// faulty is a Locker whose Renew fails, or panics, as told.
type faulty struct {
	backends.Locker
	mu    sync.Mutex
	renew []func() error // guarded by mu: the next renewals' faults, in order
}

func (f *faulty) Renew(ctx context.Context, c backends.Claim) (backends.Claim, error) {
	f.mu.Lock()
	var fault func() error
	if len(f.renew) > 0 {
		fault, f.renew = f.renew[0], f.renew[1:]
	}
	f.mu.Unlock()
	if fault != nil {
		if err := fault(); err != nil {
			return backends.Claim{}, err
		}
	}
	return f.Locker.Renew(ctx, c)
}

// TestFailures checks that a transient renewal failure, a lost claim and a
// panic in the loop each show in their series.
func TestFailures(t *testing.T) {
	ctx := barrier(t)
	clk := clocktest.New(time.Time{})
	inner := newLocker(t, clk)
	f := &faulty{Locker: inner, renew: []func() error{
		func() error { return fmt.Errorf("test: slow: %w", backends.ErrUnavailable) },
		func() error { return fmt.Errorf("test: taken: %w", backends.ErrConflict) },
		func() error { panic("test: renew") },
	}}
	m, err := metrics.New(nil, metrics.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	won, failed, demoted := make(chan struct{}, 8), make(chan struct{}, 8), make(chan elector.Reason, 8)
	start(t, f, config(clk, "a", metrics.Join(m.Trace("jobs"), elector.Trace{
		ElectionWon: func(elector.Term, time.Duration) { won <- struct{}{} },
		RenewFailed: func(elector.Term, backends.Class, time.Duration, time.Duration) { failed <- struct{}{} },
		Demoted:     func(_ elector.Term, c elector.Cause) { demoted <- c.Reason },
	})))
	// Each term: wait for the election, move the clock until the renewal
	// (or its retry) has gone out, and see the fault's effect.
	recv(t, ctx, won, "elected")
	step := func(what string, until <-chan struct{}) {
		t.Helper()
		for {
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Add(500 * time.Millisecond)
			select {
			case <-until:
				return
			default:
			}
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	step("transient failure", failed)
	if got := value(t, m, "tenure_renew_failures_total", "class=transient,key=jobs"); got != 1 {
		t.Errorf("transient renew failures = %v, want 1", got)
	}
	step("lost claim", failed)
	if r := recv(t, ctx, demoted, "demotion"); r != elector.ReasonLost {
		t.Errorf("demoted for %v, want lost", r)
	}
	if got := value(t, m, "tenure_renew_failures_total", "class=lost,key=jobs"); got != 1 {
		t.Errorf("lost renew failures = %v, want 1", got)
	}
	step("re-election", won)
	step("panic", nil2(demoted))
	if got := value(t, m, "tenure_panics_total", "key=jobs,where=loop"); got != 1 {
		t.Errorf("panics in loop = %v, want 1", got)
	}
	if got := value(t, m, "tenure_demotions_total", "key=jobs,reason=panic"); got != 1 {
		t.Errorf("demotions for panic = %v, want 1", got)
	}
	if got := value(t, m, "tenure_demotions_total", "key=jobs,reason=lost"); got != 1 {
		t.Errorf("demotions for loss = %v, want 1", got)
	}
}

// nil2 turns a channel of values into one of signals.
func nil2[T any](ch <-chan T) <-chan struct{} {
	out := make(chan struct{}, 1)
	go func() {
		<-ch
		out <- struct{}{}
	}()
	return out
}

// TestDuplicateIdentity checks that two electors configured with one identity
// are two holders; the one that does not lead reports the other.
func TestDuplicateIdentity(t *testing.T) {
	ctx := barrier(t)
	clk := clocktest.New(time.Time{})
	locker := newLocker(t, clk)
	m, err := metrics.New(nil, metrics.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	won, dup := make(chan struct{}, 4), make(chan struct{}, 4)
	start(t, locker, config(clk, "same", metrics.Join(m.Trace("jobs"), elector.Trace{
		ElectionWon: func(elector.Term, time.Duration) { won <- struct{}{} },
	})))
	recv(t, ctx, won, "first elected")
	start(t, locker, config(clk, "same", metrics.Join(m.Trace("jobs"), elector.Trace{
		DuplicateIdentity: func(backends.Holder) { dup <- struct{}{} },
	})))
	recv(t, ctx, dup, "duplicate reported")
	if got := value(t, m, "tenure_duplicate_identities_total", "key=jobs"); got < 1 {
		t.Errorf("duplicate identities = %v, want at least 1", got)
	}
	if got := value(t, m, "tenure_leader", "key=jobs"); got != 1 {
		t.Errorf("leader = %v, want 1", got)
	}
}

// TestSeriesFromStart checks that every documented series but the
// deadline gauge is in the first scrape after Trace, at zero, for every
// label value known up front.
func TestSeriesFromStart(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Trace("jobs")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			labels := []string{}
			for _, lp := range mt.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = true
			if c := mt.GetCounter(); c != nil && c.GetValue() != 0 {
				t.Errorf("%s %v = %v at the start, want 0", mf.GetName(), labels, c.GetValue())
			}
		}
	}
	for _, want := range []string{
		"tenure_leader{key=jobs}",
		"tenure_elections_won_total{key=jobs}",
		"tenure_elections_lost_total{class=fatal,key=jobs}",
		"tenure_renew_duration_seconds{key=jobs}",
		"tenure_renew_failures_total{class=transient,key=jobs}",
		"tenure_demotions_total{key=jobs,reason=panic}",
		"tenure_duplicate_identities_total{key=jobs}",
		"tenure_panics_total{key=jobs,where=OnElected}",
		"tenure_panics_total{key=jobs,where=loop}",
		"tenure_state_transitions_total{from=follower,key=jobs,to=acquiring}",
		"tenure_state_transitions_total{from=demoting,key=jobs,to=stopped}",
	} {
		if !got[want] {
			t.Errorf("first scrape lacks %s; it has %d series", want, len(got))
		}
	}
}

// TestLeaderInfo checks that tenure_leader_info carries the value the
// leader advertises as a label while it leads, with nothing advertised as
// an empty label, and is absent once it no longer leads.
func TestLeaderInfo(t *testing.T) {
	ctx := barrier(t)
	clk := clocktest.New(time.Time{})
	locker := newLocker(t, clk)
	m, err := metrics.New(prometheus.NewPedanticRegistry(), metrics.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	won := make(chan struct{}, 4)
	cfg := config(clk, "a", metrics.Join(m.Trace("jobs"), elector.Trace{
		ElectionWon: func(elector.Term, time.Duration) { won <- struct{}{} },
	}))
	cfg.Advertise = "10.0.0.1:8080"
	a := start(t, locker, cfg)
	recv(t, ctx, won, "a elected")
	compare(t, m, `
# HELP tenure_leader_info Electors of this process leading the key, by the value their holder advertises (elector.Config.Advertise; empty if none).
# TYPE tenure_leader_info gauge
tenure_leader_info{advertised="10.0.0.1:8080",key="jobs"} 1
`, "tenure_leader_info")
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	compare(t, m, "", "tenure_leader_info")

	b := start(t, locker, config(clk, "b", metrics.Join(m.Trace("jobs"), elector.Trace{
		ElectionWon: func(elector.Term, time.Duration) { won <- struct{}{} },
	})))
	recv(t, ctx, won, "b elected")
	if got := value(t, m, "tenure_leader_info", "advertised=,key=jobs"); got != 1 {
		t.Errorf("tenure_leader_info with nothing advertised = %v, want 1", got)
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
