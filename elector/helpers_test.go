package elector_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/fsm"
	"github.com/tenure-go/tenure/lifecycle"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// The timings of most tests: a deadline is acquired-at + 9.9s, and the term
// ends lead (the default CancelLead, TTL/100) before it, at 9.8s.
const (
	lead           = ttl / 100
	ttl            = 10 * time.Second
	renewPeriod    = 3 * time.Second
	renewTimeout   = time.Second
	margin         = 100 * time.Millisecond
	retryPeriod    = time.Second
	drainTimeout   = 2 * time.Second
	releaseTimeout = time.Second
	key            = "leader"
)

func baseConfig(clk clock.Clock, id string) elector.Config {
	return elector.Config{
		Key: key, Identity: id,
		TTL: ttl, RenewPeriod: renewPeriod, RenewTimeout: renewTimeout, SafetyMargin: margin,
		RetryPeriod: retryPeriod, DisableJitter: true,
		DrainTimeout: drainTimeout, ReleaseTimeout: releaseTimeout,
		Clock: clk,
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

// eventually polls cond, yielding between checks, until it holds; the test
// fails if ctx ends first.
func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// lockerKinds are the Lockers the single-elector tests run over: the
// in-test fake and memstore under the generic StoreLocker.
var lockerKinds = []string{"fake", "memstore"}

// newLocker returns a Locker of kind judging expiry by clk. Neither
// watches the claim, so neither arms timers of its own on clk.
func newLocker(t *testing.T, clk clock.Clock, kind string) backends.Locker {
	t.Helper()
	switch kind {
	case "fake":
		return newFakeLocker(clk)
	case "memstore":
		store := memstore.New(memstore.WithClock(clk))
		t.Cleanup(func() { store.Close() }) // after the electors stop
		sl, err := backends.NewLocker(store)
		if err != nil {
			t.Fatal(err)
		}
		return plainLocker{sl}
	}
	t.Fatalf("unknown locker kind %q", kind)
	return nil
}

// plainLocker hides a Locker's claim watch.
type plainLocker struct{ backends.Locker }

// startElector makes and starts an Elector, and stops it when the test ends.
func startElector(t *testing.T, l backends.Locker, cfg elector.Config) *elector.Elector {
	t.Helper()
	e, err := elector.New(l, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stopAndWait(t, e) })
	return e
}

func stopAndWait(t *testing.T, e *elector.Elector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
	select {
	case <-e.Done():
	case <-ctx.Done():
		t.Errorf("Done not closed after Stop")
	}
	if got := e.State(); got != lifecycle.Stopped {
		t.Errorf("State() after Stop = %v, want stopped", got)
	}
}

// recorder installs every callback and the StateChanged hook and checks
// their rules: never two callbacks at once, OnElected and OnDemoted
// alternating starting with OnElected, state changes (reported in order, one
// at a time) forming a path of the lifecycle table. check, if set, runs
// inside every callback.
type recorder struct {
	t       *testing.T
	check   func(where string)
	elected func(ctx context.Context, tm elector.Term) // body of OnElected; default: wait for ctx

	in      atomic.Int32 // callbacks running
	inState atomic.Int32 // StateChanged calls running

	mu      sync.Mutex
	events  []string
	terms   []elector.Term
	ctxs    []context.Context
	causes  []elector.Cause
	states  [][2]lifecycle.State
	leaders []elector.Leader
}

func newRecorder(t *testing.T) *recorder { return &recorder{t: t} }

func (r *recorder) enter(where string) {
	if n := r.in.Add(1); n != 1 {
		r.t.Errorf("%s runs while %d other callbacks run", where, n-1)
	}
	if r.check != nil {
		r.check(where)
	}
}

func (r *recorder) exit() { r.in.Add(-1) }

func (r *recorder) install(cfg *elector.Config) {
	cfg.OnElected = func(ctx context.Context, tm elector.Term) {
		r.enter("OnElected")
		defer r.exit()
		r.mu.Lock()
		if len(r.terms) != len(r.causes) {
			r.t.Errorf("OnElected(token %d) while term %d was not demoted", tm.Token, r.terms[len(r.terms)-1].Token)
		}
		r.terms = append(r.terms, tm)
		r.ctxs = append(r.ctxs, ctx)
		r.events = append(r.events, fmt.Sprintf("elected %d", tm.Token))
		body := r.elected
		r.mu.Unlock()
		if body != nil {
			body(ctx, tm)
			return
		}
		<-ctx.Done()
	}
	cfg.OnDemoted = func(tm elector.Term, c elector.Cause) {
		r.enter("OnDemoted")
		defer r.exit()
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.terms) != len(r.causes)+1 {
			r.t.Errorf("OnDemoted(token %d, %v) without an OnElected to pair with (%d elected, %d demoted)", tm.Token, c, len(r.terms), len(r.causes))
		} else if want := r.terms[len(r.terms)-1].Token; tm.Token != want {
			r.t.Errorf("OnDemoted for token %d, want the last elected token %d", tm.Token, want)
		}
		r.causes = append(r.causes, c)
		r.events = append(r.events, fmt.Sprintf("demoted %d %v", tm.Token, c.Reason))
	}
	cfg.Trace.StateChanged = func(from, to lifecycle.State) {
		if n := r.inState.Add(1); n != 1 {
			r.t.Errorf("StateChanged(%v, %v) runs while %d other StateChanged calls run", from, to, n-1)
		}
		defer r.inState.Add(-1)
		r.mu.Lock()
		defer r.mu.Unlock()
		prev := lifecycle.Follower
		if n := len(r.states); n > 0 {
			prev = r.states[n-1][1]
		}
		if from != prev {
			r.t.Errorf("StateChanged(%v, %v) after a change to %v", from, to, prev)
		}
		if !validTransition(from, to) {
			r.t.Errorf("StateChanged(%v, %v) is not a transition of the table", from, to)
		}
		r.states = append(r.states, [2]lifecycle.State{from, to})
	}
	cfg.OnNewLeader = func(ld elector.Leader) {
		r.enter("OnNewLeader")
		defer r.exit()
		r.mu.Lock()
		defer r.mu.Unlock()
		if n := len(r.leaders); n > 0 && ld.Token < r.leaders[n-1].Token {
			r.t.Errorf("OnNewLeader(token %d) after token %d: out of order", ld.Token, r.leaders[n-1].Token)
		}
		r.leaders = append(r.leaders, ld)
		r.events = append(r.events, fmt.Sprintf("leader %d", ld.Token))
	}
}

