package shards

import "slices"

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

// The rendezvous weight of a member for a shard is
// mix(FNV-1a-64(member) ^ mix(shard + golden)).

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
	// The placement is that of a greedy pass over every (shard, member)
	// pair from the heaviest down (ties by shard, then member, in sorted
	// order), placing a pair's shard on its member unless the shard is
	// placed already or the member is full. That pass is made here without
	// materialising the count × members pairs: each unplaced shard offers
	// only its heaviest pair among the members not yet full, and the
	// heaviest offer is taken next. Any heavier pair was either of a
	// shard placed already or of a member that filled up before (and a
	// full member stays full), so the offers are taken in the order the
	// pass would take them, with the same counts held at each step. It
	// costs O(count × members) weights and O(count) memory.
	hs := make([]uint64, len(ms))
	for j, m := range ms {
		hs[j] = fnv1a(m)
	}
	open := make([]int, len(ms)) // the members not yet full, in order
	for j := range open {
		open[j] = j
	}
	shardMix := make([]uint64, count)
	offers := make(offerHeap, count)
	for i := range count {
		shardMix[i] = mix(uint64(i) + golden)
		offers[i] = best(i, shardMix[i], hs, open)
	}
	offers.init()
	floor, extra := count/len(ms), count%len(ms)
	held := make([]int, len(ms))
	atCeil := 0
	full := func(j int) bool {
		n := held[j]
		return n > floor || (n == floor && atCeil >= extra)
	}
	for len(offers) > 0 {
		o := offers[0]
		if full(o.member) {
			// Members fill up in the pass; drop those that did from the
			// open ones before offering again.
			open = slices.DeleteFunc(open, full)
			offers[0] = best(o.shard, shardMix[o.shard], hs, open)
			offers.down(0)
			continue
		}
		if held[o.member] == floor {
			atCeil++
		}
		held[o.member]++
		out[o.shard] = ms[o.member]
		offers.pop()
	}
	return out
}

// offer is a shard's heaviest pair among the open members.
type offer struct {
	w      uint64
	shard  int
	member int
}

// before reports whether a comes before b in the pass: the heavier first,
// then the lower shard (the member cannot tie: one offer per shard).
func (a offer) before(b offer) bool {
	if a.w != b.w {
		return a.w > b.w
	}
	return a.shard < b.shard
}

// best is the offer of shard (whose mix is sm) among the open members: the
// heaviest, the lowest member on a tie. open is never empty while a shard
// is unplaced, since the quotas add up to the count.
func best(shard int, sm uint64, hs []uint64, open []int) offer {
	o := offer{shard: shard, member: -1}
	for _, j := range open {
		if w := mix(hs[j] ^ sm); o.member < 0 || w > o.w {
			o.w, o.member = w, j
		}
	}
	return o
}

// offerHeap is a binary heap of offers, the first in the pass at the top.
type offerHeap []offer

func (h offerHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h offerHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		c := l
		if r := l + 1; r < len(h) && h[r].before(h[l]) {
			c = r
		}
		if !h[c].before(h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

func (h *offerHeap) pop() {
	old := *h
	n := len(old) - 1
	old[0] = old[n]
	*h = old[:n]
	h.down(0)
}
