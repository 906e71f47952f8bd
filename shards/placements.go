package shards

import (
	"slices"
	"sync"
	"sync/atomic"
)

// placementsKept is how many placements the process keeps: enough for a
// few groups, each with its current membership and the one it is moving
// from.
const placementsKept = 8

// placements shares placements among the members of one process. A change
// of membership makes every member of a group compute the same Place from
// the same list; a process that runs many members of one group (a test, a
// benchmark, a host running several) would compute it once per member, and
// at 10,000 shards and 100 members that is 3 ms of CPU each, 300 ms in all,
// before any of them campaigns for a shard it gained. Members compute it
// once per process instead: the first one to ask computes, the others wait
// for its answer. Place is a pure function of the count and the set of
// members, so sharing its answer changes nothing but the cost; a shared
// placement is only ever read.
var placements placementCache

// placementCache holds the placements computed last, most recent first.
type placementCache struct {
	computed atomic.Int64 // placements computed, for tests

	mu      sync.Mutex
	entries []*placement // guarded by mu; at most placementsKept
}

// placement is one computed (or being computed) placement.
type placement struct {
	count   int
	members []string      // sorted, without duplicates
	done    chan struct{} // closed once placed is set
	placed  []string
}

// place returns Place(count, members) for members sorted and without
// duplicates (as a view's memberList gives them), computing it only if no
// other member of the process has, or is computing it. The result must not
// be modified.
func (c *placementCache) place(count int, members []string) []string {
	c.mu.Lock()
	for i, p := range c.entries {
		if p.count == count && slices.Equal(p.members, members) {
			copy(c.entries[1:i+1], c.entries[:i])
			c.entries[0] = p
			c.mu.Unlock()
			<-p.done
			if p.placed != nil {
				return p.placed
			}
			return Place(count, members) // its computation panicked
		}
	}
	p := &placement{count: count, members: slices.Clone(members), done: make(chan struct{})}
	c.entries = slices.Insert(c.entries, 0, p)
	if len(c.entries) > placementsKept {
		c.entries[placementsKept] = nil
		c.entries = c.entries[:placementsKept]
	}
	c.mu.Unlock()
	defer close(p.done)
	c.computed.Add(1)
	p.placed = Place(count, members)
	return p.placed
}
