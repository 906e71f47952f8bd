package backends_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
)

// The contract's two levels over a memory store: a Locker made once over
// any Store, claims with fencing tokens, and errors sorted into the
// classes a holder acts on.
func Example() {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	if err := backends.Require(store, backends.CapClaims); err != nil {
		fmt.Println(err)
		return
	}
	locker, err := backends.NewLocker(store)
	if err != nil {
		fmt.Println(err)
		return
	}
	a, _ := backends.NewHolder("a")
	b, _ := backends.NewHolder("b")

	first, err := locker.TryAcquire(ctx, "indexer", a, time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("a holds %q, token %d\n", first.Key, first.Token)

	// b finds the claim held: a "lost" error, with who holds it.
	_, err = locker.TryAcquire(ctx, "indexer", b, time.Minute)
	var held *backends.HeldError
	fmt.Println("b:", backends.Classify(err), errors.As(err, &held))

	// a releases; b takes the claim with a higher token, which a store
	// downstream uses to refuse anything a still writes.
	if err := locker.Release(ctx, first); err != nil {
		fmt.Println(err)
		return
	}
	second, err := locker.TryAcquire(ctx, "indexer", b, time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("b holds %q, token %d > %d: %v\n", second.Key, second.Token, first.Token, second.Token > first.Token)

	// a's old claim can no longer be renewed.
	_, err = locker.Renew(ctx, first)
	fmt.Println("a renews:", backends.Classify(err))
	// Output:
	// a holds "indexer", token 1
	// b: lost true
	// b holds "indexer", token 3 > 1: true
	// a renews: lost
}
