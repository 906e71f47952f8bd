package allocator

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// TestOutageBacksOff checks that an allocator started while its store fails
// every call does not spin through a minute of outage: its watch is retried
// with a capped, growing wait (at most one attempt per maxRewatch once at
// the cap, after the few doublings from minRewatch), garbage collection runs
// once per GCInterval, and an Allocate made meanwhile gives up after a
// bounded number of calls; once the store answers, Allocate works.
func TestOutageBacksOff(t *testing.T) {
	s, _ := newMem(t)
	f := faults.Wrap(s, nil)
	fault := f.Fail(faults.AllOps, 0, backends.ErrUnavailable)
	// The allocator's own clock: its timers are the renewal and collection
	// tickers and the watch's retry.
	clk := clocktest.New(epoch)
	cfg := testConfig("a", clk)
	cfg.GCInterval = 10 * time.Second
	a := newAllocator(t, f, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const (
		outage = time.Minute
		step   = 50 * time.Millisecond
	)
	// The watch's waits double from minRewatch to maxRewatch, then stay there.
	doublings := 0
	for d := minRewatch; d < maxRewatch; d *= 2 {
		doublings++
	}
	watches := doublings + 2*int(outage/maxRewatch)
	others := 4 * int(outage/cfg.GCInterval)
	for start := clk.Now(); clk.Now().Sub(start) < outage; {
		if err := clk.AdvanceWhenBlocked(ctx, 3, step); err != nil {
			t.Fatal(err)
		}
		if got := f.Calls(faults.OpWatch); got > watches {
			t.Fatalf("after %v of outage the allocator opened its watch %d times, want at most %d", clk.Now().Sub(start), got, watches)
		}
	}
	before := f.Calls(faults.AllOps)
	if _, _, err := a.Allocate(ctx, "K"); err == nil {
		t.Fatal("Allocate during the outage succeeded")
	}
	allocCalls := f.Calls(faults.AllOps) - before
	w, all := f.Calls(faults.OpWatch), f.Calls(faults.AllOps)
	t.Logf("over %v of outage: %d watch attempts, %d calls in all; an Allocate made %d calls", outage, w, all, allocCalls)
	if all-w-allocCalls > others {
		t.Errorf("besides its watch the allocator made %d calls over %v of outage, want at most %d", all-w-allocCalls, outage, others)
	}
	if allocCalls > 8 {
		t.Errorf("an Allocate during the outage made %d calls, want at most 8", allocCalls)
	}
	fault.Remove()
	if _, _, err := a.Allocate(ctx, "K"); err != nil {
		t.Fatalf("Allocate after the outage: %v", err)
	}
}
