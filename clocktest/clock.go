package clocktest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

var _ clock.Clock = (*Clock)(nil)

// Clock is a fake clock.Clock whose time moves only when Add or Set is
// called, and which can tell how many timers the code under test has armed.
//
// A Clock is safe for concurrent use. It starts no goroutines and needs no
// closing; drop it when the test ends. Do not copy a Clock after first use.
type Clock struct {
	mock   *clock.Mock
	layout mockLayout

	// advance serialises Add and Set (and the firing of zero-duration
	// AfterFuncs): the mock's Add computes the new time before firing and
	// stores it after, so two concurrent Adds would lose one of them.
	advance sync.Mutex
	// step is held while the mock fires the timers of one deadline, and
	// while the mock's Timer constructor runs: that constructor fires
	// whatever timer is due, and the mock releases its own lock between
	// choosing a timer and firing it, so the two together could fire one
	// timer twice. Add takes it once per deadline, not for its whole
	// advance, so a timer made while an Add fires is armed from the time
	// reached so far, as with the mock alone.
	step sync.Mutex

	// handles is set once a Timer, AfterFunc or Ticker has been handed out.
	// Its Reset can re-arm it on the mock without passing through the
	// Clock, so from then on BlockUntil polls instead of waiting for a
	// signal.
	handles atomic.Bool
	spins   atomic.Int64 // polling rounds BlockUntil has made; read by tests

	mu      sync.Mutex
	changed chan struct{}             // mu; closed when a timer is armed through the Clock or time moves; nil while nobody waits
	ctxs    map[*deadlineCtx]struct{} // mu; contexts from WithDeadline/WithTimeout not yet done
	seq     uint64                    // mu; numbers the contexts in ctxs
}

// New returns a fake clock reading start. A zero start means
// 2026-01-01T00:00:00Z.
//
// New panics if the linked github.com/benbjohnson/clock is not v1.3.5's
// layout (see Waiters); the package's tests catch that first.
func New(start time.Time) *Clock {
	layout, err := inspectMock(reflect.TypeFor[clock.Mock]())
	if err != nil {
		panic(err)
	}
	if start.IsZero() {
		start = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	}
	m := clock.NewMock()
	m.Set(start)
	return &Clock{mock: m, layout: layout, ctxs: make(map[*deadlineCtx]struct{})}
}

// Add moves the clock forward by d, firing every timer and ticker due by
// the new time in deadline order, with Now reading each one's deadline as
// it fires. When Add returns, Now reads the new time, each due channel
// timer's value is in its channel, each due AfterFunc has been started in
// its own goroutine, and every context from WithDeadline or WithTimeout
// whose deadline has passed is done.
//
// Add may be called from any goroutine; calls are serialised. A negative
// d moves the clock back, like Set.
func (c *Clock) Add(d time.Duration) {
	c.advance.Lock()
	defer c.advance.Unlock()
	c.moveTo(c.mock.Now().Add(d))
	c.expire()
	c.notify()
}

// Set moves the clock to t, firing what falls due on the way as Add does.
// Setting an earlier time fires nothing; timers keep their deadlines as
// instants, so they then fire later in elapsed terms.
func (c *Clock) Set(t time.Time) {
	c.advance.Lock()
	defer c.advance.Unlock()
	c.moveTo(t)
	c.expire()
	c.notify()
}

// moveTo moves the mock to t one deadline at a time, holding step only
// while the timers of one deadline fire. c.advance is held.
func (c *Clock) moveTo(t time.Time) {
	for {
		c.step.Lock()
		next, ok := c.layout.earliest(c.mock)
		if !ok || next.After(t) {
			c.mock.Set(t)
			c.step.Unlock()
			return
		}
		c.mock.Set(next)
		c.step.Unlock()
	}
}

// Waiters returns how many timers and tickers are armed right now: created
// through this Clock (or one of its Skewed views) or re-armed with Reset,
// and not yet fired or stopped. Sleep, After, AfterFunc, Timer, Ticker,
// Tick and the timer behind each live WithDeadline/WithTimeout context all
// count. A ticker counts from creation until it is stopped.
//
// The count is of timers, not of goroutines: see the package doc.
func (c *Clock) Waiters() int {
	return c.layout.armed(c.mock)
}

// BlockUntil returns nil once Waiters() >= n, and an error wrapping
// ctx.Err() if ctx is done first. It checks the count before looking at
// ctx.
//
// It waits for a signal: every timer armed through the Clock, and every Add
// and Set, wakes it to re-check. A Timer, AfterFunc or Ticker re-armed by
// its own Reset cannot signal, so once the Clock has handed one out,
// BlockUntil polls the count instead, yielding the processor
// (runtime.Gosched) between checks, until the count is reached or ctx is
// done.
func (c *Clock) BlockUntil(ctx context.Context, n int) error {
	for !c.handles.Load() {
		changed := c.subscribe()
		w := c.Waiters()
		if w >= n {
			return nil
		}
		select {
		case <-changed:
			// Timer, AfterFunc and Ticker set handles before they arm
			// and signal, so a wait never misses the switch to polling.
		case <-ctx.Done():
			return blockErr(ctx, n, w)
		}
	}
	for {
		w := c.Waiters()
		if w >= n {
			return nil
		}
		if ctx.Err() != nil {
			return blockErr(ctx, n, w)
		}
		c.spins.Add(1)
		runtime.Gosched()
	}
}

