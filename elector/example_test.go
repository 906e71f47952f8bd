package elector_test

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
)

// The leader's work runs in OnElected, under a context that ends when the
// leadership does; OnDemoted says why it ended. Real programs use the real
// clock (the default) and a shared backend; this one runs on a memory store
// and a fake clock.
func Example() {
	clk := clocktest.New(time.Time{})
	store := memstore.New(memstore.WithClock(clk))
	defer store.Close()
	locker, err := backends.NewLocker(store)
	if err != nil {
		panic(err)
	}

	working, demoted := make(chan struct{}), make(chan struct{})
	e, err := elector.New(locker, elector.Config{
		Key:      "indexer/leader",
		Identity: "host-a",
		Clock:    clk,
		OnElected: func(ctx context.Context, term elector.Term) {
			fmt.Printf("elected: token %d\n", term.Token)
			close(working)
			<-ctx.Done() // the leader's main loop: run until ctx is done
			fmt.Println("stop working:", context.Cause(ctx))
		},
		OnDemoted: func(term elector.Term, cause elector.Cause) {
			fmt.Printf("demoted: token %d, %s\n", term.Token, cause.Reason)
			close(demoted)
		},
	})
	if err != nil {
		panic(err)
	}
	if err := e.Start(context.Background()); err != nil {
		panic(err)
	}
	<-working
	fmt.Println("leader:", e.IsLeader())

	// Stop cancels the leader's context, waits for OnElected to return,
	// releases the claim and reports the demotion.
	if err := e.Stop(context.Background()); err != nil {
		panic(err)
	}
	<-demoted
	fmt.Println("leader:", e.IsLeader(), "state:", e.State())
	// Output:
	// elected: token 1
	// leader: true
	// stop working: elector: demoted: stopped
	// demoted: token 1, stopped
	// leader: false state: stopped
}

// A main loop can instead check IsLeader before each unit of work. IsLeader
// turns false at the end of the term, before the local deadline, even if the
// elector is stuck, but there is no drain: writes to shared resources must
// carry the term's token.
func Example_isLeader() {
	clk := clocktest.New(time.Time{})
	store := memstore.New(memstore.WithClock(clk))
	defer store.Close()
	locker, err := backends.NewLocker(store)
	if err != nil {
		panic(err)
	}
	start := func(id string) *elector.Elector {
		e, err := elector.New(locker, elector.Config{Key: "indexer/leader", Identity: id, Clock: clk})
		if err != nil {
			panic(err)
		}
		if err := e.Start(context.Background()); err != nil {
			panic(err)
		}
		return e
	}
	a := start("host-a")
	waitUntil(a.IsLeader)
	b := start("host-b")
	defer b.Stop(context.Background())

	nodes := []struct {
		name string
		e    *elector.Elector
	}{{"host-a", a}, {"host-b", b}}
	for round := 1; round <= 4; round++ {
		if round == 3 { // host-a shuts down; host-b, watching, takes over
			a.Stop(context.Background())
			waitUntil(b.IsLeader)
		}
		for _, n := range nodes {
			if term, ok := n.e.Term(); ok {
				fmt.Printf("round %d: %s works with token %d\n", round, n.name, term.Token)
			}
		}
		clk.Add(time.Second)
	}
	// Output:
	// round 1: host-a works with token 1
	// round 2: host-a works with token 1
	// round 3: host-b works with token 3
	// round 4: host-b works with token 3
}

// waitUntil yields until cond holds (bounded: examples must not hang).
func waitUntil(cond func() bool) {
	for i := 0; !cond(); i++ {
		if i == 10_000_000 {
			panic("condition never held")
		}
		runtime.Gosched()
	}
}
