package allocator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// BenchmarkAllocateLocal measures Allocate of a key this process already
// uses, which is answered from memory.
func BenchmarkAllocateLocal(b *testing.B) {
	s, clk := newMem(b)
	f := faults.Wrap(s, clk)
	a := newAllocator(b, f, testConfig("a", clk))
	ctx := context.Background()
	mustAllocate(b, a, "hot")
	before := f.Calls(faults.AllOps &^ faults.OpWatch)
	b.ResetTimer()
	for range b.N {
		if _, _, err := a.Allocate(ctx, "hot"); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(f.Calls(faults.AllOps&^faults.OpWatch)-before)/float64(b.N), "requests/op")
}

// BenchmarkAllocateCached measures the store requests of Allocate of a key
// another member holds and the cache knows, and of its Release.
func BenchmarkAllocateCached(b *testing.B) {
	s, clk := newMem(b)
	other := newAllocator(b, s, testConfig("other", clk))
	f := faults.Wrap(s, clk)
	a := newAllocator(b, f, testConfig("a", clk))
	ctx := context.Background()
	id := mustAllocate(b, other, "shared")
	waitCached(b, a, "shared", id)
	var allocW, allocR, relW int
	b.ResetTimer()
	for range b.N {
		w, r := f.Calls(faults.Writes), f.Calls(faults.Reads)
		if _, _, err := a.Allocate(ctx, "shared"); err != nil {
			b.Fatal(err)
		}
		w2, r2 := f.Calls(faults.Writes), f.Calls(faults.Reads)
		allocW, allocR = allocW+w2-w, allocR+r2-r
		if _, err := a.Release(ctx, "shared"); err != nil {
			b.Fatal(err)
		}
		relW += f.Calls(faults.Writes) - w2
	}
	b.StopTimer()
	b.ReportMetric(float64(allocW)/float64(b.N), "allocate-writes/op")
	b.ReportMetric(float64(allocR)/float64(b.N), "allocate-reads/op")
	b.ReportMetric(float64(relW)/float64(b.N), "release-writes/op")
}

// BenchmarkNewIDs measures new IDs per second with 8 allocators allocating
// fresh keys at once.
func BenchmarkNewIDs(b *testing.B) {
	b.Run("memstore", func(b *testing.B) {
		s, clk := newMem(b)
		benchNewIDs(b, func(int) backends.Store { return s }, clk)
	})
	b.Run("filestore", func(b *testing.B) {
		dir := b.TempDir()
		benchNewIDs(b, func(int) backends.Store {
			s, err := filestore.Open(context.Background(), dir)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}, clocktest.New(epoch))
	})
}

// benchNewIDs runs b.N new-key allocations spread over 8 allocators, each
// over its own store from open.
func benchNewIDs(b *testing.B, open func(i int) backends.Store, clk *clocktest.Clock) {
	const members = 8
	as := make([]*Allocator, members)
	for i := range as {
		as[i] = newAllocator(b, open(i), testConfig(fmt.Sprintf("m%d", i), clk))
	}
	var next atomic.Int64
	ctx := context.Background()
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, a := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				if _, _, err := a.Allocate(ctx, fmt.Sprintf("new/%d", n)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ids/s")
}

// BenchmarkGCPass10000 measures one garbage collection pass over 10 000
// referenced IDs (nothing to delete: the steady state).
func BenchmarkGCPass10000(b *testing.B) {
	s, clk := newMem(b)
	f := faults.Wrap(s, clk)
	a := newAllocator(b, f, testConfig("a", clk))
	ctx := context.Background()
	for i := range 10000 {
		mustAllocate(b, a, fmt.Sprintf("gc/%d", i))
	}
	before := f.Calls(faults.AllOps &^ faults.OpWatch)
	b.ResetTimer()
	for range b.N {
		st, err := a.RunGC(ctx)
		if err != nil || st.Indexed != 10000 || st.Deleted != 0 {
			b.Fatalf("RunGC = %+v, %v", st, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(f.Calls(faults.AllOps&^faults.OpWatch)-before)/float64(b.N), "requests/op")
}
