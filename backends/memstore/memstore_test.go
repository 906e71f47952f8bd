package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/backendtest"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/storeurl"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newStore returns a store on a fresh fake clock, closed at the end of t.
func newStore(t *testing.T, opts ...memstore.Option) (*memstore.Store, *clocktest.Clock) {
	t.Helper()
	clk := clocktest.New(time.Time{})
	s := memstore.New(append([]memstore.Option{memstore.WithClock(clk)}, opts...)...)
	t.Cleanup(func() { _ = s.Close() })
	return s, clk
}

func TestConformance(t *testing.T) {
	clk := clocktest.New(time.Time{})
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Store {
			s := memstore.New(memstore.WithClock(clk))
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Elapse: clk.Add,
		TTL:    time.Second,
	})
}

func TestCapabilities(t *testing.T) {
	s, _ := newStore(t)
	got := s.Capabilities()
	want := backends.Capabilities{
		Atomic:       backends.CapClaims | backends.CapCompareAndSet | backends.CapWatch | backends.CapTxn,
		Scope:        backends.ScopeProcess,
		ExpiryJudge:  "injected clock",
		ExpiryEvents: true,
	}
	if got != want {
		t.Errorf("Capabilities() = %+v, want %+v", got, want)
	}
}

// recv waits (bounded) for the next event on ch.
func recv(t *testing.T, ch <-chan backends.Event) backends.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed, want an event")
		}
		return ev
	case <-ctx.Done():
		t.Fatal("no event within 10s")
	}
	return backends.Event{}
}

// closedWithin reads ch until it is closed (bounded), returning what it read.
func closedWithin(t *testing.T, ch <-chan backends.Event) []backends.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var got []backends.Event
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return got
			}
			got = append(got, ev)
		case <-ctx.Done():
			t.Fatalf("watch channel not closed within 10s (read %d events)", len(got))
		}
	}
}

func wantEvent(t *testing.T, ev backends.Event, kind backends.EventKind, key string, rev int64) {
	t.Helper()
	if ev.Kind != kind || ev.Entry.Key != key || ev.Entry.Revision != rev {
		t.Errorf("event = %v %q@%d, want %v %q@%d", ev.Kind, ev.Entry.Key, ev.Entry.Revision, kind, key, rev)
	}
}

