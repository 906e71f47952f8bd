package clocktest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNewStart(t *testing.T) {
	if got, want := New(time.Time{}).Now(), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("New(zero).Now() = %v, want %v", got, want)
	}
	if got := New(start).Now(); !got.Equal(start) {
		t.Errorf("New(%v).Now() = %v", start, got)
	}
}

func TestNowSinceUntil(t *testing.T) {
	c := New(start)
	c.Add(90 * time.Second)
	if got, want := c.Now(), start.Add(90*time.Second); !got.Equal(want) {
		t.Errorf("after Add(90s): Now() = %v, want %v", got, want)
	}
	if got := c.Since(start); got != 90*time.Second {
		t.Errorf("Since(start) = %v, want 90s", got)
	}
	if got := c.Until(start.Add(time.Hour)); got != time.Hour-90*time.Second {
		t.Errorf("Until(start+1h) = %v, want 58m30s", got)
	}
	at := start.Add(-time.Hour)
	c.Set(at)
	if got := c.Now(); !got.Equal(at) {
		t.Errorf("after Set(%v): Now() = %v", at, got)
	}
}

// TestTimersFireInDeadlineOrder arms timers in scrambled order and advances
// one second at a time: after each step exactly the timers due by then have
// fired, each with its own deadline as the time sent.
func TestTimersFireInDeadlineOrder(t *testing.T) {
	c := New(start)
	secs := []int{5, 1, 4, 2, 3, 2}
	chans := make([]<-chan time.Time, len(secs))
	for i, s := range secs {
		chans[i] = c.After(time.Duration(s) * time.Second)
	}
	for now := 1; now <= 5; now++ {
		c.Add(time.Second)
		for i, s := range secs {
			select {
			case got := <-chans[i]:
				if s != now {
					t.Errorf("timer %d (due %ds) fired at step %ds", i, s, now)
				}
				if want := start.Add(time.Duration(s) * time.Second); !got.Equal(want) {
					t.Errorf("timer %d (due %ds) sent %v, want %v", i, s, got, want)
				}
			default:
				if s == now {
					t.Errorf("timer %d (due %ds) had not fired by step %ds", i, s, now)
				}
			}
		}
	}
	if got := c.Waiters(); got != 0 {
		t.Errorf("Waiters() = %d after all fired, want 0", got)
	}
}

// TestOneAddFiresEachTimerAtItsDeadline checks that a single Add past every
// deadline sends each timer its own deadline, not the final time.
func TestOneAddFiresEachTimerAtItsDeadline(t *testing.T) {
	c := New(start)
	secs := []int{3, 1, 2}
	chans := make([]<-chan time.Time, len(secs))
	for i, s := range secs {
		chans[i] = c.After(time.Duration(s) * time.Second)
	}
	c.Add(10 * time.Second)
	for i, s := range secs {
		select {
		case got := <-chans[i]:
			if want := start.Add(time.Duration(s) * time.Second); !got.Equal(want) {
				t.Errorf("timer due %ds sent %v, want %v", s, got, want)
			}
		default:
			t.Errorf("timer due %ds had not fired after Add(10s)", s)
		}
	}
	if got, want := c.Now(), start.Add(10*time.Second); !got.Equal(want) {
		t.Errorf("Now() = %v, want %v", got, want)
	}
}

func TestStop(t *testing.T) {
	c := New(start)
	tm := c.Timer(time.Second)
	keep := c.Timer(time.Second)
	if got := c.Waiters(); got != 2 {
		t.Fatalf("Waiters() = %d, want 2", got)
	}
	if !tm.Stop() {
		t.Error("first Stop() = false, want true")
	}
	if tm.Stop() {
		t.Error("second Stop() = true, want false")
	}
	if got := c.Waiters(); got != 1 {
		t.Errorf("Waiters() after Stop = %d, want 1", got)
	}
	c.Add(time.Hour)
	select {
	case v := <-tm.C:
		t.Errorf("stopped timer fired: %v", v)
	default:
	}
	select {
	case <-keep.C:
	default:
		t.Error("the timer that was not stopped did not fire")
	}
	if keep.Stop() {
		t.Error("Stop() of a fired timer = true, want false")
	}

	ran := make(chan struct{})
	af := c.AfterFunc(time.Second, func() { close(ran) })
	if !af.Stop() {
		t.Error("AfterFunc Stop() = false, want true")
	}
	c.Add(time.Hour)
	if got := c.Waiters(); got != 0 {
		t.Errorf("Waiters() = %d, want 0", got)
	}
	select {
	case <-ran:
		t.Error("stopped AfterFunc ran")
	default: // Add starts a due AfterFunc's goroutine before returning, and the mock no longer knows this one.
	}
}

