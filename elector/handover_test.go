package elector_test

import (
	"context"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// requests are the store operations that are requests to the backend: all
// but opening a watch.
const requests = faults.OpGet | faults.OpList | faults.OpCreate | faults.OpCompareAndSet |
	faults.OpCompareAndDelete | faults.OpKeepAlive | faults.OpTxn

// distributed declares its store's guarantees distributed, as etcd's are.
type distributed struct{ *faults.Store }

func (d distributed) Capabilities() backends.Capabilities {
	c := d.Store.Capabilities()
	c.Scope = backends.ScopeDistributed
	return c
}

// TestHandoverRoundTrips checks that a graceful handover on a store with
// transactions costs few requests in a row: the leader's release, then the
// follower's acquisition, a single transaction that also checks the key is no
// slot group, on a distributed store as on any other (a store whose write
// needs a request of its own first checks the conditions inside its Txn:
// package etcd counts those). The follower, waiting on its watch, sends
// nothing before the release, and its requests after it make it the leader.
func TestHandoverRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		name        string
		distributed bool
		want        int // transactions from the release to leading
	}{
		{"one process", false, 1},
		{"distributed", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.New(t0)
			ctx := barrier(t)
			ms := memstore.New(memstore.WithClock(clk))
			t.Cleanup(func() { ms.Close() })
			// One counting store per process.
			storeA, storeB := faults.Wrap(ms, clk), faults.Wrap(ms, clk)
			var inA, inB backends.Store = storeA, storeB
			if tc.distributed {
				inA, inB = distributed{storeA}, distributed{storeB}
			}
			lockerA, err := backends.NewLocker(inA)
			if err != nil {
				t.Fatal(err)
			}
			lockerB, err := backends.NewLocker(inB)
			if err != nil {
				t.Fatal(err)
			}

			cfgA, _, oA, _ := loggedConfig(t, clk, "a")
			a := startElector(t, lockerA, cfgA)
			oA.Await(t, ctx, electortest.Won, 1)
			cfgB, _, oB, _ := loggedConfig(t, clk, "b")
			startElector(t, lockerB, cfgB)
			oB.Await(t, ctx, electortest.Lost, 1)
			if got := storeB.Calls(requests); got != 1 {
				t.Errorf("the follower's attempt that met the held claim made %d requests, want 1", got)
			}
			if got := storeB.Calls(requests &^ faults.OpTxn); got != 0 {
				t.Errorf("the follower's attempt made %d requests besides transactions, want none", got)
			}

			beforeA, beforeB := storeA.Calls(requests), storeB.Calls(requests)
			txns := storeB.Calls(faults.OpTxn)
			if err := a.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
			won := oB.Await(t, ctx, electortest.Won, 1)
			if got := storeA.Calls(requests) - beforeA; got != 1 {
				t.Errorf("the leader's stop made %d requests, want 1 (its release)", got)
			}
			if got, gotTxns := storeB.Calls(requests)-beforeB, storeB.Calls(faults.OpTxn)-txns; got != tc.want || gotTxns != tc.want {
				t.Errorf("from the release to leading (token %d), the follower made %d requests, %d of them transactions; want %d transactions only",
					won.Term.Token, got, gotTxns, tc.want)
			}
		})
	}
}
