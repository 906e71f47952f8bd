package shards_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/shards"
)

// A member campaigns for the shards placed on it; each owned shard's work
// runs in OnAcquired under the shard's term. Real programs use the real clock
// and a shared backend; this one runs alone on a memory store and a fake
// clock, so it owns every shard.
func Example() {
	clk := clocktest.New(time.Time{})
	store := memstore.New(memstore.WithClock(clk))
	defer store.Close()

	var acquired sync.WaitGroup
	acquired.Add(4)
	m, err := shards.New(store, shards.Config{
		Group:    "kv",
		Identity: "host-a",
		Count:    4,
		Elector:  elector.Config{Clock: clk},
		OnAcquired: func(ctx context.Context, shard int, term elector.Term) {
			acquired.Done()
			<-ctx.Done() // serve the shard until the ownership ends
		},
	})
	if err != nil {
		panic(err)
	}
	if err := m.Start(context.Background()); err != nil {
		panic(err)
	}
	acquired.Wait()

	shard := m.ShardOf("user/42")
	owner, _ := m.Owner(shard)
	term, owned := m.Term(shard)
	fmt.Println("owned:", m.Owned())
	fmt.Printf("user/42 is in shard %d, owned here: %v, token carried by writes: %v\n", shard, owned, term.Token > 0)
	fmt.Println("observed owner:", owner.Holder.ID)

	if err := m.Stop(context.Background()); err != nil {
		panic(err)
	}
	fmt.Println("after stop:", m.Owned())
	// Output:
	// owned: [0 1 2 3]
	// user/42 is in shard 1, owned here: true, token carried by writes: true
	// observed owner: host-a
	// after stop: []
}
