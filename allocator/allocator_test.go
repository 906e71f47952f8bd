package allocator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{Prefix: "p/", Member: "m"}
	tests := []struct {
		name string
		mod  func(*Config)
		want string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"no prefix", func(c *Config) { c.Prefix = "" }, "empty prefix"},
		{"no member", func(c *Config) { c.Member = "" }, "empty member"},
		{"slash member", func(c *Config) { c.Member = "a/b" }, "contains"},
		{"min above max", func(c *Config) { c.Min, c.Max = 10, 9 }, "min 10 above max 9"},
		{"min equals max", func(c *Config) { c.Min, c.Max = 7, 7 }, ""},
		{"negative ttl", func(c *Config) { c.TTL = -time.Second }, "negative ttl"},
		{"renew not below ttl", func(c *Config) { c.TTL, c.RenewInterval = time.Second, time.Second }, "renew interval"},
		{"negative grace", func(c *Config) { c.Grace = -time.Second }, "negative grace"},
		{"nul prefix", func(c *Config) { c.Prefix = "a\x00" }, "prefix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.mod(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, backends.ErrInvalid) {
				t.Fatalf("Validate(%+v) = %v, want an ErrInvalid containing %q", c, err, tt.want)
			}
		})
	}
}

// TestNewFailsClosed checks that a store that cannot enforce what the
// protocol needs is refused, not used with advisory results.
func TestNewFailsClosed(t *testing.T) {
	s, clk := newMem(t)
	for _, st := range []backends.Store{faults.Hide(s, backends.CapWatch), nil} {
		_, err := New(st, testConfig("m", clk))
		if st == nil {
			if !errors.Is(err, backends.ErrInvalid) {
				t.Errorf("New(nil store) = %v, want ErrInvalid", err)
			}
			continue
		}
		if !errors.Is(err, backends.ErrUnsupported) || !strings.HasPrefix(err.Error(), "allocator: new: ") {
			t.Errorf("New(store without watch) = %v, want an allocator error wrapping ErrUnsupported", err)
		}
	}
	if _, err := New(s, Config{Prefix: "p/", Member: "m", Min: 5, Max: 4}); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("New with min above max = %v, want ErrInvalid", err)
	}
}

func TestAllocateGetRelease(t *testing.T) {
	s, clk := newMem(t)
	var (
		mu  sync.Mutex
		evs []Event
	)
	cfg := testConfig("a", clk)
	cfg.OnChange = func(e Event) { mu.Lock(); evs = append(evs, e); mu.Unlock() }
	a := newAllocator(t, s, cfg)
	b := newAllocator(t, s, testConfig("b", clk))
	ctx := context.Background()

	id, isNew, err := a.Allocate(ctx, "red")
	if err != nil || !isNew || id == 0 {
		t.Fatalf("first Allocate(red) = %d, %v, %v; want a new id", id, isNew, err)
	}
	id2, isNew, err := b.Allocate(ctx, "red")
	if err != nil || isNew || id2 != id {
		t.Fatalf("b.Allocate(red) = %d, %v, %v; want %d, not new", id2, isNew, err, id)
	}
	blue := mustAllocate(t, a, "blue")
	if blue == id {
		t.Fatalf("red and blue share id %d", id)
	}
	if again := mustAllocate(t, a, "red"); again != id {
		t.Fatalf("second local Allocate(red) = %d, want %d", again, id)
	}
	if got, err := b.Get(ctx, "blue"); err != nil || got != blue {
		t.Fatalf("b.Get(blue) = %d, %v; want %d", got, err, blue)
	}
	if got, err := b.GetByID(ctx, id); err != nil || got != "red" {
		t.Fatalf("b.GetByID(%d) = %q, %v; want red", id, got, err)
	}
	if _, err := b.Get(ctx, "green"); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get(green) = %v, want ErrNotFound", err)
	}
	if _, err := b.GetByID(ctx, 1<<40); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("GetByID(unused) = %v, want ErrNotFound", err)
	}
	if _, _, err := a.Allocate(ctx, ""); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("Allocate(\"\") = %v, want ErrInvalid", err)
	}
	if _, _, err := a.Allocate(ctx, strings.Repeat("x", backends.MaxKeyBytes)); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("Allocate(oversized) = %v, want ErrInvalid", err)
	}

	// Two local uses: the first Release keeps the reference.
	if last, err := a.Release(ctx, "red"); err != nil || last {
		t.Fatalf("Release(red) #1 = %v, %v; want false, nil", last, err)
	}
	refs := dump(t, s, valueDir)
	if len(refs) != 3 {
		t.Fatalf("references after one of two releases: %v, want 3", refs)
	}
	if last, err := a.Release(ctx, "red"); err != nil || !last {
		t.Fatalf("Release(red) #2 = %v, %v; want true, nil", last, err)
	}
	if _, err := a.Release(ctx, "red"); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Release(red) #3 = %v, want ErrNotFound", err)
	}
	// b still references red: garbage collection keeps it.
	collect(t, a, clk)
	if got, err := a.Get(ctx, "red"); err != nil || got != id {
		t.Fatalf("Get(red) after GC while b uses it = %d, %v; want %d", got, err, id)
	}
	waitCached(t, a, "red", id)
	mu.Lock()
	created := 0
	for _, e := range evs {
		if e.Kind == EventCreated {
			created++
		}
	}
	mu.Unlock()
	if created != 2 {
		t.Errorf("OnChange saw %d creations, want 2 (red, blue): %v", created, evs)
	}
}

