package shards

import (
	"cmp"
	"slices"
)

// The hashes below are part of the package's promise: ShardOf and Place give
// the same answers in every process, on every platform and in every release,
// so members of different builds agree on where a key lives. Changing any
// constant or step is a breaking change of the store layout.

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
	golden    = 0x9e3779b97f4a7c15
)

// fnv1a is the 64-bit FNV-1a hash of s.
func fnv1a(s string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// mix is the finaliser of SplitMix64: it spreads every input bit over every
// output bit, which FNV alone does poorly in the low bits a modulus keeps.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// ShardOf returns the shard of key in a group of count shards, in
// [0, count): mix(FNV-1a-64(key)) mod count, where mix is SplitMix64's
// finaliser. It is stable: the same key and count give the same shard in
// every process and release. It returns -1 if count < 1.
func ShardOf(key string, count int) int {
	if count < 1 {
		return -1
	}
	return int(mix(fnv1a(key)) % uint64(count))
}

// weight is the rendezvous weight of member (given by its hash) for shard.
func weight(memberHash uint64, shard int) uint64 {
	return mix(memberHash ^ mix(uint64(shard)+golden))
}

// Place assigns each of count shards to one of members: the result has
// count entries, entry i being the identity of the member shard i is placed
// on. It is a pure function of count and the set of members (order and
// duplicates do not matter), so every member computes the same placement
// from the same membership. With no members every entry is "".
//
// With M members, every member ends with ⌊count/M⌋ or ⌈count/M⌉ shards
// (rendezvous hashing with quotas; docs/shards.md says how). A join or a
// leave moves close to the minimum number of shards, not always exactly it:
// Place cannot remember the previous placement, since it is a pure function
// of the membership, and its answers are promised not to change between
// releases.
func Place(count int, members []string) []string {
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
		h := fnv1a(m)
		for i := range count {
			pairs = append(pairs, pair{weight(h, i), i, j})
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
	atCeil, left := 0, count
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
		if left--; left == 0 {
			break
		}
	}
	return out
}
