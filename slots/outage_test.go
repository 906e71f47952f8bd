package slots_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// TestOutageBacksOff checks that electors over a group whose store fails
// every call for a minute back off: the group's calls retry nothing on
// their own, so the electors' capped backoff bounds them, at most one call
// per RetryPeriod per elector over the outage (what a fixed-rate retry
// would reach); and once the store answers again the slots are led again.
func TestOutageBacksOff(t *testing.T) {
	clk := clocktest.New(time.Time{})
	store := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { store.Close() }) // after the electors stop
	f := faults.Wrap(store, clk)
	g := newGroup(t, f, 2)
	const (
		n           = 3
		retryPeriod = time.Second
		outage      = time.Minute
		step        = 100 * time.Millisecond
	)
	var recs []*electortest.Recorder
	var srcs []electortest.Source
	ctx := bound(t)
	for i := range n {
		rec := electortest.NewRecorder(t, clk)
		cfg := elector.Config{Key: "grp", Identity: fmt.Sprint("e", i), TTL: 10 * time.Second, RenewPeriod: 3 * time.Second,
			RetryPeriod: retryPeriod, Clock: clk, DisableJitter: true}
		rec.InstallCallbacks(&cfg)
		e, err := elector.New(g, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Stop(context.Background()) })
		recs, srcs = append(recs, rec), append(srcs, rec)
	}
	elected := func() int {
		total := 0
		for _, r := range recs {
			e, _ := r.Counts()
			total += e
		}
		return total
	}
	if err := electortest.Until(ctx, "two electors elected", func() bool { return elected() >= 2 }, srcs...); err != nil {
		t.Fatal(err)
	}
	limit := n * int(outage/retryPeriod)
	before := f.Calls(faults.AllOps)
	fault := f.Fail(faults.AllOps, 0, backends.ErrUnavailable)
	for start := clk.Now(); clk.Now().Sub(start) < outage; {
		if err := clk.AdvanceWhenBlocked(ctx, n, step); err != nil {
			t.Fatal(err)
		}
		if got := f.Calls(faults.AllOps) - before; got > limit {
			t.Fatalf("after %v of outage the electors made %d calls, want at most %d", clk.Now().Sub(start), got, limit)
		}
	}
	t.Logf("over %v of outage: %d calls from %d electors (RetryPeriod %v)", outage, f.Calls(faults.AllOps)-before, n, retryPeriod)
	fault.Remove()
	was := elected()
	for healed := clk.Now(); elected() < was+2; {
		if clk.Now().Sub(healed) > 30*time.Second {
			t.Fatal("the slots were not led again within 30s of the outage's end")
		}
		if err := clk.AdvanceWhenBlocked(ctx, n, step); err != nil {
			t.Fatal(err)
		}
	}
}
