package shards_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// leaveHeld stops n's member with every release it sends held at a gate,
// lets the release of its membership through, and returns the held releases
// of its shards once the other members, ids, have seen it leave.
func (c *cluster) leaveHeld(ctx context.Context, n *node, ids ...string) (*faults.Gate, []*faults.Call, chan error) {
	c.t.Helper()
	owned := n.m.Owned()
	gate := n.Store.Pause(faults.OpCompareAndDelete, faults.BeforeCall, 0)
	stopped := make(chan error, 1)
	go func() { stopped <- n.m.Stop(context.Background()) }()
	var shards []*faults.Call
	for range len(owned) + 1 {
		call, err := gate.Next(ctx)
		if err != nil {
			c.t.Fatal(err)
		}
		if call.Key == "g/member/"+n.id {
			call.Release()
			continue
		}
		shards = append(shards, call)
	}
	c.await("the others see the leave", func() bool {
		for _, id := range ids {
			if !slices.Equal(c.node(id).m.Members(), ids) {
				return false
			}
		}
		return true
	})
	c.quiesce()
	return gate, shards, stopped
}

// dropDeletes is a store whose watch does not report the deletion of the
// keys in a set, as a filestore's watch does not report a claim's expiry.
type dropDeletes struct {
	backends.Store
	keys *keySet
}

type keySet struct {
	mu   sync.Mutex
	keys []string // guarded by mu
}

func (k *keySet) add(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = append(k.keys, key)
}

func (k *keySet) has(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Contains(k.keys, key)
}

func (s dropDeletes) Capabilities() backends.Capabilities {
	c := s.Store.Capabilities()
	c.ExpiryEvents = false
	return c
}

func (s dropDeletes) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	return filterWatch(ctx, s.Store, prefix, func(ev backends.Event) bool {
		return ev.Kind != backends.EventDelete || !s.keys.has(ev.Entry.Key)
	})
}

// TestLeaveUnreleasedShardTakenAtExpiry checks that a shard whose leaving
// owner could not release it is taken once its claim has expired, though no
// event reports the expiry: the member it moves to times its attempt to the
// expiry it was told of.
func TestLeaveUnreleasedShardTakenAtExpiry(t *testing.T) {
	c := newCluster(t, 8)
	quiet := &keySet{}
	c.inner = dropDeletes{Store: c.store, keys: quiet}
	c.add("a")
	b := c.add("b")
	c.stepUntil("settle", 2*testTTL, func() bool { return c.settled("a", "b") })
	c.quiesce()
	lost := "g/shard/" + strconv.Itoa(b.m.Owned()[0])
	quiet.add(lost)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	gate, held, stopped := c.leaveHeld(ctx, b, "a")
	for _, call := range held {
		if call.Key == lost {
			call.Fail(backends.ErrUnavailable)
		} else {
			call.Release()
		}
	}
	gate.Remove()
	took := c.stepUntil("the unreleased shard is taken", 2*testTTL, func() bool { return c.settled("a") })
	t.Logf("taken after %v (TTL %v)", took, testTTL)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
}

// lists counts a store's List calls by prefix.
type lists struct {
	backends.Watcher // the inner store's watch
	backends.Store
	mu sync.Mutex
	n  map[string]int // guarded by mu
}

func (l *lists) List(ctx context.Context, prefix string) ([]backends.Entry, error) {
	l.mu.Lock()
	l.n[prefix]++
	l.mu.Unlock()
	return l.Store.List(ctx, prefix)
}

func (l *lists) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[prefix]
}

// TestPollReadsMembersOnly checks that on a store without expiry events, a
// member at rest reads the members every TTL/6, to notice one whose
// membership expired, but lists the shards only as a backstop, every ten
// TTLs: a shard's claim that expires is taken by its new owner, whose
// acquisition the watch reports.
func TestPollReadsMembersOnly(t *testing.T) {
	c := newCluster(t, 8)
	q := quiet{c.store}
	l := &lists{Watcher: q, Store: q, n: map[string]int{}}
	c.inner = l
	c.add("a")
	c.stepUntil("settle", 2*testTTL, func() bool { return c.settled("a") })
	members, shards := l.count("g/member/"), l.count("g/shard/")
	for range 2 * testTTL / testStep {
		c.quiesce()
		c.clk.Add(testStep)
	}
	c.quiesce()
	members, shards = l.count("g/member/")-members, l.count("g/shard/")-shards
	if members < 11 || shards != 0 {
		t.Errorf("over two TTLs at rest, the member read the members %d times and the shards %d times, want every TTL/6 (12) and never", members, shards)
	}
}
