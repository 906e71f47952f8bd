package shards_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/internal/shardstest"
	"github.com/tenure-go/tenure/shards"
)

// BenchmarkPlace reports, at S = 256 and M = 1…8 members, the spread of the
// placement (imbalance: max − min shards per member) and the shards moved by
// one join and by one leave, over the minimum such a change must move
// (moved/min; the worst over 64 sets of member names, every member leaving
// in turn). Its sub-benchmark call/M=8 times one Place(256, eight members),
// the cost every member pays on each membership change.
func BenchmarkPlace(b *testing.B) {
	const S = 256
	b.Run("call/M=8", func(b *testing.B) {
		ms := members("member", 8)
		for b.Loop() {
			shards.Place(S, ms)
		}
	})
	for m := 1; m <= 8; m++ {
		b.Run(fmt.Sprintf("M=%d", m), func(b *testing.B) {
			imbalance, join, leave := 0, 0.0, 0.0
			for i := range b.N {
				ms := members(fmt.Sprintf("set%d", i%64), m)
				before := shards.Place(S, ms)
				imbalance = max(imbalance, spread(before, ms))
				joined := append(slices.Clone(ms), "newcomer")
				after := shards.Place(S, joined)
				join = max(join, float64(moved(before, after))/float64((S+m)/(m+1)))
				if m == 1 {
					continue
				}
				for _, leaver := range ms {
					rest := slices.DeleteFunc(slices.Clone(ms), func(x string) bool { return x == leaver })
					had := 0
					for _, id := range before {
						if id == leaver {
							had++
						}
					}
					leave = max(leave, float64(moved(before, shards.Place(S, rest)))/float64(had))
				}
			}
			b.ReportMetric(float64(imbalance), "imbalance")
			b.ReportMetric(join, "moved/min")
			b.ReportMetric(leave, "leave-moved/min")
		})
	}
}

// BenchmarkLeave: a member owning 64 of 256 shards (four members) leaves
// gracefully.
func BenchmarkLeave(b *testing.B) {
	b.Run("memstore", func(b *testing.B) {
		store := memstore.New()
		shardstest.BenchLeave(b, 256, 4, liveTiming(), func(int) backends.Store { return store })
	})
	b.Run("filestore", func(b *testing.B) {
		shardstest.BenchLeave(b, 256, 4, liveTiming(), filestores(b))
	})
}

// BenchmarkCrash: a member owning 64 of 256 shards is cut off from the
// store, as a crashed process is.
func BenchmarkCrash(b *testing.B) {
	b.Run("memstore", func(b *testing.B) {
		store := memstore.New()
		shardstest.BenchCrash(b, 256, 4, liveTiming(), func(int) backends.Store { return store })
	})
	b.Run("filestore", func(b *testing.B) {
		shardstest.BenchCrash(b, 256, 4, liveTiming(), filestores(b))
	})
}
