package failuremodes_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(holdLockEnv); path != "" {
		holdLock(path) // a child process of FM-19, killed by its parent
		return
	}
	goleak.VerifyTestMain(m)
}

// The timings every scenario uses unless it says otherwise. The elector runs
// without jitter (except in FM-09) so that each step of the fake clock lands
// on a known event.
const (
	ttl          = 10 * time.Second
	renewPeriod  = 3 * time.Second
	renewTimeout = 2 * time.Second
	margin       = 100 * time.Millisecond
	cancelLead   = ttl / 100 // the default: a term ends this long before its local deadline
	retryPeriod  = time.Second
	drainTimeout = 2 * time.Second
	relTimeout   = time.Second
	key          = "fm/claim"
)

// opAcquire is the store operation of an acquisition: a create, or on a
// store with transactions (memstore) a transaction that creates the claim
// and checks the key is no slot group (backends.StoreLocker.TryAcquire).
const opAcquire = faults.OpCreate | faults.OpTxn

// Armed timers of one elector on the fake clock, at rest.
const (
	leaderTimers   = 2 // the renew timer and the deadline timer
	followerTimers = 1 // the wait before the next attempt
)

// world is one scenario: a fake clock, a store judged by it, and the
// participants.
type world struct {
	t     *testing.T
	ctx   context.Context // bounds every wait; never reached in a passing run
	clk   *clocktest.Clock
	store backends.Store
	nodes []*node
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldOn(t, func(clk *clocktest.Clock) backends.Store {
		return memstore.New(memstore.WithClock(clk))
	})
}

// newWorldOn is newWorld over the store open returns; the world closes it.
func newWorldOn(t *testing.T, open func(*clocktest.Clock) backends.Store) *world {
	t.Helper()
	clk := clocktest.New(time.Time{})
	store := open(clk)
	// The bound only ends a failing run. A thousand electors under -race
	// on a machine at load 20 took 31 s to campaign twice (FM-21), so it
	// is generous.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	w := &world{t: t, ctx: ctx, clk: clk, store: store}
	t.Cleanup(func() {
		w.shutdown()
		store.Close()
		cancel()
	})
	return w
}

// baseConfig is the Config every node starts from.
func (w *world) baseConfig(name string) elector.Config {
	return elector.Config{
		Key:            key,
		Identity:       name,
		TTL:            ttl,
		RenewPeriod:    renewPeriod,
		RenewTimeout:   renewTimeout,
		SafetyMargin:   margin,
		RetryPeriod:    retryPeriod,
		DisableJitter:  true,
		DrainTimeout:   drainTimeout,
		ReleaseTimeout: relTimeout,
		Clock:          w.clk,
	}
}

// node is one participant: an Elector writing through its own fault
// wrapper, and a recorder of everything it reported.
type node struct {
	w      *world
	name   string
	f      *faults.Store
	locker backends.Locker
	e      *elector.Elector
	rec    *electortest.Recorder
	cancel context.CancelFunc // cancels the context given to Start
}

type nodeOption func(*nodeSetup)

type nodeSetup struct {
	cfg   elector.Config
	store backends.Store // what the fault wrapper wraps
	watch bool
	// faults, if set, are applied by a Locker between the Elector and its
	// StoreLocker; unlike the store-level faults, they may ignore the
	// caller's context: they model an answer already received, or a loop
	// wedged in code that does not look at its context.
	faults map[electortest.Op]*electortest.Fault
}

// withConfig edits the node's Config.
func withConfig(f func(*elector.Config)) nodeOption {
	return func(s *nodeSetup) { f(&s.cfg) }
}

// withWatch lets the node watch the claim. Nodes do not watch by default:
// a watch arms the store's expiry timer, and followers that time their
// attempts to the observed expiry keep the timer count simple.
func withWatch() nodeOption { return func(s *nodeSetup) { s.watch = true } }

// onStore makes the node use s instead of the world's store.
func onStore(s backends.Store) nodeOption { return func(ns *nodeSetup) { ns.store = s } }

