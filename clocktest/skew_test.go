package clocktest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"testing"
	"time"
)

// refScale is floor(e × rate), computed with exact rationals: an
// independent check of skewed.scale.
func refScale(e time.Duration, rate float64) time.Duration {
	r := new(big.Rat).SetFloat64(rate)
	x := new(big.Rat).Mul(new(big.Rat).SetInt64(int64(e)), r)
	q := new(big.Int).Div(x.Num(), x.Denom()) // Euclidean: floor for a positive denominator
	return time.Duration(q.Int64())
}

// refUnscale is the least e with floor(e × rate) >= v, which for rate > 0
// is ceil(v / rate).
func refUnscale(v time.Duration, rate float64) time.Duration {
	r := new(big.Rat).SetFloat64(rate)
	x := new(big.Rat).Quo(new(big.Rat).SetInt64(int64(v)), r)
	q, m := new(big.Int).DivMod(x.Num(), x.Denom(), new(big.Int))
	if m.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return time.Duration(q.Int64())
}

var rates = []float64{1, 1.01, 0.99, 2, 0.5, 1.0 / 3, 1.000001, 7.25}

func TestSkewedNow(t *testing.T) {
	for _, rate := range rates {
		c := New(start)
		c.Add(time.Hour) // the view starts where the base is when Skewed is called
		origin := c.Now()
		v := c.Skewed(rate)
		if got := v.Now(); !got.Equal(origin) {
			t.Errorf("rate %v: view Now() at creation = %v, want %v", rate, got, origin)
		}
		var e time.Duration
		for _, step := range []time.Duration{1, 999, time.Millisecond, 17 * time.Second, 3 * time.Hour, 123456789} {
			c.Add(step)
			e += step
			want := origin.Add(refScale(e, rate))
			if got := v.Now(); !got.Equal(want) {
				t.Errorf("rate %v: after base %v: view Now() = %v, want %v", rate, e, got, want)
			}
			if got := v.Since(origin); got != want.Sub(origin) {
				t.Errorf("rate %v: Since(origin) = %v, want %v", rate, got, want.Sub(origin))
			}
			if got := v.Until(origin.Add(24 * time.Hour)); got != origin.Add(24*time.Hour).Sub(want) {
				t.Errorf("rate %v: Until = %v", rate, got)
			}
		}
	}
}

// TestSkewedTimerFiresAtViewDuration checks that a view's timer of d fires at
// the first base nanosecond at which the view has moved on by d, not one
// before.
func TestSkewedTimerFiresAtViewDuration(t *testing.T) {
	for _, rate := range rates {
		for _, d := range []time.Duration{1, 7, time.Second, 90 * time.Second, 5*time.Hour + 3} {
			t.Run(fmt.Sprintf("rate=%v/d=%v", rate, d), func(t *testing.T) {
				c := New(start)
				v := c.Skewed(rate)
				c.Add(1234567) // an odd offset, so the view's reading is not a round number
				e0 := c.Now().Sub(start)
				vNow := v.Now()
				want := refUnscale(refScale(e0, rate)+d, rate) - e0 // base time until it fires

				tm := v.Timer(d)
				ch := v.After(d)
				ran := make(chan time.Time, 1)
				v.AfterFunc(d, func() { ran <- v.Now() })
				if got := c.Waiters(); got != 3 {
					t.Fatalf("Waiters() = %d, want 3", got)
				}
				c.Add(want - 1)
				select {
				case <-tm.C:
					t.Fatalf("fired after %v of base time, want %v (view moved %v of %v)", want-1, want, v.Since(vNow), d)
				default:
				}
				if v.Since(vNow) >= d {
					t.Fatalf("view moved %v after %v of base time, want < %v", v.Since(vNow), want-1, d)
				}
				c.Add(1)
				select {
				case got := <-tm.C:
					if wantBase := start.Add(e0 + want); !got.Equal(wantBase) {
						t.Errorf("timer sent %v, want the base time %v", got, wantBase)
					}
				default:
					t.Fatalf("not fired after %v of base time", want)
				}
				<-ch
				if got := v.Since(vNow); got < d {
					t.Errorf("view moved %v at firing, want >= %v", got, d)
				}
				if got := <-ran; got.Sub(vNow) < d {
					t.Errorf("AfterFunc saw the view at +%v, want >= %v", got.Sub(vNow), d)
				}
			})
		}
	}
}

func TestSkewedTicker(t *testing.T) {
	c := New(start)
	v := c.Skewed(0.5) // half speed: a view second is two base seconds
	tk := v.Ticker(time.Second)
	defer tk.Stop()
	for i := 1; i <= 3; i++ {
		c.Add(2*time.Second - 1)
		select {
		case <-tk.C:
			t.Fatalf("tick %d early", i)
		default:
		}
		c.Add(1)
		<-tk.C
		if got, want := v.Now(), start.Add(time.Duration(i)*time.Second); !got.Equal(want) {
			t.Errorf("tick %d: view Now() = %v, want %v", i, got, want)
		}
	}
	if v.Tick(0) != nil {
		t.Error("view Tick(0) != nil")
	}
}

func TestSkewedSleepSignals(t *testing.T) {
	ctx := testCtx(t)
	c := New(start)
	v := c.Skewed(2) // double speed
	woke := make(chan time.Time)
	go func() {
		v.Sleep(time.Minute)
		woke <- v.Now()
	}()
	if err := c.AdvanceWhenBlocked(ctx, 1, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, want := <-woke, start.Add(time.Minute); !got.Equal(want) {
		t.Errorf("view Sleep(1m) woke with view at %v, want %v", got, want)
	}
	if n := c.spins.Load(); n != 0 {
		t.Errorf("BlockUntil polled %d times; want 0 (a view's Sleep signals)", n)
	}
}

func TestSkewedWithTimeout(t *testing.T) {
	c := New(start)
	v := c.Skewed(1.25)
	ctx, cancel := v.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if d, _ := ctx.Deadline(); !d.Equal(start.Add(10 * time.Second)) {
		t.Errorf("Deadline() = %v, want the view's %v", d, start.Add(10*time.Second))
	}
	c.Add(8*time.Second - 1)
	if ctx.Err() != nil {
		t.Fatalf("expired at view %v, before its deadline", v.Now())
	}
	c.Add(1) // base 8s is view 10s
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("at the view's deadline: Err() = %v, want context.DeadlineExceeded", ctx.Err())
	}
	past, cancelPast := v.WithDeadline(t.Context(), v.Now())
	defer cancelPast()
	if !errors.Is(past.Err(), context.DeadlineExceeded) {
		t.Errorf("deadline at the view's now: Err() = %v, want context.DeadlineExceeded", past.Err())
	}
}

func TestSkewedLongDurations(t *testing.T) {
	c := New(start)
	for _, rate := range []float64{0.5, 2, 1e-12} {
		v := c.Skewed(rate)
		tm := v.Timer(math.MaxInt64) // "never": must not overflow into the past
		c.Add(time.Hour)
		select {
		case <-tm.C:
			t.Errorf("rate %v: Timer(MaxInt64) fired after an hour", rate)
		default:
		}
		tm.Stop()
	}
}

func TestSkewedRejectsBadRates(t *testing.T) {
	for _, rate := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Skewed(%v) did not panic", rate)
				}
			}()
			New(start).Skewed(rate)
		}()
	}
}