// TestReleaseAndGCReturnIDs checks that garbage collection returns released
// IDs to the pool, and only after Grace.
func TestReleaseAndGCReturnIDs(t *testing.T) {
	s, clk := newMem(t)
	cfg := testConfig("a", clk)
	cfg.Min, cfg.Max = 1, 3
	deleted := make(chan Event, 8)
	cfg.OnChange = func(e Event) {
		if e.Kind == EventDeleted {
			deleted <- e
		}
	}
	a := newAllocator(t, s, cfg)
	ctx := context.Background()
	ids := make(map[string]uint64)
	for _, k := range []string{"x", "y", "z"} {
		ids[k] = mustAllocate(t, a, k)
	}
	if _, _, err := a.Allocate(ctx, "w"); !errors.Is(err, ErrNoIDs) || !strings.HasPrefix(err.Error(), `allocator: allocate "w": `) {
		t.Fatalf("Allocate(w) on a full range = %v, want ErrNoIDs", err)
	}
	if _, err := a.Release(ctx, "y"); err != nil {
		t.Fatal(err)
	}
	// Less than Grace: nothing goes.
	if st, err := a.RunGC(ctx); err != nil || st.Deleted != 0 {
		t.Fatalf("first pass = %+v, %v; want nothing deleted", st, err)
	}
	clk.Add(cfg.Grace - time.Second)
	if st, err := a.RunGC(ctx); err != nil || st.Deleted != 0 {
		t.Fatalf("pass before grace = %+v, %v; want nothing deleted", st, err)
	}
	clk.Add(time.Second)
	if st, err := a.RunGC(ctx); err != nil || st.Deleted != 1 {
		t.Fatalf("pass after grace = %+v, %v; want the index deleted", st, err)
	}
	if st, err := a.RunGC(ctx); err != nil || st.Deleted != 1 {
		t.Fatalf("next pass = %+v, %v; want the master deleted", st, err)
	}
	id, isNew, err := a.Allocate(ctx, "w")
	if err != nil || !isNew || id != ids["y"] {
		t.Fatalf("Allocate(w) after GC = %d, %v, %v; want y's id %d, new", id, isNew, err, ids["y"])
	}
	checkBijection(t, s)
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	select {
	case e := <-deleted:
		if e.Key != "y" || e.ID != ids["y"] {
			t.Fatalf("OnChange reported %+v, want y's deletion", e)
		}
	case <-tctx.Done():
		t.Fatal("OnChange never reported y's deletion")
	}
}

// TestConcurrentMemstore runs many allocators and many goroutines over
// heavily overlapping keys and checks one ID per key, one key per ID; after
// everyone releases, garbage collection empties the store.
func TestConcurrentMemstore(t *testing.T) {
	s, clk := newMem(t)
	const members = 8
	keys, pool := 1000, 1500
	if testing.Short() {
		keys, pool = 200, 300
	}
	var as []*Allocator
	for i := range members {
		as = append(as, newAllocator(t, s, testConfig(fmt.Sprintf("m%d", i), clk)))
	}
	got := make([]map[string]uint64, members)
	var wg sync.WaitGroup
	errs := make(chan error, members)
	for i, a := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			m := make(map[string]uint64)
			for _, j := range r.Perm(pool)[:keys] {
				k := keyName(j)
				id, _, err := a.Allocate(context.Background(), k)
				if err != nil {
					errs <- err
					return
				}
				m[k] = id
			}
			got[i] = m
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkAgreement(t, got)
	checkBijection(t, s)
	for i, a := range as {
		for k := range got[i] {
			if _, err := a.Release(context.Background(), k); err != nil {
				t.Fatal(err)
			}
		}
	}
	collect(t, as[0], clk)
	for _, dir := range []string{idDir, keyDir, valueDir} {
		if left := dump(t, s, dir); len(left) != 0 {
			t.Errorf("%d %s entries left after release and GC", len(left), dir)
		}
	}
}

// checkAgreement fails if two members got different IDs for a key or two
// keys got one ID.
func checkAgreement(t testing.TB, got []map[string]uint64) {
	t.Helper()
	byKey := make(map[string]uint64)
	byID := make(map[uint64]string)
	for i, m := range got {
		for k, id := range m {
			if prev, ok := byKey[k]; ok && prev != id {
				t.Errorf("member %d got id %d for %q, another got %d", i, id, k, prev)
			}
			byKey[k] = id
			if prev, ok := byID[id]; ok && prev != k {
				t.Errorf("keys %q and %q share id %d", prev, k, id)
			}
			byID[id] = k
		}
	}
}

