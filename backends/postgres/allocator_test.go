package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/allocator"
)

// TestAllocator runs the ID allocator unchanged over two stores on one
// table, as two processes: the same key gets the same ID from both, even
// when both allocate it at once, and different keys get different IDs.
func TestAllocator(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	var as []*allocator.Allocator
	for _, member := range []string{"node-a", "node-b"} {
		a, err := allocator.New(open(t, dsn, tbl), allocator.Config{
			Prefix: "ids/", Member: member, Min: 1, Max: 1000,
			TTL: time.Minute, Grace: time.Minute, GCInterval: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close(context.Background()) })
		as = append(as, a)
	}
	const keys = 20
	ids := make([][keys]uint64, len(as))
	var wg sync.WaitGroup
	for i, a := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				id, _, err := a.Allocate(ctx, fmt.Sprintf("key-%d", k))
				if err != nil {
					t.Errorf("allocator %d: Allocate(key-%d): %v", i, k, err)
					return
				}
				ids[i][k] = id
			}
		}()
	}
	wg.Wait()
	seen := map[uint64]int{}
	for k := range keys {
		if ids[0][k] != ids[1][k] {
			t.Errorf("key-%d: IDs %d and %d from the two allocators", k, ids[0][k], ids[1][k])
		}
		if other, dup := seen[ids[0][k]]; dup {
			t.Errorf("key-%d and key-%d share ID %d", k, other, ids[0][k])
		}
		seen[ids[0][k]] = k
	}
}
