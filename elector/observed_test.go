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

// noExpiryEvents is a store whose watch does not signal expiry and which,
// if observed, judges expiry by local observation, as PostgreSQL's does.
type noExpiryEvents struct {
	*faults.Store
	observed bool
}

func (o noExpiryEvents) Capabilities() backends.Capabilities {
	c := o.Store.Capabilities()
	c.ObservedExpiry, c.ExpiryEvents = o.observed, false
	return c
}

// TestObservedExpiryFollowerReadsEveryRenewPeriod checks that a follower on
// a store that judges expiry by local observation reads the claim once per
// RenewPeriod while the holder renews, however much time the store
// reported left: there a claim expires a TTL after the follower first saw
// the holder's last renewal, so it must see that renewal within a renew
// period. On a store without expiry events whose expiry is judged
// otherwise the same follower waits for the reported expiry, and reads
// about once per TTL less a renew period.
func TestObservedExpiryFollowerReadsEveryRenewPeriod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		observed bool
		min, max int // the follower's attempts over the window
	}{
		{"observed", true, 9, 11},
		{"judged by the store", false, 2, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.New(t0)
			ctx := barrier(t)
			ms := memstore.New(memstore.WithClock(clk))
			t.Cleanup(func() { ms.Close() })
			counted := faults.Wrap(ms, clk)
			lockerB, err := backends.NewLocker(noExpiryEvents{counted, tc.observed})
			if err != nil {
				t.Fatal(err)
			}
			lockerA, err := backends.NewLocker(ms)
			if err != nil {
				t.Fatal(err)
			}
			cfgA, _, oA, _ := loggedConfig(t, clk, "a")
			startElector(t, lockerA, cfgA)
			oA.Await(t, ctx, electortest.Won, 1)
			cfgB, _, oB, _ := loggedConfig(t, clk, "b")
			startElector(t, lockerB, cfgB)
			oB.Await(t, ctx, electortest.Lost, 1)

			const window = 3 * ttl
			before := counted.Calls(requests)
			for start := clk.Now(); clk.Now().Sub(start) < window; {
				// The leader's renewal timer and the follower's wait.
				if err := clk.AdvanceWhenBlocked(ctx, 2, 100*time.Millisecond); err != nil {
					t.Fatal(err)
				}
			}
			got := counted.Calls(requests) - before
			t.Logf("over %v the follower made %d requests (TTL %v, RenewPeriod %v)", window, got, ttl, renewPeriod)
			if got < tc.min || got > tc.max {
				t.Errorf("over %v the follower made %d requests, want %d to %d", window, got, tc.min, tc.max)
			}
			if n := oB.Count(electortest.Won); n != 0 {
				t.Errorf("the follower won %d times while the leader renewed", n)
			}
		})
	}
}
