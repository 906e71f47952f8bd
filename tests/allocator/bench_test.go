package servertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/allocator"
	"github.com/tenure-go/tenure/clocktest"
)

// BenchmarkNewIDsEtcd measures new IDs per second on a real etcd with 8
// allocators (each with its own client) allocating fresh keys at once.
func BenchmarkNewIDsEtcd(b *testing.B) {
	stores := etcdStores(b, 8)
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var as []*allocator.Allocator
	for i, s := range stores {
		a, err := allocator.New(s, config(fmt.Sprintf("m%d", i), clk))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = a.Close(context.Background()) })
		as = append(as, a)
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

// BenchmarkGCPass10000Etcd measures one garbage collection pass over 10 000
// referenced IDs on a real etcd: three range reads of the allocator's prefix.
func BenchmarkGCPass10000Etcd(b *testing.B) {
	stores := etcdStores(b, 8)
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var as []*allocator.Allocator
	for i, s := range stores {
		a, err := allocator.New(s, config(fmt.Sprintf("m%d", i), clk))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = a.Close(context.Background()) })
		as = append(as, a)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for i, a := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; j < 10000; j += len(as) {
				if _, _, err := a.Allocate(ctx, fmt.Sprintf("gc/%d", j)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ResetTimer()
	for range b.N {
		st, err := as[0].RunGC(ctx)
		if err != nil || st.Indexed != 10000 || st.Deleted != 0 {
			b.Fatalf("RunGC = %+v, %v", st, err)
		}
	}
}
