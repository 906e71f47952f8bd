package clocktest

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/benbjohnson/clock"
)

var _ clock.Clock = (*skewed)(nil)

// Skewed returns a view of c whose time runs at rate times c's speed, for
// testing code whose clock drifts against its peers' (rate 1.01 runs 1%
// fast, 0.99 1% slow). The view reads the same as c at the moment Skewed
// is called; after c has moved on by e since then, the view has moved on
// by e×rate, rounded down to the nanosecond. It moves only when c does.
//
// A timer or deadline of d on the view is armed on c and fires at the
// first nanosecond of c's time at which the view has moved on by at least
// d. A ticker's period is d/rate rounded up to a whole nanosecond of c's
// time, fixed when the ticker is made. Everything armed through the view
// counts in c.Waiters and wakes c.BlockUntil. Deadlines of its contexts
// are reported in view time.
//
// Two things are not translated, because they do not pass through the
// view: the time sent on a view's timer and ticker channels is c's time
// at the firing (read the view's Now instead), and Reset on a view's
// Timer or Ticker takes a duration of c's time.
//
// Skewed panics unless rate is positive and finite.
func (c *Clock) Skewed(rate float64) clock.Clock {
	if !(rate > 0) || math.IsInf(rate, 0) {
		panic(fmt.Errorf("clocktest: Skewed rate must be positive and finite, got %v", rate))
	}
	return &skewed{c: c, rate: rate, origin: c.Now()}
}

// skewed is the view Skewed returns. It holds no state that changes.
type skewed struct {
	c      *Clock
	rate   float64
	origin time.Time // the base instant at which base and view read the same
}

// scale returns the view's elapsed time for base elapsed e: floor(e×rate),
// exactly (e has 63 bits and rate 53, so 128 bits hold the product), and
// saturated to the Duration range. It is non-decreasing in e.
func (s *skewed) scale(e time.Duration) time.Duration {
	x := new(big.Float).SetPrec(128).SetInt64(int64(e))
	x.Mul(x, new(big.Float).SetPrec(128).SetFloat64(s.rate))
	i, acc := x.Int(nil) // truncated toward zero
	if acc == big.Above {
		i.Sub(i, big.NewInt(1))
	}
	return saturate(i)
}

// unscale returns the least base elapsed e with scale(e) >= v.
func (s *skewed) unscale(v time.Duration) time.Duration {
	q := new(big.Float).SetPrec(128).SetInt64(int64(v))
	q.Quo(q, new(big.Float).SetPrec(128).SetFloat64(s.rate))
	i, acc := q.Int(nil)
	if acc == big.Below {
		i.Add(i, big.NewInt(1))
	}
	e := saturate(i)
	// q is rounded; step to the exact answer (at most a step or two).
	for e < math.MaxInt64 && s.scale(e) < v {
		e++
	}
	for e > math.MinInt64 && s.scale(e-1) >= v {
		e--
	}
	return e
}

func saturate(i *big.Int) time.Duration {
	switch {
	case i.IsInt64():
		return time.Duration(i.Int64())
	case i.Sign() > 0:
		return math.MaxInt64
	default:
		return math.MinInt64
	}
}

// at returns the view's reading when the base reads b.
func (s *skewed) at(b time.Time) time.Time {
	return s.origin.Add(s.scale(b.Sub(s.origin)))
}

// baseFor returns how much base time, from base instant b, it takes for
// the view to move on by d > 0.
func (s *skewed) baseFor(b time.Time, d time.Duration) time.Duration {
	e0 := b.Sub(s.origin)
	v0 := s.scale(e0)
	if d > math.MaxInt64-v0 {
		return math.MaxInt64
	}
	e := s.unscale(v0 + d)
	if e0 < 0 && e > math.MaxInt64+e0 {
		return math.MaxInt64
	}
	return e - e0 // > 0: scale(e0) < v0+d, so e > e0
}

// base converts a duration of view time from now into base time.
func (s *skewed) base(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return s.baseFor(s.c.Now(), d)
}

func (s *skewed) Now() time.Time                  { return s.at(s.c.Now()) }
func (s *skewed) Since(t time.Time) time.Duration { return s.Now().Sub(t) }
func (s *skewed) Until(t time.Time) time.Duration { return t.Sub(s.Now()) }
func (s *skewed) Sleep(d time.Duration)           { s.c.Sleep(s.base(d)) }

func (s *skewed) After(d time.Duration) <-chan time.Time { return s.c.After(s.base(d)) }
func (s *skewed) Timer(d time.Duration) *clock.Timer     { return s.c.Timer(s.base(d)) }

func (s *skewed) AfterFunc(d time.Duration, f func()) *clock.Timer {
	return s.c.AfterFunc(s.base(d), f)
}

// period converts a ticker's period: the least base duration over which
// the view moves on by at least d.
func (s *skewed) period(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return s.unscale(d)
}

func (s *skewed) Ticker(d time.Duration) *clock.Ticker  { return s.c.Ticker(s.period(d)) }
func (s *skewed) Tick(d time.Duration) <-chan time.Time { return s.c.Tick(s.period(d)) }

func (s *skewed) WithDeadline(parent context.Context, d time.Time) (context.Context, context.CancelFunc) {
	b := s.c.Now()
	due := b
	if v := s.at(b); d.After(v) {
		due = b.Add(s.baseFor(b, d.Sub(v)))
	}
	return s.c.withDeadline(parent, d, due)
}

func (s *skewed) WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return s.WithDeadline(parent, s.Now().Add(d))
}
