package filestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/tenure-go/tenure/backends"
)

// nextEvent waits (bounded by the test context) for the next event.
func nextEvent(t *testing.T, ch <-chan backends.Event) backends.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("watch channel closed, want an event")
		}
		return ev
	case <-ctxT(t).Done():
		t.Fatalf("no event before the test deadline")
	}
	return backends.Event{}
}

// wantClosed waits (bounded) for the channel to close, skipping events.
func wantClosed(t *testing.T, ch <-chan backends.Event) {
	t.Helper()
	ctx := ctxT(t)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-ctx.Done():
			t.Fatalf("watch channel still open at the test deadline")
		}
	}
}

type evWant struct {
	kind      backends.EventKind
	key       string
	rev, crev int64
	value     string
}

func checkEvent(t *testing.T, step string, got backends.Event, want evWant) {
	t.Helper()
	if got.Kind != want.kind || got.Entry.Key != want.key || got.Entry.Revision != want.rev ||
		got.Entry.CreateRevision != want.crev || string(got.Entry.Value) != want.value {
		t.Errorf("%s: event = %v %q rev %d crev %d value %q; want %v %q rev %d crev %d value %q", step,
			got.Kind, got.Entry.Key, got.Entry.Revision, got.Entry.CreateRevision, got.Entry.Value,
			want.kind, want.key, want.rev, want.crev, want.value)
	}
}