// newNode makes a node; it is not started.
func (w *world) newNode(name string, opts ...nodeOption) *node {
	w.t.Helper()
	s := nodeSetup{cfg: w.baseConfig(name), store: w.store}
	for _, o := range opts {
		o(&s)
	}
	inner := s.store
	if !s.watch {
		inner = faults.Hide(inner, backends.CapWatch)
	}
	n := &node{w: w, name: name, f: faults.Wrap(inner, w.clk)}
	n.rec = electortest.NewRecorder(w.t, w.clk)
	cfg := s.cfg
	n.rec.Install(&cfg)
	locker, err := backends.NewLocker(n.f)
	if err != nil {
		w.t.Fatalf("%s: NewLocker: %v", name, err)
	}
	n.locker = locker
	if s.faults != nil {
		fl := electortest.Wrap(locker)
		for op, f := range s.faults {
			fl.Set(op, f)
		}
		n.locker = fl
	}
	if n.e, err = elector.New(n.locker, cfg); err != nil {
		w.t.Fatalf("%s: elector.New: %v", name, err)
	}
	w.nodes = append(w.nodes, n)
	return n
}

// start starts the node's Elector.
func (n *node) start() *node {
	n.w.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if err := n.e.Start(ctx); err != nil {
		n.w.t.Fatalf("%s: Start: %v", n.name, err)
	}
	return n
}

// shutdown stops every node at the end of a test, whatever state the test
// left it in: faults are cleared, work is unblocked, every Elector is
// stopped at once, and the clock is moved on if some have not finished
// (a drain or a release still waiting for time to pass). The clock is moved
// only after nothing has finished for a while, so that electors still on
// their way out are not pushed past timeouts they would not have reached.
func (w *world) shutdown() {
	errs := make(chan error, len(w.nodes))
	for _, n := range w.nodes {
		n.f.Clear()
		n.rec.Unblock()
		go func() { errs <- n.e.Stop(w.ctx) }()
	}
	pending := slices.Clone(w.nodes)
	for stalled := 0; len(pending) > 0; {
		before := len(pending)
		pending = slices.DeleteFunc(pending, func(n *node) bool {
			select {
			case <-n.e.Done():
				return true
			default:
				return false
			}
		})
		switch {
		case w.ctx.Err() != nil:
			w.t.Errorf("%d nodes did not stop (%s first): %v", len(pending), pending[0].name, w.ctx.Err())
			return
		case len(pending) < before:
			stalled = 0
		default:
			if stalled++; stalled%10000 == 0 {
				w.clk.Add(100 * time.Millisecond)
			}
		}
		runtime.Gosched()
	}
	for _, n := range w.nodes {
		if n.cancel != nil {
			n.cancel()
		}
		<-errs
	}
}

// settle waits until n timers are armed on the clock: every participant is
// at rest, waiting for time to pass.
func (w *world) settle(n int) {
	w.t.Helper()
	if err := w.clk.BlockUntil(w.ctx, n); err != nil {
		w.t.Fatalf("settle: %v (at %v)", err, w.elapsed())
	}
}

// step waits until n timers are armed, then moves the clock by d.
func (w *world) step(n int, d time.Duration) {
	w.t.Helper()
	w.settle(n)
	w.clk.Add(d)
}

// stepUntil steps the clock by d (each time once n timers are armed) until
// done reports true, at most a minute of fake time.
func (w *world) stepUntil(n int, d time.Duration, done func() bool) {
	w.t.Helper()
	for end := w.clk.Now().Add(time.Minute); !done(); {
		if w.clk.Now().After(end) {
			w.t.Fatalf("stepUntil: not done after a minute of fake time (at %v)", w.elapsed())
		}
		w.step(n, d)
	}
}

// logs collects the records of a slog.Logger.
type logs struct {
	mu      sync.Mutex
	records []slog.Record // guarded by mu
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}
func (l *logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logs) WithGroup(string) slog.Handler      { return l }

// find returns the first record at level or above whose message contains
// text, with its attributes rendered as key=value.
func (l *logs) find(level slog.Level, text string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		if r.Level >= level && strings.Contains(r.Message, text) {
			out := r.Message
			r.Attrs(func(a slog.Attr) bool {
				out += " " + a.String()
				return true
			})
			return out, true
		}
	}
	return "", false
}