func TestAfterFunc(t *testing.T) {
	c := New(start)
	ran := make(chan time.Time, 1)
	c.AfterFunc(5*time.Second, func() { ran <- c.Now() })
	c.Add(4 * time.Second)
	select {
	case <-ran:
		t.Fatal("AfterFunc(5s) ran after 4s")
	default: // only Add starts it, and Add has returned
	}
	c.Add(time.Second)
	if got, want := <-ran, start.Add(5*time.Second); got.Before(want) {
		t.Errorf("AfterFunc(5s) saw Now() = %v, want >= %v", got, want)
	}

	for _, d := range []time.Duration{0, -time.Second} {
		done := make(chan struct{})
		c.AfterFunc(d, func() { close(done) })
		<-done // runs without an Add
	}
	if got, want := c.Now(), start.Add(5*time.Second); !got.Equal(want) {
		t.Errorf("zero-duration AfterFuncs moved the clock to %v, want %v", got, want)
	}
	if got := c.Waiters(); got != 0 {
		t.Errorf("Waiters() = %d, want 0", got)
	}
}

func TestZeroDurationTimersFireAtOnce(t *testing.T) {
	c := New(start)
	for _, d := range []time.Duration{0, -time.Second} {
		if got := <-c.After(d); !got.Equal(start) {
			t.Errorf("After(%v) sent %v, want %v", d, got, start)
		}
		if got := <-c.Timer(d).C; !got.Equal(start) {
			t.Errorf("Timer(%v) sent %v, want %v", d, got, start)
		}
	}
	if got := c.Now(); !got.Equal(start) {
		t.Errorf("Now() = %v, want %v", got, start)
	}
}

func TestTicker(t *testing.T) {
	c := New(start)
	tk := c.Ticker(time.Second)
	expect := func(step string, want time.Time) {
		t.Helper()
		select {
		case got := <-tk.C:
			if !got.Equal(want) {
				t.Errorf("%s: tick %v, want %v", step, got, want)
			}
		default:
			t.Errorf("%s: no tick, want %v", step, want)
		}
		select {
		case got := <-tk.C:
			t.Errorf("%s: second tick %v", step, got)
		default:
		}
	}
	c.Add(time.Second)
	expect("Add(1s)", start.Add(time.Second))
	c.Add(time.Second)
	expect("Add(1s) again", start.Add(2*time.Second))
	c.Add(3 * time.Second) // ticks at 3s, 4s, 5s: the channel holds the first, the rest are dropped
	expect("Add(3s)", start.Add(3*time.Second))
	c.Add(time.Second)
	expect("Add(1s) after drops", start.Add(6*time.Second))
	if got := c.Waiters(); got != 1 {
		t.Errorf("Waiters() with a running ticker = %d, want 1", got)
	}
	tk.Stop()
	if got := c.Waiters(); got != 0 {
		t.Errorf("Waiters() after Stop = %d, want 0", got)
	}
	c.Add(time.Hour)
	select {
	case got := <-tk.C:
		t.Errorf("stopped ticker ticked: %v", got)
	default:
	}
	tk.Reset(2 * time.Second)
	c.Add(2 * time.Second)
	expect("after Reset(2s), Add(2s)", c.Now())

	tick := c.Tick(time.Minute)
	c.Add(time.Minute)
	if got, want := <-tick, c.Now(); !got.Equal(want) {
		t.Errorf("Tick(1m): tick %v, want %v", got, want)
	}
	tk.Stop()
	if got := c.Waiters(); got != 1 {
		t.Errorf("Waiters() with a Tick = %d, want 1 (it never stops)", got)
	}
	if c.Tick(0) != nil {
		t.Error("Tick(0) != nil")
	}
}

func TestTickerRejectsNonPositive(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Ticker(%v) did not panic", d)
				}
			}()
			New(start).Ticker(d)
		}()
	}
}

func TestSleep(t *testing.T) {
	c := New(start)
	c.Sleep(0)
	c.Sleep(-time.Second)
	woke := make(chan time.Time)
	go func() {
		c.Sleep(time.Minute)
		woke <- c.Now()
	}()
	if err := c.AdvanceWhenBlocked(testCtx(t), 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, want := <-woke, start.Add(time.Minute); !got.Equal(want) {
		t.Errorf("Sleep(1m) woke at %v, want %v", got, want)
	}
}

// TestBlockUntilIsABarrier proves BlockUntil is a barrier: a goroutine
// records each wake-up in a plain variable and then arms its next timer;
// once BlockUntil has seen that timer, the test reads the variable without
// further synchronisation. A missed wake-up hangs (and fails on the guard
// context), an early return reads a stale value, and a missing
// happens-before edge is a data race. With only After in play, BlockUntil
// must never poll.
func TestBlockUntilIsABarrier(t *testing.T) {
	const rounds = 1000
	ctx := testCtx(t)
	c := New(start)
	var woke int // written by the goroutine, read by the test after BlockUntil
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= rounds; i++ {
			<-c.After(time.Second)
			woke = i
		}
	}()
	for i := 0; i < rounds; i++ {
		if err := c.BlockUntil(ctx, 1); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if woke != i {
			t.Fatalf("round %d: BlockUntil returned with woke = %d, want %d", i, woke, i)
		}
		c.Add(time.Second)
	}
	<-done
	if woke != rounds {
		t.Errorf("woke = %d, want %d", woke, rounds)
	}
	if n := c.spins.Load(); n != 0 {
		t.Errorf("BlockUntil polled %d times on a clock that handed out no timer; want 0 (signals only)", n)
	}
}

