package allocator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/clocktest"
)

// TestChurnWithEagerCollector has members churn through a small pool of keys
// and a range too small for all of them while a collector runs pass after
// pass with the clock moved past Grace each time, so that everything
// unreferenced goes as soon as the protocol allows. Every member checks, just
// before each Release, that the store still maps its key to the ID it was
// given and that ID to its key: a referenced ID never changes key, however
// the collector interleaves.
func TestChurnWithEagerCollector(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) { churn(t, k.open) })
	}
}

func churn(t *testing.T, open func(testing.TB) (backends.Store, *clocktest.Clock)) {
	s, clk := open(t)
	cfg := func(m string) Config { c := testConfig(m, clk); c.Min, c.Max = 1, 12; return c }
	gc := newAllocator(t, s, cfg("gc"))
	const members = 4
	rounds := 300
	if _, onDisk := s.(*filestore.Store); onDisk || testing.Short() {
		rounds = 80
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var passes, deleted atomic.Int64
	gcDone := make(chan struct{})
	go func() {
		defer close(gcDone)
		for ctx.Err() == nil {
			st, err := gc.RunGC(ctx)
			if err != nil && ctx.Err() == nil {
				t.Error(err)
				cancel() // the members wait for passes
				return
			}
			deleted.Add(int64(st.Deleted))
			clk.Add(gc.cfg.Grace)
			passes.Add(1)
		}
	}()
	var wg sync.WaitGroup
	for m := range members {
		a := newAllocator(t, s, cfg(fmt.Sprintf("m%d", m)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(m), 11))
			for i := range rounds {
				if i%4 == 0 { // let the collector in: wait for its next pass
					for seen := passes.Load(); passes.Load() == seen && ctx.Err() == nil; {
						runtime.Gosched()
					}
				}
				k := keyName(r.IntN(16))
				id, _, err := a.Allocate(ctx, k)
				if errors.Is(err, ErrNoIDs) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				idx, err := s.Get(ctx, a.indexKey(k))
				if err != nil || string(idx.Value) != strconv.FormatUint(id, 10) {
					t.Errorf("member %d holds %q as %d, index says %q, %v", m, k, id, idx.Value, err)
				}
				master, err := s.Get(ctx, a.idKey(id))
				if err != nil || string(master.Value) != k {
					t.Errorf("member %d holds %q as %d, master says %q, %v", m, k, id, master.Value, err)
				}
				if _, err := a.Release(ctx, k); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	cancel()
	<-gcDone
	if passes.Load() < 2 || deleted.Load() == 0 {
		t.Fatalf("%d collector passes deleted %d entries: the churn never met the collector", passes.Load(), deleted.Load())
	}
	t.Logf("%d passes deleted %d entries", passes.Load(), deleted.Load())
	checkBijection(t, s)
}
