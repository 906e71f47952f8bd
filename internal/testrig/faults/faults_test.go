package faults_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ttl = 10 * time.Second

func setup(t *testing.T) (*clocktest.Clock, *mapStore, *faults.Store) {
	t.Helper()
	clk := clocktest.New(time.Time{})
	inner := newMapStore(clk)
	return clk, inner, faults.Wrap(inner, clk)
}

// bounded returns a context that ends the test's waits if something hangs;
// it is never reached in a passing run.
func bounded(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type result struct {
	e   backends.Entry
	err error
}

// async runs a store call on its own goroutine; the test joins it by
// receiving from the returned channel.
func async(f func() (backends.Entry, error)) <-chan result {
	ch := make(chan result, 1)
	go func() {
		e, err := f()
		ch <- result{e, err}
	}()
	return ch
}

func mustCreate(t *testing.T, s backends.Store, key string) backends.Entry {
	t.Helper()
	e, err := s.CreateIfAbsent(context.Background(), key, []byte("v-"+key), ttl)
	if err != nil {
		t.Fatalf("CreateIfAbsent(%q): %v", key, err)
	}
	return e
}

func TestTransparent(t *testing.T) {
	ctx := context.Background()
	_, inner, s := setup(t)
	e := mustCreate(t, s, "a")
	got, err := inner.Get(ctx, "a")
	if err != nil || got.Revision != e.Revision || string(got.Value) != "v-a" {
		t.Fatalf("inner Get(a) after wrapped create = %+v, %v; want revision %d", got, err, e.Revision)
	}
	if _, err := s.CreateIfAbsent(ctx, "a", nil, ttl); !errors.Is(err, backends.ErrExists) {
		t.Errorf("second CreateIfAbsent(a) = %v, want ErrExists passed through", err)
	}
	var ce *backends.ConflictError
	if _, err := s.CompareAndSet(ctx, "a", e.Revision+5, nil, ttl); !errors.As(err, &ce) || ce.Current.Revision != e.Revision {
		t.Errorf("stale CompareAndSet = %v, want the inner *ConflictError with current revision %d", err, e.Revision)
	}
	if _, err := s.KeepAlive(ctx, "a", e.Revision, ttl); err != nil {
		t.Errorf("KeepAlive: %v", err)
	}
	if l, err := s.List(ctx, ""); err != nil || len(l) != 1 {
		t.Errorf("List = %v, %v; want one entry", l, err)
	}
	if err := s.CompareAndDelete(ctx, "a", e.Revision); err != nil {
		t.Errorf("CompareAndDelete: %v", err)
	}
	if _, err := s.Get(ctx, "a"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Get after delete = %v, want ErrNotFound", err)
	}
	if got, want := s.Calls(faults.AllOps), 7; got != want {
		t.Errorf("Calls(all) = %d, want %d", got, want)
	}
	if got, want := s.Calls(faults.OpCreate), 2; got != want {
		t.Errorf("Calls(create) = %d, want %d", got, want)
	}
}

func TestCapabilities(t *testing.T) {
	clk := clocktest.New(time.Time{})
	plain := newMapStore(clk)
	declaresAll := newMapStore(clk)
	declaresAll.caps.Atomic |= backends.CapWatch | backends.CapTxn
	tests := []struct {
		name  string
		store backends.Store
		need  backends.Capability
		ok    bool
	}{
		{"wrap plain: claims", faults.Wrap(plain, clk), backends.CapClaims, true},
		{"wrap plain: watch", faults.Wrap(plain, clk), backends.CapWatch, false},
		{"wrap plain: txn", faults.Wrap(plain, clk), backends.CapTxn, false},
		{"wrap a store declaring watch without Watch", faults.Wrap(declaresAll, clk), backends.CapWatch, false},
		{"wrap a store declaring txn without Txn", faults.Wrap(declaresAll, clk), backends.CapTxn, false},
		{"wrap full: watch", faults.Wrap(newFull(clk, backends.CapWatch|backends.CapTxn), clk), backends.CapWatch, true},
		{"wrap full: txn", faults.Wrap(newFull(clk, backends.CapWatch|backends.CapTxn), clk), backends.CapTxn, true},
		{"wrap full that does not declare watch", faults.Wrap(newFull(clk, backends.CapTxn), clk), backends.CapWatch, false},
		{"hide watch: watch", faults.Hide(newFull(clk, backends.CapWatch|backends.CapTxn), backends.CapWatch), backends.CapWatch, false},
		{"hide watch: txn kept", faults.Hide(newFull(clk, backends.CapWatch|backends.CapTxn), backends.CapWatch), backends.CapTxn, true},
		{"hide txn: txn", faults.Hide(newFull(clk, backends.CapWatch|backends.CapTxn), backends.CapTxn), backends.CapTxn, false},
		{"hide txn: watch kept", faults.Hide(newFull(clk, backends.CapWatch|backends.CapTxn), backends.CapTxn), backends.CapWatch, true},
		{"hide both: watch", faults.Hide(newFull(clk, backends.CapWatch|backends.CapTxn), backends.CapWatch|backends.CapTxn), backends.CapWatch, false},
		{"hide both: claims kept", faults.Hide(newFull(clk, backends.CapWatch|backends.CapTxn), backends.CapWatch|backends.CapTxn), backends.CapClaims, true},
		{"hide nothing", faults.Hide(newFull(clk, backends.CapWatch|backends.CapTxn), 0), backends.CapWatch | backends.CapTxn, true},
	}
	for _, tt := range tests {
		err := backends.Require(tt.store, tt.need)
		if (err == nil) != tt.ok {
			t.Errorf("%s: Require(%s) = %v, want ok=%v", tt.name, tt.need, err, tt.ok)
		}
		if err != nil && !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s: Require error %v does not wrap errors.ErrUnsupported", tt.name, err)
		}
	}

	hidden := faults.Hide(newFull(clk, backends.CapWatch|backends.CapTxn), backends.CapWatch|backends.CapTxn)
	if !hidden.Capabilities().Has(backends.CapWatch | backends.CapTxn) {
		t.Errorf("Hide dropped the declaration: %v", hidden.Capabilities().Atomic)
	}
	if _, ok := hidden.(backends.Watcher); ok {
		t.Error("a store hiding watch still implements Watcher")
	}
	if l, err := backends.NewLocker(hidden); err != nil {
		t.Errorf("NewLocker over a store hiding watch: %v", err)
	} else if _, err := l.WatchClaim(context.Background(), "k"); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("WatchClaim over a store hiding watch = %v, want ErrUnsupported", err)
	}

	s := faults.Wrap(plain, clk)
	if _, err := s.Watch(context.Background(), "k"); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("Watch through a wrapper of a store without watch = %v, want ErrUnsupported", err)
	}
	if _, err := s.Txn(context.Background(), nil, []backends.Op{{Kind: backends.OpPut, Key: "k"}}); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("Txn through a wrapper of a store without txn = %v, want ErrUnsupported", err)
	}

	full := faults.Wrap(newFull(clk, backends.CapWatch|backends.CapTxn), clk)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := full.Watch(ctx, "k")
	if err != nil {
		t.Fatalf("Watch through a full wrapper: %v", err)
	}
	if ev := <-ch; ev.Entry.Key != "k" {
		t.Errorf("watch event = %+v, want one for k", ev)
	}
	cancel()
	for range ch {
	}
	if res, err := full.Txn(context.Background(), nil, []backends.Op{{Kind: backends.OpPut, Key: "t", Value: []byte("x")}}); err != nil || len(res.Entries) != 1 {
		t.Errorf("Txn through a full wrapper = %+v, %v", res, err)
	}
}