func validTransition(from, to lifecycle.State) bool {
	for _, ev := range fsm.Events() {
		if got, ok := fsm.Next(from, ev); ok && got == to {
			return true
		}
	}
	return false
}

func (r *recorder) counts() (elected, demoted int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.terms), len(r.causes)
}

func (r *recorder) term(i int) (elector.Term, context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.terms[i], r.ctxs[i]
}

func (r *recorder) cause(i int) elector.Cause {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.causes[i]
}

func (r *recorder) lastState() lifecycle.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.states) == 0 {
		return lifecycle.Follower
	}
	return r.states[len(r.states)-1][1]
}

func (r *recorder) sawState(from, to lifecycle.State) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.states {
		if s == [2]lifecycle.State{from, to} {
			return true
		}
	}
	return false
}

func (r *recorder) eventLog() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, "; ")
}

// stateLog is the transitions StateChanged reported, "from->to; ...".
func (r *recorder) stateLog() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.states {
		out = append(out, fmt.Sprintf("%v->%v", s[0], s[1]))
	}
	return strings.Join(out, "; ")
}

func (r *recorder) waitElected(t *testing.T, ctx context.Context, n int) elector.Term {
	t.Helper()
	eventually(t, ctx, fmt.Sprintf("OnElected #%d", n), func() bool { e, _ := r.counts(); return e >= n })
	tm, _ := r.term(n - 1)
	return tm
}

