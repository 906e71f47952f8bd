package shards_test

import (
	"fmt"
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