func TestFail(t *testing.T) {
	tests := []struct {
		sentinel error
		class    backends.Class
	}{
		{backends.ErrUnavailable, backends.ClassTransient},
		{backends.ErrThrottled, backends.ClassTransient},
		{context.DeadlineExceeded, backends.ClassTransient},
		{backends.ErrPermission, backends.ClassFatal},
		{backends.ErrMissingResource, backends.ClassFatal},
		{backends.ErrCorrupt, backends.ClassFatal},
		{backends.ErrNotHolder, backends.ClassLost},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.sentinel), func(t *testing.T) {
			ctx := context.Background()
			_, inner, s := setup(t)
			f := s.Fail(faults.OpCreate, 2, tt.sentinel)
			for i := range 2 {
				_, err := s.CreateIfAbsent(ctx, "k", nil, ttl)
				if !errors.Is(err, tt.sentinel) {
					t.Fatalf("call %d: err = %v, want it to wrap %v", i, err, tt.sentinel)
				}
				if got := backends.Classify(err); got != tt.class {
					t.Errorf("call %d: Classify(%v) = %v, want %v", i, err, got, tt.class)
				}
				if _, err := inner.Get(ctx, "k"); !errors.Is(err, backends.ErrNotFound) {
					t.Fatalf("call %d: a failed create reached the inner store: %v", i, err)
				}
			}
			if !f.Spent() || f.Hits() != 2 {
				t.Errorf("after 2 calls: spent=%v hits=%d, want spent with 2 hits", f.Spent(), f.Hits())
			}
			if _, err := s.CreateIfAbsent(ctx, "k", nil, ttl); err != nil {
				t.Errorf("third call after a 2-call fault: %v", err)
			}
		})
	}
}