func TestExpiryEventsOnWatch(t *testing.T) {
	s, clk := newStore(t)
	ctx := t.Context()
	ch, err := s.Watch(ctx, "k/")
	if err != nil {
		t.Fatal(err)
	}
	short, _ := s.CreateIfAbsent(ctx, "k/short", []byte("s"), time.Second)
	long, _ := s.CreateIfAbsent(ctx, "k/long", []byte("l"), 2*time.Second)
	wantEvent(t, recv(t, ch), backends.EventPut, short.Key, short.Revision)
	wantEvent(t, recv(t, ch), backends.EventPut, long.Key, long.Revision)

	// The timer reports the expiry with no operation to notice it.
	clk.Add(time.Second)
	ev := recv(t, ch)
	wantEvent(t, ev, backends.EventDelete, short.Key, short.Revision)
	if ev.Entry.CreateRevision != short.CreateRevision {
		t.Errorf("expiry event create revision = %d, want %d", ev.Entry.CreateRevision, short.CreateRevision)
	}

	// A keep-alive moves the expiry (and the timer) later, silently.
	if _, err := s.KeepAlive(ctx, long.Key, long.Revision, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	clk.Add(1500 * time.Millisecond) // past long's original expiry, before its new one
	if _, err := s.Get(ctx, long.Key); err != nil {
		t.Fatalf("Get(%q) after KeepAlive: %v", long.Key, err)
	}
	clk.Add(time.Second)
	wantEvent(t, recv(t, ch), backends.EventDelete, long.Key, long.Revision)

	// Each expiry is reported once: the next event is a new write.
	end, _ := s.CreateIfAbsent(ctx, "k/end", nil, 0)
	wantEvent(t, recv(t, ch), backends.EventPut, end.Key, end.Revision)
}

func TestExpiryNoticedByAnOperationFirst(t *testing.T) {
	s, clk := newStore(t)
	ctx := t.Context()
	e, _ := s.CreateIfAbsent(ctx, "k", nil, time.Second)
	ch, err := s.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	// Without a watch-triggered timer callback having run, the next
	// operation sweeps the entry and reports it before its own write.
	clk.Add(time.Second)
	n, err := s.CreateIfAbsent(ctx, "k", nil, 0)
	if err != nil {
		t.Fatalf("CreateIfAbsent over an expired entry: %v", err)
	}
	wantEvent(t, recv(t, ch), backends.EventDelete, "k", e.Revision)
	wantEvent(t, recv(t, ch), backends.EventPut, "k", n.Revision)
}

// TestOneTimerOnlyWhileWatched checks the store's footprint on a fake
// clock: no timer without a watch, one (at the earliest expiry) with any
// number of watches, none again once the last watch ends.
func TestOneTimerOnlyWhileWatched(t *testing.T) {
	s, clk := newStore(t)
	ctx := t.Context()
	for i := range 100 {
		if _, err := s.CreateIfAbsent(ctx, fmt.Sprintf("k/%d", i), nil, time.Duration(i+1)*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := clk.Waiters(); n != 0 {
		t.Errorf("Waiters() with no watch open = %d, want 0", n)
	}
	wctx1, cancel1 := context.WithCancel(ctx)
	ch1, err := s.Watch(wctx1, "other/")
	if err != nil {
		t.Fatal(err)
	}
	wctx2, cancel2 := context.WithCancel(ctx)
	ch2, err := s.Watch(wctx2, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateIfAbsent(ctx, "later", nil, time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := clk.Waiters(); n != 1 {
		t.Errorf("Waiters() with two watches open = %d, want 1", n)
	}
	wantEvent(t, recv(t, ch2), backends.EventPut, "later", 101)
	// The timer reports each expiry in deadline order and re-arms for the
	// next one.
	clk.Add(3 * time.Second)
	for i := range 3 {
		wantEvent(t, recv(t, ch2), backends.EventDelete, fmt.Sprintf("k/%d", i), int64(i+1))
	}
	settle := func() { // an operation waits out the callback that sent the event
		t.Helper()
		if _, err := s.Get(ctx, "later"); err != nil {
			t.Fatal(err)
		}
	}
	settle()
	if n := clk.Waiters(); n != 1 {
		t.Errorf("Waiters() after three expiries = %d, want 1 (re-armed for the fourth)", n)
	}
	cancel1()
	closedWithin(t, ch1)
	settle()
	if n := clk.Waiters(); n != 1 {
		t.Errorf("Waiters() with one watch left = %d, want 1", n)
	}
	cancel2()
	closedWithin(t, ch2)
	settle()
	if n := clk.Waiters(); n != 0 {
		t.Errorf("Waiters() after the last watch ended = %d, want 0", n)
	}
}

func TestSlowWatcherIsClosed(t *testing.T) {
	const buffer, writes = 4, 20
	s, _ := newStore(t, memstore.WithWatchBuffer(buffer))
	ctx := t.Context()
	slow, err := s.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	fast, err := s.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var revs []int64
	for i := range writes {
		e, err := s.CreateIfAbsent(ctx, fmt.Sprintf("k/%02d", i), nil, 0)
		if err != nil {
			t.Fatal(err) // never blocked, though the slow watcher reads nothing
		}
		revs = append(revs, e.Revision)
		wantEvent(t, recv(t, fast), backends.EventPut, e.Key, e.Revision) // fast keeps up
	}
	got := closedWithin(t, slow)
	if len(got) != buffer {
		t.Errorf("slow watcher read %d events before its channel closed, want the %d buffered", len(got), buffer)
	}
	for i, ev := range got {
		if ev.Entry.Revision != revs[i] {
			t.Errorf("slow watcher event %d at rev %d, want %d", i, ev.Entry.Revision, revs[i])
		}
	}
}

func TestCloseSemantics(t *testing.T) {
	clk := clocktest.New(time.Time{})
	s := memstore.New(memstore.WithClock(clk))
	ctx := t.Context()
	ch, err := s.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := s.CreateIfAbsent(ctx, "k", []byte("v"), time.Second) // arms the expiry timer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}()
	}
	wg.Wait()
	if got := closedWithin(t, ch); len(got) != 1 {
		t.Errorf("watch delivered %d events before Close closed it, want 1", len(got))
	}
	clk.Add(time.Hour) // a stopped timer does not fire into a closed store
	_, err = s.Get(ctx, e.Key)
	if !errors.Is(err, backends.ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
	if want := `memstore: get "k": `; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Get after Close: error %q, want prefix %q", err, want)
	}
	if backends.Classify(err) != backends.ClassFatal {
		t.Errorf("Classify(%v) = %v, want fatal", err, backends.Classify(err))
	}
}

func TestErrorsNameOpAndKey(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	e, _ := s.CreateIfAbsent(ctx, "k", []byte("v"), 0)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	tests := []struct {
		name   string
		err    error
		prefix string
		is     error
	}{
		{"get absent", func() error { _, err := s.Get(ctx, "absent"); return err }(), `memstore: get "absent": `, backends.ErrNotFound},
		{"create existing", func() error { _, err := s.CreateIfAbsent(ctx, "k", nil, 0); return err }(), `memstore: create "k": `, backends.ErrExists},
		{"cas stale", func() error { _, err := s.CompareAndSet(ctx, "k", e.Revision+1, nil, 0); return err }(), `memstore: cas "k": `, backends.ErrConflict},
		{"delete absent", s.CompareAndDelete(ctx, "absent", 3), `memstore: delete "absent": `, backends.ErrNotFound},
		{"keepalive bad ttl", func() error { _, err := s.KeepAlive(ctx, "k", e.Revision, 0); return err }(), `memstore: keepalive "k": `, backends.ErrInvalid},
		{"list bad prefix", func() error { _, err := s.List(ctx, "\xff"); return err }(), `memstore: list "\xff": `, backends.ErrInvalid},
		{"txn conflict", func() error {
			_, err := s.Txn(ctx, []backends.Cond{{Key: "k", Revision: 0}}, nil)
			return err
		}(), `memstore: txn "k": `, backends.ErrExists},
		{"txn invalid", func() error {
			_, err := s.Txn(ctx, nil, []backends.Op{{Kind: 7, Key: "x"}})
			return err
		}(), `memstore: txn: `, backends.ErrInvalid},
		{"cancelled context", func() error { _, err := s.Get(cancelled, "k"); return err }(), `memstore: get "k": `, context.Canceled},
		{"nil context", func() error { _, err := s.Get(nil, "k"); return err }(), `memstore: get "k": `, backends.ErrInvalid}, //nolint:staticcheck // a nil context is the bad input under test
	}
	for _, tt := range tests {
		if tt.err == nil || !strings.HasPrefix(tt.err.Error(), tt.prefix) {
			t.Errorf("%s: error %v, want prefix %q", tt.name, tt.err, tt.prefix)
		}
		if !errors.Is(tt.err, tt.is) {
			t.Errorf("%s: error %v, want it to wrap %v", tt.name, tt.err, tt.is)
		}
	}
}

func TestRemainingFollowsTheClock(t *testing.T) {
	s, clk := newStore(t)
	ctx := t.Context()
	e, _ := s.CreateIfAbsent(ctx, "k", nil, 10*time.Second)
	if e.TTL != 10*time.Second || e.Remaining != 10*time.Second {
		t.Errorf("create: TTL %v Remaining %v, want 10s and 10s", e.TTL, e.Remaining)
	}
	clk.Add(4 * time.Second)
	got, _ := s.Get(ctx, "k")
	if got.Remaining != 6*time.Second {
		t.Errorf("Get 4s later: Remaining %v, want 6s", got.Remaining)
	}
	k, _ := s.KeepAlive(ctx, "k", e.Revision, 3*time.Second)
	if k.TTL != 3*time.Second || k.Remaining != 3*time.Second {
		t.Errorf("KeepAlive(3s): TTL %v Remaining %v, want 3s and 3s (a shorter TTL is honoured)", k.TTL, k.Remaining)
	}
	clk.Add(3 * time.Second)
	if _, err := s.Get(ctx, "k"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Get exactly at the expiry = %v, want ErrNotFound (expired at the deadline)", err)
	}
}

func TestTxnSharesOneRevision(t *testing.T) {
	s, _ := newStore(t)
	ctx := t.Context()
	res, err := s.Txn(ctx, nil, []backends.Op{
		{Kind: backends.OpPut, Key: "a"}, {Kind: backends.OpPut, Key: "b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := res.Entries[0], res.Entries[1]; a.Revision != b.Revision || a.Revision != 1 {
		t.Errorf("Txn revisions %d and %d, want both 1", a.Revision, b.Revision)
	}
	if res, err := s.Txn(ctx, nil, nil); err != nil || len(res.Entries) != 0 {
		t.Errorf("empty Txn = (%v, %v), want no entries and no error", res, err)
	}
	e, _ := s.CreateIfAbsent(ctx, "c", nil, 0)
	if e.Revision != 2 {
		t.Errorf("revision after an empty Txn = %d, want 2 (an empty Txn writes nothing)", e.Revision)
	}
}

func TestDefaultClockAndNilOptions(t *testing.T) {
	s := memstore.New(nil, memstore.WithClock(nil), memstore.WithWatchBuffer(-5))
	defer s.Close()
	e, err := s.CreateIfAbsent(t.Context(), "k", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if e.Remaining <= 0 || e.Remaining > time.Hour {
		t.Errorf("Remaining on the real clock = %v, want within (0, 1h]", e.Remaining)
	}
	ch, err := s.Watch(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if cap(ch) != 1 {
		t.Errorf("watch buffer with WithWatchBuffer(-5) = %d, want 1", cap(ch))
	}
}

// TestConcurrentUse runs every operation, watches and the clock at once; it
// is meant for -race.
func TestConcurrentUse(t *testing.T) {
	s, clk := newStore(t, memstore.WithWatchBuffer(8))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	for w := range 3 { // watchers that come and go, some falling behind
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				wctx, wcancel := context.WithCancel(ctx)
				ch, err := s.Watch(wctx, fmt.Sprintf("k/%d", w))
				if err != nil {
					wcancel()
					return
				}
				for n := 0; n < 5+i%20; n++ {
					if _, ok := <-ch; !ok {
						break
					}
				}
				wcancel()
				for range ch {
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range 300 {
				key := fmt.Sprintf("k/%d/%d", w%3, i%7)
				e, err := s.Get(ctx, key)
				switch {
				case errors.Is(err, backends.ErrNotFound):
					_, _ = s.CreateIfAbsent(ctx, key, []byte("v"), time.Duration(1+i%5)*time.Second)
				case err != nil:
					t.Errorf("Get(%q): %v", key, err)
					return
				case i%3 == 0:
					_ = s.CompareAndDelete(ctx, key, e.Revision)
				case i%3 == 1:
					_, _ = s.KeepAlive(ctx, key, e.Revision, time.Second)
				default:
					_, _ = s.Txn(ctx, []backends.Cond{{Key: key, Revision: e.Revision}},
						[]backends.Op{{Kind: backends.OpPut, Key: key, Value: []byte("t"), TTL: time.Second}, {Kind: backends.OpDelete, Key: key + "x"}})
				}
				if _, err := s.List(ctx, "k/"); err != nil {
					t.Errorf("List: %v", err)
					return
				}
			}
		}()
	}
	writers.Add(1)
	go func() { // the clock moves while all that happens
		defer writers.Done()
		for range 30 {
			clk.Add(300 * time.Millisecond)
		}
	}()
	writers.Wait()
	cancel()
	wg.Wait()
}

// TestURLReadOnly checks that mem:// opened read-only is refused: every Open
// makes a new, empty store, so there is nothing to read.
func TestURLReadOnly(t *testing.T) {
	loc, err := storeurl.Parse("mem://")
	if err != nil {
		t.Fatal(err)
	}
	loc.ReadOnly = true
	if s, err := loc.Open(context.Background()); err == nil {
		s.Close()
		t.Error("mem:// opened read-only: got a store, want an error")
	} else if !errors.Is(err, backends.ErrMissingResource) {
		t.Errorf("mem:// opened read-only = %v, want ErrMissingResource", err)
	}
}