// TestBlockUntilSeesReset is the barrier again with a Timer re-armed by
// Reset, which cannot signal: BlockUntil must see it anyway.
func TestBlockUntilSeesReset(t *testing.T) {
	const rounds = 200
	ctx := testCtx(t)
	c := New(start)
	var woke int
	done := make(chan struct{})
	go func() {
		defer close(done)
		tm := c.Timer(time.Second)
		for i := 1; i <= rounds; i++ {
			<-tm.C
			woke = i
			if i < rounds {
				tm.Reset(time.Second)
			}
		}
	}()
	for i := 0; i < rounds; i++ {
		if err := c.BlockUntil(ctx, 1); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if woke != i {
			t.Fatalf("round %d: BlockUntil returned with woke = %d, want %d", i, woke, i)
		}
		c.Add(time.Second)
	}
	<-done
	if woke != rounds {
		t.Errorf("woke = %d, want %d", woke, rounds)
	}
}

func TestBlockUntilHonoursContext(t *testing.T) {
	c := New(start)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.BlockUntil(cancelled, 0); err != nil {
		t.Errorf("BlockUntil(cancelled, 0) = %v, want nil: the count is checked first", err)
	}
	err := c.BlockUntil(cancelled, 1)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting for 1 armed timers, have 0") {
		t.Errorf("BlockUntil(cancelled, 1) = %v, want an error wrapping context.Canceled that gives the counts", err)
	}
	if err := c.AdvanceWhenBlocked(cancelled, 1, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("AdvanceWhenBlocked(cancelled, ...) = %v, want context.Canceled", err)
	}
	if got := c.Now(); !got.Equal(start) {
		t.Errorf("a failed AdvanceWhenBlocked moved the clock to %v", got)
	}

	// A context that expires while BlockUntil waits: its deadline is on a
	// second fake clock, advanced from another goroutine.
	other := New(start)
	ctx, cancelCtx := other.WithTimeout(t.Context(), time.Second)
	defer cancelCtx()
	advanced := make(chan struct{})
	go func() {
		defer close(advanced)
		other.Add(time.Second)
	}()
	if err := c.BlockUntil(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("BlockUntil(expiring ctx, 1) = %v, want context.DeadlineExceeded", err)
	}
	<-advanced

	// The same in polling mode.
	c.Timer(time.Hour).Stop()
	ctx2, cancel2 := context.WithCancel(t.Context())
	go cancel2()
	if err := c.BlockUntil(ctx2, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("polling BlockUntil(cancelled ctx, 1) = %v, want context.Canceled", err)
	}
}

func TestBlockUntilWaitsForSeveral(t *testing.T) {
	ctx := testCtx(t)
	c := New(start)
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { c.Sleep(time.Duration(i+1) * time.Second) })
	}
	if err := c.AdvanceWhenBlocked(ctx, n, n*time.Second); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := c.Waiters(); got != 0 {
		t.Errorf("Waiters() = %d, want 0", got)
	}
}

func TestConcurrentAdds(t *testing.T) {
	c := New(start)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				c.Add(time.Second)
			}
		})
	}
	wg.Wait()
	if got, want := c.Now(), start.Add(20*time.Second); !got.Equal(want) {
		t.Errorf("after 20 concurrent Add(1s): Now() = %v, want %v", got, want)
	}
}

// TestTimerMadeDuringAddFiresOthersOnce checks that the mock's Timer
// constructor fires whatever timer is due, and Add releases the mock's lock
// between choosing a timer and firing it; a Timer made by another goroutine
// in that window would fire Add's timer a second time (a channel timer then
// deadlocks the clock). Every AfterFunc here must run exactly once while
// other goroutines keep making timers.
func TestTimerMadeDuringAddFiresOthersOnce(t *testing.T) {
	c := New(start)
	const rounds = 200
	ran := make(chan int, 2*rounds) // a double run must not block
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.Timer(time.Hour).Stop()
			}
		}()
	}
	for i := range rounds {
		c.AfterFunc(time.Second, func() { ran <- i })
		c.Add(time.Second)
	}
	close(stop)
	wg.Wait()
	// Every AfterFunc has been started; collect each round's first run,
	// failing on any second run seen meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	seen := make(map[int]bool, rounds)
	for len(seen) < rounds {
		select {
		case i := <-ran:
			if seen[i] {
				t.Fatalf("the AfterFunc of round %d ran twice", i)
			}
			seen[i] = true
		case <-ctx.Done():
			t.Fatalf("%d of %d AfterFuncs ran", len(seen), rounds)
		}
	}
}
