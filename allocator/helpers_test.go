package allocator

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
)

// epoch is where fake clocks start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const testPrefix = "alloc/"

// testConfig is a config for member on clk with background GC off: tests
// run passes themselves.
func testConfig(member string, clk *clocktest.Clock) Config {
	return Config{
		Prefix:     testPrefix,
		Member:     member,
		TTL:        time.Hour, // above Grace: the fake clock jumps past renewals
		Grace:      time.Minute,
		GCInterval: -1,
		Clock:      clk,
	}
}

func newMem(t testing.TB) (*memstore.Store, *clocktest.Clock) {
	t.Helper()
	clk := clocktest.New(epoch)
	s := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { _ = s.Close() })
	return s, clk
}

// storeKinds are the stores the protocol tests run on: memstore, and
// filestore, which has no multi-key transactions. Both judge expiry on the
// returned fake clock.
var storeKinds = []struct {
	name string
	open func(t testing.TB) (backends.Store, *clocktest.Clock)
}{
	{"memstore", func(t testing.TB) (backends.Store, *clocktest.Clock) { return newMem(t) }},
	{"filestore", func(t testing.TB) (backends.Store, *clocktest.Clock) {
		clk := clocktest.New(epoch)
		s, err := filestore.Open(context.Background(), t.TempDir(), filestore.WithClock("boot", clk))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, clk
	}},
}

func newAllocator(t testing.TB, s backends.Store, cfg Config) *Allocator {
	t.Helper()
	a, err := New(s, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

// collect runs GC passes until one deletes nothing, moving clk past Grace
// between passes, and returns how many entries went.
func collect(t testing.TB, a *Allocator, clk *clocktest.Clock) int {
	t.Helper()
	total := 0
	for range 4 {
		st, err := a.RunGC(context.Background())
		if err != nil {
			t.Fatalf("RunGC: %v", err)
		}
		total += st.Deleted
		clk.Add(a.cfg.Grace)
	}
	return total
}

// dump lists the allocator's entries in s, for failure messages and
// counting.
func dump(t testing.TB, s backends.Store, dir string) map[string]string {
	t.Helper()
	es, err := s.List(context.Background(), testPrefix+dir)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	m := make(map[string]string, len(es))
	for _, e := range es {
		m[strings.TrimPrefix(e.Key, testPrefix+dir)] = string(e.Value)
	}
	return m
}

// checkBijection verifies the store's index: ready entries map keys to
// distinct IDs whose masters name them.
func checkBijection(t testing.TB, s backends.Store) map[string]string {
	t.Helper()
	index, masters := dump(t, s, keyDir), dump(t, s, idDir)
	byID := make(map[string]string)
	for k, v := range index {
		if strings.HasSuffix(v, " pending") {
			continue
		}
		if other, dup := byID[v]; dup {
			t.Errorf("keys %q and %q share id %s", other, k, v)
		}
		byID[v] = k
		if masters[v] != k {
			t.Errorf("key %q -> id %s, but master id/%s names %q", k, v, v, masters[v])
		}
	}
	return index
}

// waitCached waits until a's cache maps key to id (the watch is
// asynchronous).
func waitCached(t testing.TB, a *Allocator, key string, id uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if c, ok := a.cachedIndex(key); ok && c.ready && c.id == id {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("cache never mapped %q to %d", key, id)
		}
		runtime.Gosched()
	}
}

func mustAllocate(t testing.TB, a *Allocator, key string) uint64 {
	t.Helper()
	id, _, err := a.Allocate(context.Background(), key)
	if err != nil {
		t.Fatalf("Allocate(%q): %v", key, err)
	}
	return id
}

func keyName(i int) string { return fmt.Sprintf("k/%04d", i) }