func TestFailSelectsOpsAndLastsUntilRemoved(t *testing.T) {
	ctx := context.Background()
	_, _, s := setup(t)
	e := mustCreate(t, s, "k")
	f := s.Fail(faults.OpKeepAlive|faults.OpCompareAndDelete, 0, backends.ErrThrottled)
	for i := range 5 {
		if _, err := s.KeepAlive(ctx, "k", e.Revision, ttl); !errors.Is(err, backends.ErrThrottled) {
			t.Fatalf("keep-alive %d = %v, want ErrThrottled", i, err)
		}
	}
	if _, err := s.Get(ctx, "k"); err != nil {
		t.Errorf("Get under a keep-alive fault: %v", err)
	}
	if err := s.CompareAndDelete(ctx, "k", e.Revision); !errors.Is(err, backends.ErrThrottled) {
		t.Errorf("delete = %v, want ErrThrottled", err)
	}
	f.Remove()
	f.Remove() // idempotent
	if _, err := s.KeepAlive(ctx, "k", e.Revision, ttl); err != nil {
		t.Errorf("keep-alive after Remove: %v", err)
	}
	if got := f.Hits(); got != 6 {
		t.Errorf("Hits = %d, want 6", got)
	}
}

func TestFaultsActInOrder(t *testing.T) {
	ctx := context.Background()
	_, _, s := setup(t)
	first := s.Fail(faults.OpGet, 1, backends.ErrPermission)
	second := s.Fail(faults.OpGet, 1, backends.ErrThrottled)
	for i, want := range []error{backends.ErrPermission, backends.ErrThrottled, backends.ErrNotFound} {
		if _, err := s.Get(ctx, "k"); !errors.Is(err, want) {
			t.Errorf("get %d = %v, want %v", i, err, want)
		}
	}
	if first.Hits() != 1 || second.Hits() != 1 {
		t.Errorf("hits = %d, %d; want 1, 1 (a fault not reached is not spent)", first.Hits(), second.Hits())
	}
}

func TestDelayBlocksOnTheClock(t *testing.T) {
	ctx := bounded(t)
	clk, inner, s := setup(t)
	s.Delay(faults.OpCreate, time.Second)
	done := async(func() (backends.Entry, error) { return s.CreateIfAbsent(ctx, "k", nil, ttl) })
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := inner.Get(ctx, "k"); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("inner Get while the create is delayed = %v, want ErrNotFound", err)
	}
	clk.Add(999 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("create returned %v after 999ms of a 1s delay", r.err)
	default:
	}
	clk.Add(time.Millisecond)
	if r := <-done; r.err != nil {
		t.Fatalf("delayed create: %v", r.err)
	}
	if _, err := inner.Get(ctx, "k"); err != nil {
		t.Errorf("inner Get after the delay: %v", err)
	}
}

