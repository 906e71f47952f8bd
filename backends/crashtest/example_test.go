package crashtest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/crashtest"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
)

// A test of failover crashes the leader's process without killing it: the
// leader runs over a wrapper of the shared store, and Crash makes it stop
// renewing without releasing. Its term ends by its own deadline, and the
// follower takes the claim once it has expired, a TTL after the leader's
// last renewal.
func Example() {
	clk := clocktest.New(time.Time{})
	inner := memstore.New(memstore.WithClock(clk))
	defer inner.Close()
	crashing := crashtest.Wrap(inner) // host-a's store: host-a is the process to crash

	demoted := make(chan elector.Cause, 1)
	elected := make(chan elector.Term, 2)
	start := func(s backends.Store, id string) *elector.Elector {
		locker, err := backends.NewLocker(s)
		if err != nil {
			panic(err)
		}
		e, err := elector.New(locker, elector.Config{
			Key: "indexer/leader", Identity: id, TTL: 15 * time.Second, Clock: clk, DisableJitter: true,
			OnElected: func(ctx context.Context, term elector.Term) { elected <- term },
			OnDemoted: func(_ elector.Term, cause elector.Cause) { demoted <- cause },
		})
		if err != nil {
			panic(err)
		}
		if err := e.Start(context.Background()); err != nil {
			panic(err)
		}
		return e
	}
	a := start(crashing, "host-a")
	term := <-elected
	fmt.Println("host-a leads with token", term.Token)
	b := start(inner, "host-b")
	defer b.Stop(context.Background())
	defer a.Stop(context.Background()) // its release fails: it crashed

	crashing.Crash()
	crashedAt := clk.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(elected) == 0 {
		if clk.Since(crashedAt) > time.Minute {
			panic("no takeover within a minute of the crash")
		}
		// Step the fake clock once both electors wait on a timer.
		if err := clk.BlockUntil(ctx, 2); err != nil {
			panic(err)
		}
		clk.Add(100 * time.Millisecond)
	}
	fmt.Println("host-a demoted:", (<-demoted).Reason)
	next := <-elected
	fmt.Printf("host-b leads with token %d, %v after the crash\n",
		next.Token, next.AcquiredAt.Sub(crashedAt).Round(time.Second))
	// Output:
	// host-a leads with token 1
	// host-a demoted: expired
	// host-b leads with token 3, 15s after the crash
}
