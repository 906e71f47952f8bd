package postgres_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
)

// TestTxnRaceWithCreate: transactions that require a key absent and write
// it, racing plain creates of the same key from other stores, over many
// rounds: exactly one of them wins each round. An absent key cannot be
// locked; the transaction's placeholder row is what makes a concurrent
// create wait for it.
func TestTxnRaceWithCreate(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	const racers = 8
	var stores []*postgres.Store
	for range racers {
		stores = append(stores, open(t, dsn, tbl))
	}
	for round := range 20 {
		key := fmt.Sprintf("race/%d", round)
		var wg sync.WaitGroup
		errs := make([]error, racers)
		for i, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%2 == 0 {
					_, errs[i] = s.Txn(ctx, []backends.Cond{{Key: key}, {Key: key + "/other"}},
						[]backends.Op{{Kind: backends.OpPut, Key: key, Value: []byte{byte(i)}, TTL: time.Minute}})
				} else {
					_, errs[i] = s.CreateIfAbsent(ctx, key, []byte{byte(i)}, time.Minute)
				}
			}()
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, backends.ErrConflict):
				t.Errorf("round %d racer %d: %v, want success or a conflict", round, i, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d winners, want 1 (errors %v)", round, won, errs)
		}
	}
}