func TestDelayCutShort(t *testing.T) {
	tests := []struct {
		name    string
		install func(*faults.Store)
		applied bool
	}{
		{"before the call", func(s *faults.Store) { s.Delay(faults.OpCreate, time.Minute) }, false},
		{"after the call", func(s *faults.Store) { s.DelayResponse(faults.OpCreate, time.Minute) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bg := bounded(t)
			clk, inner, s := setup(t)
			tt.install(s)
			ctx, cancel := clk.WithTimeout(bg, time.Second)
			defer cancel()
			done := async(func() (backends.Entry, error) { return s.CreateIfAbsent(ctx, "k", nil, ttl) })
			// The call's own timer and the context's.
			if err := clk.BlockUntil(bg, 2); err != nil {
				t.Fatal(err)
			}
			clk.Add(time.Second)
			r := <-done
			if !errors.Is(r.err, backends.ErrUnavailable) || !errors.Is(r.err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want ErrUnavailable and DeadlineExceeded", r.err)
			}
			_, err := inner.Get(bg, "k")
			if applied := err == nil; applied != tt.applied {
				t.Errorf("applied = %v (inner Get: %v), want %v", applied, err, tt.applied)
			}
		})
	}
}

func TestDelayRemovedWakesCalls(t *testing.T) {
	ctx := bounded(t)
	clk, _, s := setup(t)
	f := s.DelayResponse(faults.OpGet, time.Hour)
	done := async(func() (backends.Entry, error) { return s.Get(ctx, "k") })
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	f.Remove()
	if r := <-done; !errors.Is(r.err, backends.ErrNotFound) {
		t.Errorf("Get after its delay was removed = %v, want the inner ErrNotFound", r.err)
	}
}

func TestDropResponse(t *testing.T) {
	ctx := context.Background()
	_, inner, s := setup(t)
	f := s.DropResponse(faults.OpCreate|faults.OpKeepAlive, 1)
	_, err := s.CreateIfAbsent(ctx, "k", []byte("x"), ttl)
	if !errors.Is(err, backends.ErrUnavailable) || backends.Classify(err) != backends.ClassTransient {
		t.Fatalf("dropped create = %v (class %v), want a transient ErrUnavailable", err, backends.Classify(err))
	}
	e, err := inner.Get(ctx, "k")
	if err != nil || string(e.Value) != "x" {
		t.Fatalf("inner Get after a dropped create = %+v, %v; want it applied", e, err)
	}
	if !f.Spent() {
		t.Error("a 1-call drop is not spent after one call")
	}
	if _, err := s.KeepAlive(ctx, "k", e.Revision, ttl); err != nil {
		t.Errorf("keep-alive after the drop was spent: %v", err)
	}
}

