package elector_test

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// TestOutageBacksOff checks that a leader and a follower whose store fails
// every call for a minute back off: together they make at most one request
// per RetryPeriod each over the outage, which a retry at a fixed
// RetryPeriod would reach and the capped exponential backoff stays well
// under; and once the store answers again one of them leads.
func TestOutageBacksOff(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	ms := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { ms.Close() })
	storeA, storeB := faults.Wrap(ms, clk), faults.Wrap(ms, clk)
	lockerA, err := backends.NewLocker(storeA)
	if err != nil {
		t.Fatal(err)
	}
	lockerB, err := backends.NewLocker(storeB)
	if err != nil {
		t.Fatal(err)
	}
	cfgA, _, oA, _ := loggedConfig(t, clk, "a")
	startElector(t, lockerA, cfgA)
	oA.Await(t, ctx, electortest.Won, 1)
	cfgB, _, oB, _ := loggedConfig(t, clk, "b")
	startElector(t, lockerB, cfgB)
	oB.Await(t, ctx, electortest.Lost, 1)

	const outage = time.Minute
	const step = 100 * time.Millisecond
	limit := 2 * int(outage/retryPeriod)
	before := storeA.Calls(requests) + storeB.Calls(requests)
	failA := storeA.Fail(faults.AllOps, 0, backends.ErrUnavailable)
	failB := storeB.Fail(faults.AllOps, 0, backends.ErrUnavailable)
	for start := clk.Now(); clk.Now().Sub(start) < outage; {
		// Each elector has a timer armed whenever it waits.
		if err := clk.AdvanceWhenBlocked(ctx, 2, step); err != nil {
			t.Fatal(err)
		}
		if got := storeA.Calls(requests) + storeB.Calls(requests) - before; got > limit {
			t.Fatalf("after %v of outage the electors made %d requests, want at most %d", clk.Now().Sub(start), got, limit)
		}
	}
	got := storeA.Calls(requests) + storeB.Calls(requests) - before
	t.Logf("over %v of outage: %d requests from two electors (RetryPeriod %v, TTL %v)", outage, got, retryPeriod, ttl)
	failA.Remove()
	failB.Remove()
	won := func() bool { return oA.Count(electortest.Won)+oB.Count(electortest.Won) >= 2 }
	for healed := clk.Now(); !won(); {
		if clk.Now().Sub(healed) > 3*ttl {
			t.Fatalf("no elector led again within %v of the outage's end", 3*ttl)
		}
		if err := clk.AdvanceWhenBlocked(ctx, 2, step); err != nil {
			t.Fatalf("no elector led again after the outage: %v", err)
		}
	}
}
