package nats

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/allocator"
	"github.com/tenure-go/tenure/backends/nats/natstest"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/shards"
)

// TestAllocator: the ID allocator runs on the store unchanged, two members
// on connections of their own: the same key gets the same ID on both, a
// full pool refuses, and an ID nobody references returns to the pool
// after the grace period.
func TestAllocator(t *testing.T) {
	srv := natstest.Start(t)
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	bucket := newBucketName()
	ctx := t.Context()
	member := func(name string) *allocator.Allocator {
		a, err := allocator.New(open(t, srv.URL(), bucket, 1, WithClock(clk)), allocator.Config{
			Prefix: "ids/", Member: name, Min: 100, Max: 101,
			TTL: time.Hour, Grace: time.Minute, GCInterval: -1, Clock: clk,
		})
		if err != nil {
			t.Fatalf("allocator.New: %v", err)
		}
		t.Cleanup(func() { _ = a.Close(context.Background()) })
		return a
	}
	a, b := member("node-a"), member("node-b")
	red, isNew, err := a.Allocate(ctx, "red")
	if err != nil || !isNew || red < 100 || red > 101 {
		t.Fatalf("a.Allocate(red) = %d, %v, %v", red, isNew, err)
	}
	if same, isNew, err := b.Allocate(ctx, "red"); err != nil || isNew || same != red {
		t.Errorf("b.Allocate(red) = %d, %v, %v; want %d, not new", same, isNew, err, red)
	}
	blue, _, err := b.Allocate(ctx, "blue")
	if err != nil || blue == red {
		t.Fatalf("b.Allocate(blue) = %d, %v", blue, err)
	}
	if _, _, err := b.Allocate(ctx, "green"); err == nil {
		t.Errorf("Allocate(green) with the pool full succeeded")
	}
	if last, err := b.Release(ctx, "blue"); err != nil || !last {
		t.Fatalf("Release(blue) = %v, %v", last, err)
	}
	for range 3 {
		if _, err := a.RunGC(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("RunGC: %v", err)
		}
		clk.Add(time.Minute)
	}
	if green, _, err := b.Allocate(ctx, "green"); err != nil || green != blue {
		t.Errorf("Allocate(green) after blue's grace = %d, %v; want blue's %d", green, err, blue)
	}
}

// TestShards: two members of a four-shard group on connections of their
// own every shard between them, each shard once.
func TestShards(t *testing.T) {
	srv := natstest.Start(t)
	bucket := newBucketName()
	var mu sync.Mutex
	owners := map[int]string{}
	var acquired sync.WaitGroup
	acquired.Add(4)
	var members []*shards.Member
	for _, id := range []string{"host-a", "host-b"} {
		m, err := shards.New(open(t, srv.URL(), bucket, 1), shards.Config{
			Group: "kv", Identity: id, Count: 4,
			Elector: elector.Config{TTL: 2 * time.Second},
			OnAcquired: func(ctx context.Context, shard int, _ elector.Term) {
				mu.Lock()
				if prev, ok := owners[shard]; ok {
					t.Errorf("shard %d acquired by %s while %s owns it", shard, id, prev)
				} else {
					owners[shard] = id
					acquired.Done()
				}
				mu.Unlock()
				<-ctx.Done()
				mu.Lock()
				delete(owners, shard)
				mu.Unlock()
			},
		})
		if err != nil {
			t.Fatalf("shards.New: %v", err)
		}
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		members = append(members, m)
	}
	acquired.Wait()
	var all []int
	for _, m := range members {
		all = append(all, m.Owned()...)
	}
	slices.Sort(all)
	if !slices.Equal(all, []int{0, 1, 2, 3}) {
		t.Errorf("shards owned = %v, want each of 0..3 once", all)
	}
	for _, m := range members {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := m.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
		cancel()
	}
}
