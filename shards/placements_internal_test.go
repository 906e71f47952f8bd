package shards

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestPlacementsComputedOncePerProcess has many members of one process
// ask for the placement of one membership at once, and then again: it is
// computed once, and every answer is Place's. Members computed it each.
func TestPlacementsComputedOncePerProcess(t *testing.T) {
	var c placementCache
	members := []string{"a", "b", "c", "d"}
	want := Place(100, members)
	var wg sync.WaitGroup
	got := make([][]string, 50)
	for i := range got {
		wg.Go(func() { got[i] = c.place(100, members) })
	}
	wg.Wait()
	got = append(got, c.place(100, members))
	for i, g := range got {
		if !slices.Equal(g, want) {
			t.Fatalf("answer %d differs from Place's", i)
		}
	}
	if n := c.computed.Load(); n != 1 {
		t.Errorf("computed %d times for one membership, want 1", n)
	}
	// Another membership, another count: computed anew.
	if g := c.place(100, members[:3]); !slices.Equal(g, Place(100, members[:3])) {
		t.Error("the placement of three members differs from Place's")
	}
	if g := c.place(50, members); !slices.Equal(g, Place(50, members)) {
		t.Error("the placement of 50 shards differs from Place's")
	}
	if n := c.computed.Load(); n != 3 {
		t.Errorf("computed %d times for three placements, want 3", n)
	}
}

// TestPlacementsKeepTheLatest checks that the cache keeps the
// placementsKept placements asked last, and forgets older ones.
func TestPlacementsKeepTheLatest(t *testing.T) {
	var c placementCache
	lists := make([][]string, placementsKept+1)
	for i := range lists {
		lists[i] = []string{fmt.Sprintf("m%d", i)}
		c.place(10, lists[i])
	}
	c.place(10, lists[placementsKept]) // the latest: kept
	if n := c.computed.Load(); n != int64(len(lists)) {
		t.Errorf("computed %d times, want %d", n, len(lists))
	}
	c.place(10, lists[0]) // the oldest: forgotten
	if n := c.computed.Load(); n != int64(len(lists))+1 {
		t.Errorf("computed %d times after asking for a forgotten one, want %d", n, len(lists)+1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) != placementsKept {
		t.Errorf("%d placements kept, want %d", len(c.entries), placementsKept)
	}
}
