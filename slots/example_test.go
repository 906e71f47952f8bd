package slots_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/slots"
)

// Two of three indexers may serve at once: the third is told who holds the
// group, and gets a slot as soon as one is released.
func Example() {
	store := memstore.New()
	defer store.Close()
	group, err := slots.New(store, slots.Config{Size: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	var leases []backends.Claim
	for _, id := range []string{"indexer-a", "indexer-b", "indexer-c"} {
		h, _ := backends.NewHolder(id)
		l, err := group.TryAcquire(ctx, "indexers", h, 10*time.Second)
		var held *backends.HeldError
		if errors.As(err, &held) {
			fmt.Printf("%s: group full, %d holders\n", id, len(held.Holders))
			continue
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		leases = append(leases, l)
		fmt.Printf("%s: serving\n", id)
	}

	if err := group.Release(ctx, leases[0]); err != nil {
		fmt.Println(err)
		return
	}
	h, _ := backends.NewHolder("indexer-c")
	l, err := group.TryAcquire(ctx, "indexers", h, 10*time.Second)
	fmt.Printf("indexer-c after a release: the freed slot: %v, a higher token: %v, err %v\n",
		l.Slot == leases[0].Slot, l.Token > leases[0].Token, err)
	// Output:
	// indexer-a: serving
	// indexer-b: serving
	// indexer-c: group full, 2 holders
	// indexer-c after a release: the freed slot: true, a higher token: true, err <nil>
}
