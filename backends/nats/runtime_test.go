package nats

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/allocator"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/nats/natstest"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/shardstest"
)

// TestAllocator checks that the ID allocator runs on the store unchanged, two
// members on connections of their own: the same key gets the same ID on both,
// a full pool refuses, and an ID nobody references returns to the pool after
// the grace period.
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

// TestShards checks that shard members, each on a connection of its own as
// separate processes have, settle over the store; a member joins, one leaves
// gracefully, one is cut off and its shards are taken over once its claims
// expire, and it comes back. The group's checker fails the test if two terms
// of one shard act at once or a fence refuses an owner's token.
func TestShards(t *testing.T) {
	srv := natstest.Start(t)
	bucket := newBucketName()
	g := shardstest.New(t, 4, elector.Config{TTL: 2 * time.Second, RenewPeriod: 500 * time.Millisecond},
		func(int) backends.Store { return open(t, srv.URL(), bucket, 1) })
	shardstest.Scenario(t, g, 30*time.Second)
}