// TestOneProcessManyGoroutines checks that goroutines of one process share
// its uses: concurrent Allocate and Release of the same keys write one
// reference per key, and the last Release of each deletes it.
func TestOneProcessManyGoroutines(t *testing.T) {
	s, clk := newMem(t)
	a := newAllocator(t, s, testConfig("a", clk))
	const workers, keys = 8, 20
	ids := make([]map[string]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[w] = make(map[string]uint64)
			for i := range keys {
				k := keyName((i + w) % keys)
				id, _, err := a.Allocate(context.Background(), k)
				if err != nil {
					t.Error(err)
					return
				}
				ids[w][k] = id
			}
		}()
	}
	wg.Wait()
	checkAgreement(t, ids)
	if refs := dump(t, s, valueDir); len(refs) != keys {
		t.Fatalf("%d references, want one per key (%d)", len(refs), keys)
	}
	lasts := make(chan string, workers*keys)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range ids[w] {
				last, err := a.Release(context.Background(), k)
				if err != nil {
					t.Error(err)
				}
				if last {
					lasts <- k
				}
			}
		}()
	}
	wg.Wait()
	close(lasts)
	seen := make(map[string]bool)
	for k := range lasts {
		if seen[k] {
			t.Errorf("two releases of %q reported the last use", k)
		}
		seen[k] = true
	}
	if len(seen) != keys {
		t.Errorf("%d keys saw their last release, want %d", len(seen), keys)
	}
	if refs := dump(t, s, valueDir); len(refs) != 0 {
		t.Fatalf("%d references after every release, want 0", len(refs))
	}
}

// TestClose checks that Close deletes this member's references and refuses
// later work.
func TestClose(t *testing.T) {
	s, clk := newMem(t)
	a, err := New(s, testConfig("a", clk))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mustAllocate(t, a, "x")
	mustAllocate(t, a, "y")
	if err := a.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if refs := dump(t, s, valueDir); len(refs) != 0 {
		t.Fatalf("references after Close: %v", refs)
	}
	if _, _, err := a.Allocate(ctx, "x"); !errors.Is(err, backends.ErrClosed) {
		t.Fatalf("Allocate after Close = %v, want ErrClosed", err)
	}
	if _, err := a.Release(ctx, "y"); !errors.Is(err, backends.ErrClosed) {
		t.Fatalf("Release after Close = %v, want ErrClosed", err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestCloseWaitsForAllocateInFlight checks that Close waits for an Allocate
// in flight: it never reports success while a reference that call wrote is
// still in the store, and a Close that gave up may be called again to finish
// the job.
func TestCloseWaitsForAllocateInFlight(t *testing.T) {
	s, clk := newMem(t)
	f := faults.Wrap(s, clk)
	a, err := New(f, testConfig("a", clk))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Hold the answer to the write of x's reference: it is in the store,
	// the Allocate that wrote it has not heard back.
	gate := f.Pause(faults.OpCreate|faults.OpCompareAndSet, faults.AfterCall, 0)
	defer gate.Remove()
	allocated := make(chan error, 1)
	go func() {
		_, _, err := a.Allocate(ctx, "x")
		allocated <- err
	}()
	var held *faults.Call
	for held == nil {
		call, err := gate.Next(ctx)
		if err != nil {
			t.Fatalf("the reference was never written: %v", err)
		}
		if strings.HasPrefix(call.Key, testPrefix+valueDir) {
			held = call
		} else {
			call.Release()
		}
	}

	closeCtx, giveUp := context.WithCancel(ctx)
	closed := make(chan error, 1)
	go func() { closed <- a.Close(closeCtx) }()
	eventually(t, "Close marks the allocator closed", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.closed
	})
	giveUp()
	if err := <-closed; err == nil {
		if refs := dump(t, s, valueDir); len(refs) != 0 {
			t.Fatalf("Close returned nil with an Allocate in flight and references left: %v", refs)
		}
	} else if !errors.Is(err, context.Canceled) {
		t.Fatalf("first Close = %v, want nil or context.Canceled", err)
	}

	held.Release()
	gate.Remove() // the calls after it go through
	if err := <-allocated; !errors.Is(err, backends.ErrClosed) {
		t.Fatalf("Allocate racing Close = %v, want ErrClosed", err)
	}
	if err := a.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if refs := dump(t, s, valueDir); len(refs) != 0 {
		t.Fatalf("references after the second Close: %v", refs)
	}
}

// TestCloseAgainAfterTimeout checks that a Close that gave up waiting for the
// background loops leaves the work to the next Close, which waits and deletes
// this member's references.
func TestCloseAgainAfterTimeout(t *testing.T) {
	s, clk := newMem(t)
	a, err := New(s, testConfig("a", clk))
	if err != nil {
		t.Fatal(err)
	}
	mustAllocate(t, a, "x")
	a.wg.Add(1) // a background loop that has not ended yet
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Close(expired); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with loops running and a done context = %v, want context.Canceled", err)
	}
	second := make(chan error, 1)
	go func() { second <- a.Close(context.Background()) }()
	select {
	case err := <-second:
		t.Fatalf("second Close returned %v while a loop still ran", err)
	default:
	}
	a.wg.Done()
	if err := <-second; err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if refs := dump(t, s, valueDir); len(refs) != 0 {
		t.Fatalf("references after the second Close: %v", refs)
	}
}