func TestPartition(t *testing.T) {
	t.Run("fail", func(t *testing.T) {
		ctx := context.Background()
		_, _, s := setup(t)
		e := mustCreate(t, s, "k")
		p := s.Partition(faults.PartitionFail)
		calls := map[string]func() error{
			"get":       func() error { _, err := s.Get(ctx, "k"); return err },
			"list":      func() error { _, err := s.List(ctx, ""); return err },
			"create":    func() error { _, err := s.CreateIfAbsent(ctx, "j", nil, ttl); return err },
			"cas":       func() error { _, err := s.CompareAndSet(ctx, "k", e.Revision, nil, ttl); return err },
			"keepalive": func() error { _, err := s.KeepAlive(ctx, "k", e.Revision, ttl); return err },
			"delete":    func() error { return s.CompareAndDelete(ctx, "k", e.Revision) },
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, backends.ErrUnavailable) {
				t.Errorf("%s while partitioned = %v, want ErrUnavailable", name, err)
			}
		}
		p.Remove()
		if _, err := s.KeepAlive(ctx, "k", e.Revision, ttl); err != nil {
			t.Errorf("keep-alive after healing: %v", err)
		}
	})
	t.Run("block until ctx done", func(t *testing.T) {
		bg := bounded(t)
		clk, inner, s := setup(t)
		s.Partition(faults.PartitionBlock)
		ctx, cancel := clk.WithTimeout(bg, 3*time.Second)
		defer cancel()
		done := async(func() (backends.Entry, error) { return s.CreateIfAbsent(ctx, "k", nil, ttl) })
		if err := clk.BlockUntil(bg, 1); err != nil { // the context's timer
			t.Fatal(err)
		}
		clk.Add(3 * time.Second)
		r := <-done
		if !errors.Is(r.err, backends.ErrUnavailable) || !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("blocked create = %v, want ErrUnavailable and DeadlineExceeded", r.err)
		}
		if _, err := inner.Get(bg, "k"); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("a partitioned create reached the inner store: %v", err)
		}
	})
	t.Run("heal wakes blocked calls", func(t *testing.T) {
		ctx := bounded(t)
		_, _, s := setup(t)
		p := s.Partition(faults.PartitionBlock)
		done := async(func() (backends.Entry, error) { return s.Get(ctx, "k") })
		if err := p.AwaitHolding(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if got := p.Holding(); got != 1 {
			t.Errorf("Holding = %d, want 1", got)
		}
		p.Remove()
		r := <-done
		if !errors.Is(r.err, backends.ErrUnavailable) || errors.Is(r.err, context.Canceled) {
			t.Errorf("call blocked when the partition healed = %v, want ErrUnavailable (the request was lost)", r.err)
		}
		if got := p.Holding(); got != 0 {
			t.Errorf("Holding after the call returned = %d, want 0", got)
		}
		if _, err := s.Get(ctx, "k"); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("Get after healing = %v, want the inner ErrNotFound", err)
		}
	})
}

func TestStaleReads(t *testing.T) {
	ctx := context.Background()
	clk, inner, s := setup(t)
	old := mustCreate(t, s, "a")
	stale, err := s.StaleReads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inner.CompareAndSet(ctx, "a", old.Revision, []byte("new"), ttl); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, "b") // a write through the wrapper reaches the inner store
	clk.Add(4 * time.Second)

	got, err := s.Get(ctx, "a")
	if err != nil || got.Revision != old.Revision || string(got.Value) != "v-a" {
		t.Errorf("stale Get(a) = %+v, %v; want the snapshot's revision %d", got, err, old.Revision)
	}
	if want := ttl - 4*time.Second; got.Remaining != want {
		t.Errorf("stale Get(a).Remaining = %v, want %v (aged on the clock)", got.Remaining, want)
	}
	if _, err := s.Get(ctx, "b"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("stale Get(b) = %v, want ErrNotFound (b is newer than the snapshot)", err)
	}
	if l, _ := s.List(ctx, ""); len(l) != 1 || l[0].Key != "a" {
		t.Errorf("stale List = %+v, want only a", l)
	}
	if _, err := s.CreateIfAbsent(ctx, "b", nil, ttl); !errors.Is(err, backends.ErrExists) {
		t.Errorf("CreateIfAbsent(b) while reads are stale = %v, want ErrExists: writes are never stale", err)
	}
	clk.Add(ttl)
	if got, err := s.Get(ctx, "a"); err != nil || got.Remaining > 0 {
		t.Errorf("stale Get(a) after its snapshot TTL = %+v, %v; want it with Remaining <= 0", got, err)
	}
	stale.Remove()
	if _, err := s.Get(ctx, "a"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("fresh Get(a) after TTL = %v, want ErrNotFound", err)
	}
}