var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// elapsed is the fake time since the start of the scenario.
func (w *world) elapsed() time.Duration { return w.clk.Now().Sub(epoch) }

// leaders names the participants whose IsLeader is true now.
func leaders(ps ...participant) []string {
	var out []string
	for _, p := range ps {
		if p.IsLeader() {
			out = append(out, p.Name())
		}
	}
	return out
}

// participant is what the overlap checks need of a tenure node or a naive
// one.
type participant interface {
	Name() string
	IsLeader() bool
}

func (n *node) Name() string   { return n.name }
func (n *node) IsLeader() bool { return n.e.IsLeader() }

// await is wait for a node, failing the test on timeout.
func (n *node) await(kind electortest.Kind, count int) electortest.Event {
	n.w.t.Helper()
	ev, err := n.rec.Wait(n.w.ctx, kind, count)
	if err != nil {
		n.w.t.Fatalf("%s at %v: %v", n.name, n.w.elapsed(), err)
	}
	return ev
}

// holders returns the live holders of the claim as the store sees it now.
func (w *world) holders() []backends.Claim {
	w.t.Helper()
	l, err := backends.NewLocker(w.store)
	if err != nil {
		w.t.Fatal(err)
	}
	hs, err := l.Holders(w.ctx, key)
	if err != nil {
		w.t.Fatalf("holders: %v", err)
	}
	return hs
}

// fenced is a downstream resource that accepts a write only if it carries a
// token at least as high as the highest it has accepted.
type fenced struct {
	mu      sync.Mutex
	highest int64    // guarded by mu
	log     []string // guarded by mu; accepted writes
}

func (f *fenced) write(token int64, what string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if token < f.highest {
		return fmt.Errorf("fenced: token %d is below %d: rejected %q", token, f.highest, what)
	}
	f.highest = token
	f.log = append(f.log, what)
	return nil
}

func (f *fenced) accepted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log)
}

// recv receives from ch, failing the test if the world's bound runs out
// first.
func recv[T any](w *world, ch <-chan T) T {
	w.t.Helper()
	select {
	case v := <-ch:
		return v
	case <-w.ctx.Done():
		w.t.Fatalf("at %v: nothing received: %v", w.elapsed(), w.ctx.Err())
	}
	var zero T
	return zero
}

// awaitRec is await for any recorder (naive participants have one too).
func (w *world) awaitRec(who string, r *electortest.Recorder, kind electortest.Kind, count int) electortest.Event {
	w.t.Helper()
	ev, err := r.Wait(w.ctx, kind, count)
	if err != nil {
		w.t.Fatalf("%s at %v: %v", who, w.elapsed(), err)
	}
	return ev
}

// withFault puts a Locker between the node's Elector and its Locker that
// applies f to the calls of op. That Locker hides the claim watch.
func withFault(op electortest.Op, f *electortest.Fault) nodeOption {
	return func(s *nodeSetup) {
		if s.faults == nil {
			s.faults = map[electortest.Op]*electortest.Fault{}
		}
		s.faults[op] = f
	}
}

// wallClock is a participant's wall clock: the world's clock plus an offset
// the test may step at any time, as NTP does. Durations, timers and
// deadlines pass through unchanged; only readings move.
type wallClock struct {
	*clocktest.Clock
	mu     sync.Mutex
	offset time.Duration // guarded by mu
}

func newWallClock(c *clocktest.Clock, offset time.Duration) *wallClock {
	return &wallClock{Clock: c, offset: offset}
}

var _ clock.Clock = (*wallClock)(nil)

func (c *wallClock) off() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// stepBy moves the reading by d (negative: back).
func (c *wallClock) stepBy(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

func (c *wallClock) Now() time.Time                  { return c.Clock.Now().Add(c.off()) }
func (c *wallClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *wallClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
func (c *wallClock) WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return c.Clock.WithDeadline(parent, d.Add(-c.off()))
}