func blockErr(ctx context.Context, n, have int) error {
	return fmt.Errorf("clocktest: waiting for %d armed timers, have %d: %w", n, have, ctx.Err())
}

// AdvanceWhenBlocked waits until Waiters() >= n, then calls Add(d). If ctx
// is done first it returns BlockUntil's error and does not advance.
func (c *Clock) AdvanceWhenBlocked(ctx context.Context, n int, d time.Duration) error {
	if err := c.BlockUntil(ctx, n); err != nil {
		return err
	}
	c.Add(d)
	return nil
}

// Now returns the clock's current time.
func (c *Clock) Now() time.Time { return c.mock.Now() }

// Since returns the time elapsed on the clock since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.mock.Since(t) }

// Until returns the duration on the clock until t.
func (c *Clock) Until(t time.Time) time.Duration { return c.mock.Until(t) }

// Sleep blocks until the clock has been moved forward by d. A non-positive
// d returns at once.
func (c *Clock) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	<-c.After(d)
}

// After returns a channel that receives the clock's time once it has moved
// forward by d. The timer stays armed (and counted) until it fires, even if
// nobody receives: in a select that can give up, prefer Timer and Stop.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	return c.timer(d).C
}

// Timer returns a timer that sends the clock's time on its channel once the
// clock has moved forward by d; a non-positive d fires at once. See the
// package doc for how its Stop and Reset differ from time.Timer's.
func (c *Clock) Timer(d time.Duration) *clock.Timer {
	c.handles.Store(true)
	return c.timer(d)
}

func (c *Clock) timer(d time.Duration) *clock.Timer {
	c.step.Lock()
	t := c.mock.Timer(max(d, 0))
	c.step.Unlock()
	c.notify()
	return t
}

// AfterFunc calls f in its own goroutine once the clock has moved forward
// by d. A non-positive d calls it at once, without waiting for Add.
func (c *Clock) AfterFunc(d time.Duration, f func()) *clock.Timer {
	c.handles.Store(true)
	return c.afterFunc(d, f)
}

func (c *Clock) afterFunc(d time.Duration, f func()) *clock.Timer {
	t := c.mock.AfterFunc(max(d, 0), f)
	c.notify()
	if d <= 0 {
		// The mock fires a due AfterFunc only on its next Add or Set.
		c.advance.Lock()
		c.moveTo(c.mock.Now())
		c.expire()
		c.advance.Unlock()
	}
	return t
}

// Ticker returns a ticker that sends the clock's time every d. Like
// time.NewTicker, it panics if d <= 0. The channel holds one tick; ticks
// that find it full are dropped.
func (c *Clock) Ticker(d time.Duration) *clock.Ticker {
	if d <= 0 {
		panic(errors.New("clocktest: non-positive interval for Ticker"))
	}
	c.handles.Store(true)
	return c.ticker(d)
}

func (c *Clock) ticker(d time.Duration) *clock.Ticker {
	t := c.mock.Ticker(d)
	c.notify()
	return t
}

// Tick is like Ticker but returns only the channel; its ticker can never be
// stopped and stays counted by Waiters. Like time.Tick, it returns nil if
// d <= 0.
func (c *Clock) Tick(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return c.ticker(d).C
}

// WithDeadline returns a copy of parent that is done when parent is, when
// cancel is called, or when the clock reaches d, whichever comes first; in
// the last case its Err is context.DeadlineExceeded. As with
// context.WithDeadline, a parent whose deadline is earlier wins.
func (c *Clock) WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return c.withDeadline(parent, d, d)
}

// WithTimeout returns WithDeadline(parent, c.Now().Add(d)).
func (c *Clock) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return c.WithDeadline(parent, c.Now().Add(d))
}

// subscribe returns a channel that is closed at the next notify.
func (c *Clock) subscribe() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

// notify wakes every BlockUntil to re-check the count.
func (c *Clock) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// expire cancels, in deadline order, the deadline contexts the clock has
// reached. Their own timers cancel them too, but from goroutines the mock
// starts, which may not have run by the time Add returns.
func (c *Clock) expire() {
	now := c.mock.Now()
	var due []*deadlineCtx
	c.mu.Lock()
	for x := range c.ctxs {
		if !x.due.After(now) {
			due = append(due, x)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(due, func(a, b *deadlineCtx) int {
		if d := a.due.Compare(b.due); d != 0 {
			return d
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for _, x := range due {
		x.cancel(context.DeadlineExceeded)
	}
}

func (c *Clock) track(x *deadlineCtx) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	x.seq = c.seq
	c.ctxs[x] = struct{}{}
}

func (c *Clock) untrack(x *deadlineCtx) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ctxs, x)
}
