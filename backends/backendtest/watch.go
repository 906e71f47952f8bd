package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// eventWait bounds every wait for a watch event or a channel close.
const eventWait = 10 * time.Second

// watcher returns st as a Watcher, skipping t unless watch is declared.
func watcher(t *testing.T, st backends.Store) backends.Watcher {
	t.Helper()
	need(t, st, backends.CapWatch)
	w, ok := st.(backends.Watcher)
	if !ok {
		t.Fatalf("store %T declares watch but is not a backends.Watcher", st)
	}
	return w
}

// nextEvent waits (bounded) for the next event on ch.
func nextEvent(t *testing.T, ch <-chan backends.Event) (backends.Event, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), eventWait)
	defer cancel()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed while an event was expected")
		}
		return ev, true
	case <-ctx.Done():
		t.Fatalf("no watch event within %v", eventWait)
	}
	return backends.Event{}, false
}

// drainClosed reads ch until it is closed, bounded by eventWait.
func drainClosed(t *testing.T, ch <-chan backends.Event) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), eventWait)
	defer cancel()
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return nil
			}
		case <-ctx.Done():
			return errors.New("not closed within " + eventWait.String())
		}
	}
}

type seen struct {
	kind backends.EventKind
	rev  int64
}

type seenAt struct {
	key string
	rev int64
}

func (s seen) String() string { return fmt.Sprintf("%v@%d", s.kind, s.rev) }

func (s *suite) testWatchOrder(t *testing.T) {
	st := s.store(t)
	p := s.peer(t, st)
	w := watcher(t, p)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const prefix = "w/"
	ch, err := w.Watch(ctx, prefix)
	if err != nil {
		t.Fatalf("Watch(%q): %v", prefix, err)
	}

	want := map[string][]seen{}
	values := map[seenAt]string{} // revisions are per key: index by both
	put := func(e backends.Entry) {
		want[e.Key] = append(want[e.Key], seen{backends.EventPut, e.Revision})
		values[seenAt{e.Key, e.Revision}] = string(e.Value)
	}
	del := func(e backends.Entry) {
		mustDelete(t, st, e.Key, e.Revision)
		want[e.Key] = append(want[e.Key], seen{backends.EventDelete, e.Revision})
	}
	a1 := mustCreate(t, st, "w/a", []byte("a1"), 0)
	put(a1)
	mustCreate(t, st, "x/a", []byte("outside"), 0)
	mustCreate(t, st, "w", []byte("outside: no slash"), 0)
	mustCreate(t, st, "wx/a", []byte("outside: wx"), 0)
	b1 := mustCreate(t, st, "w/b", []byte("b1"), 0)
	put(b1)
	a2 := mustCAS(t, st, "w/a", a1.Revision, []byte("a2"), 0)
	put(a2)
	del(b1)
	deep := mustCreate(t, st, "w/a/deep", []byte("deep"), 0)
	put(deep)
	a3 := mustCAS(t, st, "w/a", a2.Revision, []byte("a3"), 0)
	put(a3)
	del(a3)
	b2 := mustCreate(t, st, "w/b", []byte("b2"), 0)
	put(b2)
	end := mustCreate(t, st, "w/z", []byte("end"), 0)
	put(end)

	got := map[string][]seen{}
	for {
		ev, _ := nextEvent(t, ch)
		e := ev.Entry
		if len(e.Key) < len(prefix) || e.Key[:len(prefix)] != prefix {
			t.Errorf("Watch(%q) delivered an event for %q, outside the prefix", prefix, e.Key)
			continue
		}
		got[e.Key] = append(got[e.Key], seen{ev.Kind, e.Revision})
		if ev.Kind == backends.EventPut && string(e.Value) != values[seenAt{e.Key, e.Revision}] {
			t.Errorf("put event for %q at rev %d carries value %q, want %q", e.Key, e.Revision, e.Value, values[seenAt{e.Key, e.Revision}])
		}
		if e.Key == end.Key {
			break
		}
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("events for %q = %v, want %v (each key's events in revision order; deletes carry the last revision)", k, got[k], w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected events for %q: %v", k, got[k])
		}
	}
}