func TestPause(t *testing.T) {
	tests := []struct {
		stage   faults.Stage
		applied bool // whether the write is visible while held
	}{
		{faults.BeforeCall, false},
		{faults.AfterCall, true},
	}
	for _, tt := range tests {
		t.Run(tt.stage.String(), func(t *testing.T) {
			ctx := bounded(t)
			_, inner, s := setup(t)
			g := s.Pause(faults.OpCreate, tt.stage, 2)
			done := async(func() (backends.Entry, error) { return s.CreateIfAbsent(ctx, "k", nil, ttl) })
			c, err := g.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if c.Op != faults.OpCreate || c.Key != "k" || c.Stage != tt.stage {
				t.Errorf("held call = %+v, want create of k at %v", c, tt.stage)
			}
			_, err = inner.Get(ctx, "k")
			if applied := err == nil; applied != tt.applied {
				t.Errorf("applied while held = %v, want %v", applied, tt.applied)
			}
			c.Release()
			if r := <-done; r.err != nil {
				t.Fatalf("released create: %v", r.err)
			}

			done = async(func() (backends.Entry, error) { return s.CreateIfAbsent(ctx, "j", nil, ttl) })
			if c, err = g.Next(ctx); err != nil {
				t.Fatal(err)
			}
			c.Fail(backends.ErrThrottled)
			if r := <-done; !errors.Is(r.err, backends.ErrThrottled) {
				t.Errorf("failed held create = %v, want ErrThrottled", r.err)
			}
			if !g.Spent() {
				t.Error("a 2-call gate is not spent after 2 calls")
			}
			if _, err := s.CreateIfAbsent(ctx, "i", nil, ttl); err != nil {
				t.Errorf("create after the gate was spent: %v", err)
			}
		})
	}
}

func TestPauseEndsWithContextOrRemove(t *testing.T) {
	bg := bounded(t)
	_, _, s := setup(t)
	g := s.Pause(faults.OpKeepAlive, faults.AfterCall, 0)
	ctx, cancel := context.WithCancel(bg)
	done := async(func() (backends.Entry, error) { return s.KeepAlive(ctx, "k", 1, ttl) })
	if _, err := g.Next(bg); err != nil {
		t.Fatal(err)
	}
	cancel()
	if r := <-done; !errors.Is(r.err, backends.ErrUnavailable) || !errors.Is(r.err, context.Canceled) {
		t.Errorf("held call whose ctx ended = %v, want ErrUnavailable and Canceled", r.err)
	}

	done = async(func() (backends.Entry, error) { return s.KeepAlive(bg, "k", 1, ttl) })
	if _, err := g.Next(bg); err != nil {
		t.Fatal(err)
	}
	g.Remove()
	if r := <-done; !errors.Is(r.err, backends.ErrNotFound) {
		t.Errorf("held call after Remove = %v, want the inner store's answer (ErrNotFound)", r.err)
	}

	short, stop := context.WithCancel(bg)
	stop()
	if _, err := s.Pause(faults.OpGet, faults.BeforeCall, 0).Next(short); !errors.Is(err, context.Canceled) {
		t.Errorf("Next on a done ctx = %v, want Canceled", err)
	}
	s.Clear()
}

func TestConcurrentUse(t *testing.T) {
	ctx := bounded(t)
	clk, _, s := setup(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			key := fmt.Sprintf("k%d", w)
			for range 200 {
				e, err := s.CreateIfAbsent(ctx, key, nil, ttl)
				if err == nil {
					_, _ = s.KeepAlive(ctx, key, e.Revision, ttl)
					_ = s.CompareAndDelete(ctx, key, e.Revision)
				}
				_, _ = s.List(ctx, "")
			}
		})
	}
	wg.Go(func() {
		for i := range 200 {
			f := s.Fail(faults.Writes, 3, backends.ErrThrottled)
			d := s.DropResponse(faults.OpKeepAlive, 1)
			if i%10 == 0 {
				st, err := s.StaleReads(ctx)
				if err == nil {
					st.Remove()
				}
			}
			f.Remove()
			d.Remove()
			clk.Add(time.Millisecond)
		}
	})
	wg.Wait()
	if got := s.Calls(faults.AllOps); got < 8*200*2 {
		t.Errorf("Calls = %d, want at least %d", got, 8*200*2)
	}
}

func TestOpString(t *testing.T) {
	tests := []struct {
		op   faults.Op
		want string
	}{
		{0, "none"},
		{faults.OpKeepAlive, "keepalive"},
		{faults.Reads, "get|list"},
		{faults.OpCreate | faults.OpTxn, "create|txn"},
	}
	for _, tt := range tests {
		if got := tt.op.String(); got != tt.want {
			t.Errorf("Op(%d).String() = %q, want %q", tt.op, got, tt.want)
		}
	}
}
