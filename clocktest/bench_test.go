package clocktest

import (
	"context"
	"testing"
	"time"
)

// The dependency's Mock sleeps 1 ms of real time at the end of every Add
// and Set and after every timer or tick it fires. These benchmarks measure
// what that costs; the package doc quotes them.

func BenchmarkAddNothingDue(b *testing.B) {
	c := New(start)
	for b.Loop() {
		c.Add(time.Second)
	}
}

func BenchmarkAddOneTimer(b *testing.B) {
	c := New(start)
	for b.Loop() {
		c.After(time.Second)
		c.Add(time.Second)
	}
}

func BenchmarkAddTenTicks(b *testing.B) {
	c := New(start)
	tk := c.Ticker(time.Second)
	defer tk.Stop()
	for b.Loop() {
		c.Add(10 * time.Second)
		<-tk.C
	}
}

func BenchmarkAdvanceWhenBlocked(b *testing.B) {
	ctx := context.Background()
	c := New(start)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-c.After(time.Second):
			case <-stop:
				return
			}
		}
	}()
	for b.Loop() {
		if err := c.AdvanceWhenBlocked(ctx, 1, time.Second); err != nil {
			b.Fatal(err)
		}
	}
	close(stop)
	<-done
}

func BenchmarkWaiters(b *testing.B) {
	c := New(start)
	for range 10 {
		c.After(time.Hour)
	}
	for b.Loop() {
		c.Waiters()
	}
}
