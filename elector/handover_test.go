package elector_test

import (
	"context"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/internal/electortest"
	"github.com/tenure-go/tenure/internal/faults"
)

// requests are the store operations that are requests to the backend: all
// but opening a watch.
const requests = faults.OpGet | faults.OpList | faults.OpCreate | faults.OpCompareAndSet |
	faults.OpCompareAndDelete | faults.OpKeepAlive | faults.OpTxn

// A graceful handover on a store with transactions costs two requests in
// a row: the leader's release, then the follower's acquisition, a single
// transaction that also checks the key is no slot group. The follower,
// waiting on its watch, sends nothing before the release, and its first
// request after it makes it the leader.
func TestHandoverRoundTrips(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	ms := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { ms.Close() })
	// One counting store per process.
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
	a := startElector(t, lockerA, cfgA)
	oA.Await(t, ctx, electortest.Won, 1)
	cfgB, _, oB, _ := loggedConfig(t, clk, "b")
	startElector(t, lockerB, cfgB)
	oB.Await(t, ctx, electortest.Lost, 1)

	beforeA, beforeB := storeA.Calls(requests), storeB.Calls(requests)
	creates, reads, txns := storeB.Calls(faults.OpCreate), storeB.Calls(faults.OpGet), storeB.Calls(faults.OpTxn)
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	won := oB.Await(t, ctx, electortest.Won, 1)
	if got := storeA.Calls(requests) - beforeA; got != 1 {
		t.Errorf("the leader's stop made %d requests, want 1 (its release)", got)
	}
	if got := storeB.Calls(requests) - beforeB; got != 1 {
		t.Errorf("from the release to leading (token %d), the follower made %d requests, want 1 (%d creates, %d reads, %d transactions)",
			won.Term.Token, got, storeB.Calls(faults.OpCreate)-creates, storeB.Calls(faults.OpGet)-reads, storeB.Calls(faults.OpTxn)-txns)
	}
}
