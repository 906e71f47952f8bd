package shards_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tenure-go/tenure/shards"
)

// placeSorted is Place as first written: every (shard, member) pair is
// materialised and sorted from the heaviest down, and a greedy pass places
// each pair's shard on its member unless the shard is placed or the member
// full. Place must give exactly its answers, which are promised stable.
func placeSorted(count int, members []string) []string {
	if count < 1 {
		return nil
	}
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	out := make([]string, count)
	if len(ms) == 0 {
		return out
	}
	type pair struct {
		w      uint64
		shard  int
		member int
	}
	pairs := make([]pair, 0, count*len(ms))
	for j, m := range ms {
		h := refFNV(m)
		for i := range count {
			pairs = append(pairs, pair{refMix(h ^ refMix(uint64(i)+0x9e3779b97f4a7c15)), i, j})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		if c := cmp.Compare(a.shard, b.shard); c != 0 {
			return c
		}
		return cmp.Compare(a.member, b.member)
	})
	floor, extra := count/len(ms), count%len(ms)
	held := make([]int, len(ms))
	placed := make([]bool, count)
	atCeil := 0
	for _, p := range pairs {
		if placed[p.shard] {
			continue
		}
		switch n := held[p.member]; {
		case n < floor:
		case n == floor && atCeil < extra:
			atCeil++
		default:
			continue
		}
		held[p.member]++
		placed[p.shard] = true
		out[p.shard] = ms[p.member]
	}
	return out
}

func refFNV(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

func refMix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// TestPlaceAsSorted checks that Place gives the answers of the sorted pass
// it was first written as, over counts and member sets of every size up to
// 1000 shards and 64 members, random names and regular ones.
func TestPlaceAsSorted(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for range 300 {
		count := 1 + rng.IntN(1000)
		m := 1 + rng.IntN(64)
		var ms []string
		if rng.IntN(2) == 0 {
			ms = randomNames(rng, m)
		} else {
			ms = members(fmt.Sprintf("n%d", rng.IntN(4)), m)
		}
		if got, want := shards.Place(count, ms), placeSorted(count, ms); !slices.Equal(got, want) {
			t.Fatalf("Place(%d, %d members %q…) differs from the sorted pass at %d shards", count, m, ms[0], moved(got, want))
		}
	}
	for _, c := range []struct{ count, members int }{{4096, 100}, {10000, 100}, {256, 1000}, {3, 10}} {
		ms := members("member", c.members)
		if got, want := shards.Place(c.count, ms), placeSorted(c.count, ms); !slices.Equal(got, want) {
			t.Errorf("Place(%d, %d members) differs from the sorted pass at %d shards", c.count, c.members, moved(got, want))
		}
	}
}
