package shards_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tenure-go/tenure/shards"
)

// The hashes are a promise across processes and releases: these values,
// computed with the standard library's FNV-1a and SplitMix64's finaliser,
// must never change.
func TestShardOfIsStable(t *testing.T) {
	for _, tc := range []struct {
		key   string
		count int
		want  int
	}{
		{"", 256, 155}, {"", 7, 5}, {"", 4096, 2203},
		{"a", 256, 248}, {"a", 7, 3}, {"a", 4096, 248},
		{"user/42", 256, 113}, {"user/42", 7, 4}, {"user/42", 4096, 2673},
		{"ключ", 256, 116}, {"ключ", 7, 5}, {"ключ", 4096, 884},
		{"bucket/object with spaces", 256, 220}, {"bucket/object with spaces", 7, 2}, {"bucket/object with spaces", 4096, 988},
		{"x", 1, 0}, {"x", 0, -1},
	} {
		if got := shards.ShardOf(tc.key, tc.count); got != tc.want {
			t.Errorf("ShardOf(%q, %d) = %d, want %d", tc.key, tc.count, got, tc.want)
		}
	}
}

func TestPlaceIsStable(t *testing.T) {
	want := []string{"c", "c", "c", "b", "b", "a", "b", "c", "c", "b", "b", "a", "b", "a", "a", "a"}
	for _, ms := range [][]string{{"a", "b", "c"}, {"c", "a", "b"}, {"b", "c", "a", "c"}} {
		if got := shards.Place(16, ms); !slices.Equal(got, want) {
			t.Errorf("Place(16, %q) = %q, want %q", ms, got, want)
		}
	}
	if got := shards.Place(3, nil); !slices.Equal(got, []string{"", "", ""}) {
		t.Errorf("Place(3, nil) = %q, want three empty owners", got)
	}
	if got := shards.Place(0, []string{"a"}); got != nil {
		t.Errorf("Place(0, [a]) = %q, want nil", got)
	}
}

func members(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// spread is max − min shards per member in place.
func spread(place []string, ms []string) int {
	n := map[string]int{}
	for _, id := range place {
		n[id]++
	}
	lo, hi := len(place), 0
	for _, id := range ms {
		lo, hi = min(lo, n[id]), max(hi, n[id])
	}
	return hi - lo
}

func moved(a, b []string) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// At S = 256 and M = 1…9 (members of three naming schemes) every placement is balanced within one shard, a
// join moves at most 1.5 × ⌈S/(M+1)⌉ shards and a leave at most 1.5 × the
// leaver's count, for every member leaving.
func TestPlaceBalanceAndMovement(t *testing.T) {
	const S = 256
	for _, prefix := range []string{"member", "10.0.0", "pod"} {
		for m := 1; m <= 8; m++ {
			ms := members(prefix, m)
			before := shards.Place(S, ms)
			if d := spread(before, ms); d > 1 {
				t.Errorf("Place(%d, %d %q members): spread %d, want ≤ 1", S, m, prefix, d)
			}
			joined := append(slices.Clone(ms), fmt.Sprintf("%s-new", prefix))
			after := shards.Place(S, joined)
			if d := spread(after, joined); d > 1 {
				t.Errorf("Place(%d, %d %q members): spread %d, want ≤ 1", S, m+1, prefix, d)
			}
			minimum := (S + m) / (m + 1)
			if got := moved(before, after); 2*got > 3*minimum {
				t.Errorf("%q: join to %d members moved %d shards, minimum %d, want ≤ 1.5×", prefix, m+1, got, minimum)
			}
			for _, leaver := range ms {
				if m == 1 {
					break // the last member leaving moves nothing anywhere
				}
				rest := slices.DeleteFunc(slices.Clone(ms), func(id string) bool { return id == leaver })
				after := shards.Place(S, rest)
				had := 0
				for _, id := range before {
					if id == leaver {
						had++
					}
				}
				if got := moved(before, after); 2*got > 3*had {
					t.Errorf("%q: %s leaving %d members moved %d shards, it had %d, want ≤ 1.5×", prefix, leaver, m, got, had)
				}
			}
		}
	}
}

var placeSets = flag.Int("shards.sets", 100, "how many random sets of member names TestPlaceMovementOverRandomNames tries")

// worstMovement bounds how many shards one join or leave moves over the
// minimum, at S = 256 and M ≤ 9, as measured over random sets of member
// names: the 2000 sets of TestPlaceMovementOverRandomNames
// (-shards.sets=2000) reach 1.643 (a member leaving nine); 2000 drawn the
// same way from the PCG seed (1, 2) reached 1.688 (a member leaving
// eight). The package documentation and the README quote it.
const worstMovement = 1.69

// Over random sets of member names (a fixed seed, so every run tries the
// same sets), every placement at S = 256 and M = 1…9 is balanced within one
// shard, and one join or one leave (every member leaving in turn) moves at
// most worstMovement × the minimum. The minimum of a join is ⌈S/(M+1)⌉, of
// a leave what the leaver had. It logs the worst ratio at each M.
func TestPlaceMovementOverRandomNames(t *testing.T) {
	const S = 256
	rng := rand.New(rand.NewPCG(16, 256))
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789-."
	name := func() string {
		b := make([]byte, 3+rng.IntN(14))
		for i := range b {
			b[i] = chars[rng.IntN(len(chars))]
		}
		return string(b)
	}
	var join, leave [10]float64 // the worst ratio, by the member count after the change
	for range *placeSets {
		ms := []string{name()}
		before := shards.Place(S, ms)
		for m := 1; m <= 8; m++ {
			joined := append(slices.Clone(ms), name())
			after := shards.Place(S, joined)
			if d := spread(after, joined); d > 1 {
				t.Errorf("Place(%d, %q): spread %d, want ≤ 1", S, joined, d)
			}
			join[m+1] = max(join[m+1], float64(moved(before, after))/float64((S+m)/(m+1)))
			for _, leaver := range joined {
				rest := slices.DeleteFunc(slices.Clone(joined), func(id string) bool { return id == leaver })
				had := 0
				for _, id := range after {
					if id == leaver {
						had++
					}
				}
				leave[m] = max(leave[m], float64(moved(after, shards.Place(S, rest)))/float64(had))
			}
			ms, before = joined, after
		}
	}
	for m := 2; m <= 9; m++ {
		t.Logf("worst moved/minimum: join %d → %d %.3f, leave %d → %d %.3f", m-1, m, join[m], m, m-1, leave[m-1])
		if join[m] > worstMovement || leave[m-1] > worstMovement {
			t.Errorf("M = %d: a join moved %.3f× and a leave %.3f× the minimum, want ≤ %.2f×", m, join[m], leave[m-1], worstMovement)
		}
	}
}