func (s *suite) testWatchLater(t *testing.T) {
	st := s.store(t)
	w := watcher(t, st)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	before := mustCreate(t, st, "later/before", []byte("b"), s.ttl)
	ch, err := w.Watch(ctx, "later/")
	if err != nil {
		t.Fatalf("Watch(%q): %v", "later/", err)
	}
	if _, err := st.KeepAlive(ctx, before.Key, before.Revision, s.ttl); err != nil {
		t.Fatalf("KeepAlive(%q, rev %d): %v", before.Key, before.Revision, err)
	}
	after := mustCreate(t, st, "later/after", []byte("a"), 0)
	ev, _ := nextEvent(t, ch)
	if ev.Kind != backends.EventPut || ev.Entry.Key != after.Key || ev.Entry.Revision != after.Revision {
		t.Errorf("first event = %v %q@%d, want put %q@%d: writes before Watch and keep-alives produce no event", ev.Kind, ev.Entry.Key, ev.Entry.Revision, after.Key, after.Revision)
	}
}

func (s *suite) testWatchCancel(t *testing.T) {
	st := s.store(t)
	w := watcher(t, st)
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := w.Watch(ctx, "cancel/")
	if err != nil {
		cancel()
		t.Fatalf("Watch(%q): %v", "cancel/", err)
	}
	mustCreate(t, st, "cancel/a", nil, 0)
	cancel()
	if err := drainClosed(t, ch); err != nil {
		t.Errorf("watch channel after its context was cancelled: %v", err)
	}
	// The store works on after a watch ended.
	mustCreate(t, st, "cancel/b", nil, 0)
}

// testWatchExpiry checks the promise of Capabilities.ExpiryEvents: an entry
// that expires while a watch is open is reported as an EventDelete carrying
// its last revision, and one kept alive is not reported.
func (s *suite) testWatchExpiry(t *testing.T) {
	st := s.store(t)
	if !st.Capabilities().ExpiryEvents {
		t.Skip("store does not declare expiry events")
	}
	need(t, st, backends.CapKeepAlive)
	w := watcher(t, st)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	gone := mustCreate(t, st, "expiry/gone", []byte("g"), s.ttl)
	ch, err := w.Watch(ctx, "expiry/")
	if err != nil {
		t.Fatalf("Watch(%q): %v", "expiry/", err)
	}
	s.expire(t, st, gone)
	ev, _ := nextEvent(t, ch)
	if ev.Kind != backends.EventDelete || ev.Entry.Key != gone.Key || ev.Entry.Revision != gone.Revision {
		t.Fatalf("event after %q expired = %v %q@%d, want delete %q@%d", gone.Key, ev.Kind, ev.Entry.Key, ev.Entry.Revision, gone.Key, gone.Revision)
	}

	// An entry renewed before its TTL ran out is not reported. A wrong
	// report is looked for until the put of a marker written after the
	// entry's first TTL has passed arrives.
	kept := mustCreate(t, st, "expiry/kept", []byte("k"), s.ttl)
	if ev, _ := nextEvent(t, ch); ev.Kind != backends.EventPut || ev.Entry.Key != kept.Key {
		t.Fatalf("event after creating %q = %v %q, want its put", kept.Key, ev.Kind, ev.Entry.Key)
	}
	if s.h.Elapse == nil {
		return // without a fake judge, the renewal cannot be placed in time
	}
	s.h.Elapse(s.ttl / 2)
	if _, err := st.KeepAlive(ctx, kept.Key, kept.Revision, s.ttl); err != nil {
		t.Fatalf("KeepAlive(%q, rev %d): %v", kept.Key, kept.Revision, err)
	}
	s.h.Elapse(s.ttl/2 + s.ttl/10)
	marker := mustCreate(t, st, "expiry/marker", nil, 0)
	for {
		ev, _ := nextEvent(t, ch)
		if ev.Entry.Key == kept.Key {
			t.Fatalf("%v event for %q, renewed within its TTL", ev.Kind, kept.Key)
		}
		if ev.Entry.Key == marker.Key {
			return
		}
	}
}