func (r *recorder) waitDemoted(t *testing.T, ctx context.Context, n int) elector.Cause {
	t.Helper()
	eventually(t, ctx, fmt.Sprintf("OnDemoted #%d", n), func() bool { _, d := r.counts(); return d >= n })
	return r.cause(n - 1)
}

// obs counts what the Trace hooks other than StateChanged report.
type obs struct {
	mu          sync.Mutex
	won         int
	lost        map[backends.Class]int
	renewed     int
	renewFailed map[backends.Class]int
	demoted     []elector.Cause
	dups        []backends.Holder
	panics      []string
	lefts       []time.Duration
}

func newObs() *obs {
	return &obs{lost: map[backends.Class]int{}, renewFailed: map[backends.Class]int{}}
}

// install sets cfg's Trace hooks, all but StateChanged, to count into o.
func (o *obs) install(cfg *elector.Config) {
	tr := &cfg.Trace
	tr.ElectionWon = func(elector.Term, time.Duration) { o.mu.Lock(); o.won++; o.mu.Unlock() }
	tr.ElectionLost = func(c backends.Class, _ time.Duration) {
		o.mu.Lock()
		o.lost[c]++
		o.mu.Unlock()
	}
	tr.Renewed = func(_ elector.Term, _, left time.Duration) {
		o.mu.Lock()
		o.renewed++
		o.lefts = append(o.lefts, left)
		o.mu.Unlock()
	}
	tr.RenewFailed = func(_ elector.Term, c backends.Class, _, _ time.Duration) {
		o.mu.Lock()
		o.renewFailed[c]++
		o.mu.Unlock()
	}
	tr.Demoted = func(_ elector.Term, c elector.Cause) {
		o.mu.Lock()
		o.demoted = append(o.demoted, c)
		o.mu.Unlock()
	}
	tr.DuplicateIdentity = func(h backends.Holder) {
		o.mu.Lock()
		o.dups = append(o.dups, h)
		o.mu.Unlock()
	}
	tr.Panicked = func(where string) {
		o.mu.Lock()
		o.panics = append(o.panics, where)
		o.mu.Unlock()
	}
}

func (o *obs) get(f func(o *obs) int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return f(o)
}

// faultLocker wraps a Locker and injects faults per operation ("acquire",
// "renew", "release", "holders"), a crash (every call blocks, ignoring its
// context, until the test ends) and a partition (every call fails as
// unavailable).
type faultLocker struct {
	inner backends.Locker

	mu          sync.Mutex
	faults      map[string]*fault // guarded by mu
	calls       map[string]int    // guarded by mu
	crashed     chan struct{}     // guarded by mu; non-nil once crashed, closed by uncrash
	partitioned bool              // guarded by mu
}

type fault struct {
	once     bool
	err      error         // returned instead of calling inner
	panicV   any           // panic with this
	block    chan struct{} // wait for it to be closed (ignoring ctx), then call inner
	entered  chan struct{} // closed when a call starts waiting on block
	afterErr error         // call inner, then return this error anyway
	// lostAnswer: call inner (the backend applies it), signal entered, then
	// wait for ctx and return its error: the answer is lost.
	lostAnswer bool
}

func newFaultLocker(inner backends.Locker) *faultLocker {
	return &faultLocker{inner: inner, faults: map[string]*fault{}, calls: map[string]int{}}
}

func (l *faultLocker) set(op string, f *fault) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f == nil {
		delete(l.faults, op)
		return
	}
	l.faults[op] = f
}

func (l *faultLocker) crash() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.crashed == nil {
		l.crashed = make(chan struct{})
	}
}

