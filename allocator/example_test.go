package allocator_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/allocator"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
)

// Two members ask for the IDs of keys; the same key gets the same ID
// everywhere, and an ID nobody references returns to the pool after the
// grace period.
func Example() {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memstore.New(memstore.WithClock(clk))
	defer store.Close()
	ctx := context.Background()
	cfg := func(member string) allocator.Config {
		return allocator.Config{
			Prefix: "ids/", Member: member, Min: 100, Max: 101,
			TTL: time.Hour, Grace: time.Minute, GCInterval: -1, Clock: clk,
		}
	}
	a, _ := allocator.New(store, cfg("node-a"))
	defer a.Close(ctx)
	b, _ := allocator.New(store, cfg("node-b"))
	defer b.Close(ctx)

	red, isNew, _ := a.Allocate(ctx, "red")
	fmt.Println("node-a red in [100, 101]:", red >= 100 && red <= 101, "new:", isNew)
	same, isNew, _ := b.Allocate(ctx, "red")
	fmt.Println("node-b red is the same:", same == red, "new:", isNew)
	blue, _, _ := b.Allocate(ctx, "blue")
	fmt.Println("blue differs:", blue != red)
	_, _, err := b.Allocate(ctx, "green")
	fmt.Println("green:", err)

	last, _ := b.Release(ctx, "blue")
	fmt.Println("blue released by its last user:", last)
	for range 3 { // a pass sees blue unreferenced; Grace later it goes
		a.RunGC(ctx)
		clk.Add(time.Minute)
	}
	green, _, _ := b.Allocate(ctx, "green")
	fmt.Println("green took blue's id:", green == blue)

	// Output:
	// node-a red in [100, 101]: true new: true
	// node-b red is the same: true new: false
	// blue differs: true
	// green: allocator: allocate "green": no free ids
	// blue released by its last user: true
	// green took blue's id: true
}