func TestWatchReportsPutsAndDeletes(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	peer := e.open() // writes come from another Store value, as from another process
	ctx := ctxT(t)
	ch, err := s.Watch(ctx, "g/")
	if err != nil {
		t.Fatal(err)
	}
	long := "g/" + strings.Repeat("λ", 100) // a hashed file name
	steps := []struct {
		name  string
		write func() error
		want  *evWant // nil: no event; the sentinel's event comes next
	}{
		{"create", func() error { _, err := peer.CreateIfAbsent(ctx, "g/a", []byte("1"), 0); return err },
			&evWant{backends.EventPut, "g/a", 1, 1, "1"}},
		{"cas", func() error { _, err := peer.CompareAndSet(ctx, "g/a", 1, []byte("2"), time.Second); return err },
			&evWant{backends.EventPut, "g/a", 2, 1, "2"}},
		{"keepalive", func() error { _, err := peer.KeepAlive(ctx, "g/a", 2, time.Minute); return err }, nil},
		{"other prefix", func() error { _, err := peer.CreateIfAbsent(ctx, "h/a", nil, 0); return err }, nil},
		{"failed cas", func() error { peer.CompareAndSet(ctx, "g/a", 1, nil, 0); return nil }, nil},
		{"delete", func() error { return peer.CompareAndDelete(ctx, "g/a", 2) },
			&evWant{backends.EventDelete, "g/a", 2, 1, ""}},
		{"re-create", func() error { _, err := peer.CreateIfAbsent(ctx, "g/a", []byte("3"), 0); return err },
			&evWant{backends.EventPut, "g/a", 3, 3, "3"}},
		{"hashed key", func() error { _, err := peer.CreateIfAbsent(ctx, long, []byte("L"), 0); return err },
			&evWant{backends.EventPut, long, 1, 1, "L"}},
		{"orphan temp file", func() error {
			return os.WriteFile(filepath.Join(e.dir, tempName(lockOffset("g/a"), 9)), []byte("junk"), 0o644)
		}, nil},
	}
	sentinel := int64(0)
	for _, st := range steps {
		if err := st.write(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if st.want != nil {
			checkEvent(t, st.name, nextEvent(t, ch), *st.want)
			continue
		}
		// No event expected: a write to a sentinel key must be next.
		sentinel++
		if _, err := peer.CompareAndSet(ctx, "g/sentinel", sentinel-1, []byte(st.name), 0); err != nil {
			t.Fatal(err)
		}
		checkEvent(t, st.name+" then sentinel", nextEvent(t, ch),
			evWant{backends.EventPut, "g/sentinel", sentinel, 1, st.name})
	}
}

func TestWatchExpiredReplacement(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	ctx := ctxT(t)
	mustCreate(t, s, "k", "a", time.Second)
	ch, err := s.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Add(time.Second)
	mustCreate(t, s, "k", "b", time.Second)
	checkEvent(t, "create over expired", nextEvent(t, ch), evWant{backends.EventPut, "k", 2, 2, "b"})
}

func TestWatchEnds(t *testing.T) {
	tests := []struct {
		name string
		end  func(e *env, s *Store, cancel context.CancelFunc)
	}{
		{"ctx cancelled", func(e *env, s *Store, cancel context.CancelFunc) { cancel() }},
		{"store closed", func(e *env, s *Store, cancel context.CancelFunc) { s.Close() }},
		{"corrupt file", func(e *env, s *Store, cancel context.CancelFunc) {
			os.WriteFile(filepath.Join(e.dir, fileName("k")), []byte("garbage"), 0o644)
		}},
		{"key file removed", func(e *env, s *Store, cancel context.CancelFunc) {
			os.Remove(filepath.Join(e.dir, fileName("k")))
		}},
		{"directory removed", func(e *env, s *Store, cancel context.CancelFunc) { os.RemoveAll(e.dir) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.open()
			mustCreate(t, s, "k", "v", 0)
			ctx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			ch, err := s.Watch(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			tt.end(e, s, cancel)
			wantClosed(t, ch)
		})
	}
}

func TestWatchValidates(t *testing.T) {
	s := newEnv(t).open()
	if _, err := s.Watch(ctxT(t), "\xff"); err == nil {
		t.Errorf("Watch with an invalid prefix succeeded")
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	if _, err := s.Watch(ctx, ""); err == nil {
		t.Errorf("Watch with a done context succeeded")
	}
}

// TestWatchCatchesUpFromHistory feeds one notification to a watch that last
// reported various states: it reports every state since, in order, from
// the file's history, and ends the stream when the history does not reach
// back far enough.
func TestWatchCatchesUpFromHistory(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	ctx := ctxT(t)
	c1 := mustCreate(t, s, "k", "v1", 0)
	c2, err := s.CompareAndSet(ctx, "k", c1.Revision, []byte("v2"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CompareAndDelete(ctx, "k", c2.Revision); err != nil {
		t.Fatal(err)
	}
	c3 := mustCreate(t, s, "k", "v3", 0)
	if _, err := s.KeepAlive(ctx, "k", c3.Revision, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompareAndSet(ctx, "k", c3.Revision, []byte("v4"), 0); err != nil {
		t.Fatal(err)
	}
	name := fileName("k")
	notify := fsnotify.Event{Name: filepath.Join(e.dir, name), Op: fsnotify.Create}
	put := func(rev, crev int64, v string) evWant { return evWant{backends.EventPut, "k", rev, crev, v} }
	del := func(rev, crev int64) evWant { return evWant{backends.EventDelete, "k", rev, crev, ""} }
	tests := []struct {
		name string
		last *mark
		want []evWant
	}{
		{"never seen", nil, []evWant{put(1, 1, "v1"), put(2, 1, "v2"), del(2, 1), put(3, 3, "v3"), put(4, 3, "v4")}},
		{"seen rev 2", &mark{rev: 2}, []evWant{del(2, 1), put(3, 3, "v3"), put(4, 3, "v4")}},
		{"seen rev 2 deleted", &mark{rev: 2, deleted: true}, []evWant{put(3, 3, "v3"), put(4, 3, "v4")}},
		{"seen rev 4", &mark{rev: 4}, nil},
	}
	for _, tt := range tests {
		seen := map[string]mark{}
		if tt.last != nil {
			seen[name] = *tt.last
		}
		evs, cont := s.translate(notify, "", seen)
		if !cont || len(evs) != len(tt.want) {
			t.Errorf("%s: %d events, continue %v; want %d, true", tt.name, len(evs), cont, len(tt.want))
			continue
		}
		for i := range evs {
			checkEvent(t, fmt.Sprintf("%s: event %d", tt.name, i), evs[i], tt.want[i])
		}
		if got := seen[name]; got != (mark{rev: 4}) {
			t.Errorf("%s: mark after = %+v, want rev 4", tt.name, got)
		}
	}

	rev := int64(4)
	for range histMax {
		if _, err := s.CompareAndSet(ctx, "k", rev, nil, 0); err != nil {
			t.Fatal(err)
		}
		rev++
	}
	seen := map[string]mark{name: {rev: 2, deleted: true}}
	if evs, cont := s.translate(notify, "", seen); cont || len(evs) != 0 {
		t.Errorf("beyond the history: %d events, continue %v; want none and the stream ended", len(evs), cont)
	}
}

// TestWatchBurst writes a burst without reading the watch: every revision
// arrives, in order.
func TestWatchBurst(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	peer := e.open()
	ctx := ctxT(t)
	ch, err := s.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	const writes = 12
	rev := mustCreate(t, peer, "k", "0", 0).Revision
	for i := 1; i < writes; i++ {
		e, err := peer.CompareAndSet(ctx, "k", rev, []byte(fmt.Sprint(i)), 0)
		if err != nil {
			t.Fatal(err)
		}
		rev = e.Revision
	}
	for i := range writes {
		checkEvent(t, fmt.Sprintf("write %d", i), nextEvent(t, ch), evWant{backends.EventPut, "k", int64(i + 1), 1, fmt.Sprint(i)})
	}
}
