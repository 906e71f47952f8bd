package shards_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/shardstest"
	"github.com/tenure-go/tenure/shards"
)

// BenchmarkPlace reports, at S = 256 and M = 1…8 members, over placeSets
// random sets of member names (every run the same sets), the spread of the
// placement (imbalance: max − min shards per member) and the shards moved
// by one join (M → M+1) and by one leave (M → M−1, every member leaving in
// turn), over the minimum such a change must move: the worst (moved/min,
// leave-moved/min) and the 99th percentile (p99-moved/min,
// p99-leave-moved/min). One iteration measures every set, so -benchtime=1x
// is enough. Its call sub-benchmarks time one Place, the cost every member
// pays on each membership change: at S = 256 with eight members, at
// S = 4096 with 64 and 256, at S = 10,000 with 100 and at MaxCount with
// 256.
func BenchmarkPlace(b *testing.B) {
	const S = 256
	for _, c := range []struct{ count, members int }{{S, 8}, {4096, 64}, {4096, 256}, {10000, 100}, {shards.MaxCount, 256}} {
		b.Run(fmt.Sprintf("call/S=%d/M=%d", c.count, c.members), func(b *testing.B) {
			ms := members("member", c.members)
			for b.Loop() {
				shards.Place(c.count, ms)
			}
		})
	}
	sets := max(*placeSets, 2000)
	for m := 1; m <= 8; m++ {
		b.Run(fmt.Sprintf("M=%d", m), func(b *testing.B) {
			var join, leave movement
			imbalance := 0
			for b.Loop() {
				join, leave, imbalance = placeMovement(shards.Place, S, m, sets, 16)
			}
			b.ReportMetric(float64(imbalance), "imbalance")
			b.ReportMetric(join.worst, "moved/min")
			b.ReportMetric(join.p99, "p99-moved/min")
			b.ReportMetric(leave.worst, "leave-moved/min")
			b.ReportMetric(leave.p99, "p99-leave-moved/min")
		})
	}
}

// BenchmarkLeave measures what happens when a member owning 64 of 256 shards
// (four members) leaves gracefully.
func BenchmarkLeave(b *testing.B) {
	b.Run("memstore", func(b *testing.B) {
		store := memstore.New()
		shardstest.BenchLeave(b, 256, 4, liveTiming(), func(int) backends.Store { return store })
	})
	b.Run("filestore", func(b *testing.B) {
		shardstest.BenchLeave(b, 256, 4, liveTiming(), filestores(b))
	})
}

// BenchmarkCrash measures what happens when a member owning 64 of 256 shards
// is cut off from the store, as a crashed process is.
func BenchmarkCrash(b *testing.B) {
	b.Run("memstore", func(b *testing.B) {
		store := memstore.New()
		shardstest.BenchCrash(b, 256, 4, liveTiming(), func(int) backends.Store { return store })
	})
	b.Run("filestore", func(b *testing.B) {
		shardstest.BenchCrash(b, 256, 4, liveTiming(), filestores(b))
	})
}

// BenchmarkScale measures 100 members of a group of 10,000 shards (with
// -short, 10 members of 1,000) over one memstore in one process, with a
// TTL of 10 s: how long placement takes to converge after the last member
// starts, a graceful leave and a crash to be owned again, and the memory
// it all takes (see shardstest.BenchScale), in a sub-benchmark named by
// the size (S=10000/M=100). Run it with -benchtime=1x.
func BenchmarkScale(b *testing.B) {
	count, members := 10000, 100
	if testing.Short() {
		count, members = 1000, 10
	}
	b.Run(fmt.Sprintf("S=%d/M=%d", count, members), func(b *testing.B) {
		store := memstore.New()
		shardstest.BenchScale(b, count, members, elector.Config{TTL: 10 * time.Second}, func(int) backends.Store { return store }, shardstest.Steady{})
	})
}

// BenchmarkResize doubles and halves back the count of a running group of
// four members of 256 shards over one memstore (shardstest.BenchResize).
func BenchmarkResize(b *testing.B) {
	store := memstore.New()
	shardstest.BenchResize(b, 256, 4, liveTiming(), func(int) backends.Store { return unclosed{store} })
}