// uncrash lets blocked calls return (with an error): only for cleanup.
func (l *faultLocker) uncrash() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.crashed != nil {
		close(l.crashed)
		l.crashed = nil
	}
}

func (l *faultLocker) partition(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partitioned = on
}

func (l *faultLocker) count(op string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls[op]
}

var errCrashed = errors.New("test: process crashed")

// do runs op through the faults; call is the inner call.
func (l *faultLocker) do(ctx context.Context, op string, call func(ctx context.Context) error) error {
	l.mu.Lock()
	l.calls[op]++
	f := l.faults[op]
	if f != nil && f.once {
		delete(l.faults, op)
	}
	crashed, partitioned := l.crashed, l.partitioned
	l.mu.Unlock()
	if crashed != nil {
		<-crashed
		return errCrashed
	}
	if partitioned {
		return fmt.Errorf("test: partitioned: %w", backends.ErrUnavailable)
	}
	if f == nil {
		return call(ctx)
	}
	if f.panicV != nil {
		panic(f.panicV)
	}
	if f.block != nil {
		if f.entered != nil {
			close(f.entered)
		}
		<-f.block
		ctx = context.WithoutCancel(ctx) // the backend applies it, however late
	}
	if f.err != nil {
		return f.err
	}
	if err := call(ctx); err != nil {
		return err
	}
	if f.lostAnswer {
		if f.entered != nil {
			close(f.entered)
		}
		<-ctx.Done()
		return ctx.Err()
	}
	return f.afterErr
}

func (l *faultLocker) TryAcquire(ctx context.Context, key string, h backends.Holder, ttl time.Duration) (backends.Claim, error) {
	var out backends.Claim
	err := l.do(ctx, "acquire", func(ctx context.Context) (err error) {
		out, err = l.inner.TryAcquire(ctx, key, h, ttl)
		return err
	})
	return out, err
}

func (l *faultLocker) Renew(ctx context.Context, lease backends.Claim) (backends.Claim, error) {
	var out backends.Claim
	err := l.do(ctx, "renew", func(ctx context.Context) (err error) {
		out, err = l.inner.Renew(ctx, lease)
		return err
	})
	if err != nil {
		return backends.Claim{}, err
	}
	return out, nil
}

func (l *faultLocker) Release(ctx context.Context, lease backends.Claim) error {
	return l.do(ctx, "release", func(ctx context.Context) error { return l.inner.Release(ctx, lease) })
}

func (l *faultLocker) Holders(ctx context.Context, key string) ([]backends.Claim, error) {
	var out []backends.Claim
	err := l.do(ctx, "holders", func(ctx context.Context) (err error) {
		out, err = l.inner.Holders(ctx, key)
		return err
	})
	return out, err
}

// watchingFaultLocker passes the inner locker's claim watch through.
type watchingFaultLocker struct{ *faultLocker }

func (l watchingFaultLocker) WatchClaim(ctx context.Context, key string) (<-chan struct{}, error) {
	return l.inner.(backends.ClaimWatcher).WatchClaim(ctx, key)
}

func (watchingFaultLocker) ExpiryEvents() bool { return false }

// expiryFaultLocker also passes on whether the inner locker's watch
// signals expiry.
type expiryFaultLocker struct{ watchingFaultLocker }

func (l expiryFaultLocker) ExpiryEvents() bool {
	return l.inner.(backends.ClaimWatcher).ExpiryEvents()
}

// logBuffer is a slog handler target safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// silentExpiryLocker declares a claim watch that signals expiry and never
// signals anything, as a stream that stalled without breaking would.
type silentExpiryLocker struct{ *faultLocker }

func (silentExpiryLocker) WatchClaim(ctx context.Context, _ string) (<-chan struct{}, error) {
	ch := make(chan struct{})
	context.AfterFunc(ctx, func() { close(ch) })
	return ch, nil
}

func (silentExpiryLocker) ExpiryEvents() bool { return true }
