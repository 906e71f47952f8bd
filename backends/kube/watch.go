package kube

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tenure-go/tenure/backends"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// subBuffer is how many events one Watch consumer may fall behind before its
// stream is ended (it then re-reads and watches again).
const subBuffer = 256

// hub shares one API server watch among every Watch call of a Store: a
// hundred elections in one process cost one watch, not a hundred. The watch
// starts with the first consumer and stops with the last one.
type hub struct {
	s *Store

	mu       sync.Mutex
	cur      *stream       // the running watch; nil if none; guarded by mu
	starting chan struct{} // closed when a start in progress ends; guarded by mu
	closed   bool          // guarded by mu
	wg       sync.WaitGroup
}

// stream is one API server watch and its consumers.
type stream struct {
	cancel context.CancelFunc
	w      watch.Interface
	subs   map[*sub]struct{} // guarded by hub.mu
	// state is the last logical state of every object, by name; owned by
	// the stream's goroutine once it runs.
	state map[string]wstate
	// seenRV is the resourceVersion of the last event handled, bookmarks
	// and objects of no interest included.
	seenRV atomic.Int64
}

// wstate is what a watch last reported about one object.
type wstate struct {
	key                 string
	present             bool
	revision, createRev int64
}

// sub is one Watch call.
type sub struct {
	prefix string
	after  int64 // deliver only changes with a resourceVersion above this
	ch     chan backends.Event
	stop   func() bool // unregisters the ctx.Done hook
	done   bool        // ch is closed; guarded by hub.mu
}

func newHub(s *Store) *hub { return &hub{s: s} }

// Watch implements backends.Watcher. Events follow the logical entries, not
// the objects: a KeepAlive (which rewrites the object) produces no event; a
// delete (which clears the object) and an out-of-band deletion of the object
// produce EventDelete; expiry judged by local observation produces none.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("kube: watch %q: %w", prefix, err)
	}
	return s.hub.watch(ctx, prefix)
}

func (h *hub) watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	for {
		h.mu.Lock()
		switch {
		case h.closed:
			h.mu.Unlock()
			return nil, fmt.Errorf("kube: watch %q: %w", prefix, backends.ErrClosed)
		case h.cur != nil:
			h.mu.Unlock()
			return h.join(ctx, prefix)
		case h.starting != nil:
			wait := h.starting
			h.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("kube: watch %q: %w", prefix, ctx.Err())
			}
		}
		h.starting = make(chan struct{})
		h.mu.Unlock()
		ch, err := h.start(ctx, prefix)
		h.mu.Lock()
		close(h.starting)
		h.starting = nil
		h.mu.Unlock()
		return ch, err
	}
}

// start lists every object (a consistent snapshot that seeds the logical
// state), opens the API server watch from that snapshot, and registers the
// first consumer, whose changes start after the snapshot.
func (h *hub) start(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	s := h.s
	items, rv, err := s.list(ctx, listPageSize)
	if err != nil {
		return nil, s.classify("watch", prefix, err)
	}
	after, err := parseRV(rv)
	if err != nil {
		return nil, fmt.Errorf("kube: watch %q: list: %w", prefix, err)
	}
	st := &stream{subs: map[*sub]struct{}{}, state: make(map[string]wstate, len(items))}
	for _, l := range items {
		if ws, ok := h.logical(l); ok {
			st.state[l.Name] = ws
		}
	}
	wctx, cancel := context.WithCancel(context.Background())
	w, err := s.leases.Watch(wctx, metav1.ListOptions{LabelSelector: s.selector, ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		cancel()
		return nil, s.classify("watch", prefix, err)
	}
	st.cancel, st.w = cancel, w
	st.seenRV.Store(after)

	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		cancel()
		w.Stop()
		return nil, fmt.Errorf("kube: watch %q: %w", prefix, backends.ErrClosed)
	}
	h.cur = st
	ch := h.addLocked(ctx, st, prefix, after)
	h.wg.Add(1)
	h.mu.Unlock()
	go h.run(st)
	return ch, nil
}

// join registers a consumer on the running stream. Its changes start after
// a consistent read of the current resourceVersion, so that it gets nothing
// written before Watch was called even if the shared stream lags behind.
func (h *hub) join(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	_, rv, err := h.s.list(ctx, 1)
	if err != nil {
		return nil, h.s.classify("watch", prefix, err)
	}
	after, err := parseRV(rv)
	if err != nil {
		return nil, fmt.Errorf("kube: watch %q: list: %w", prefix, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, fmt.Errorf("kube: watch %q: %w", prefix, backends.ErrClosed)
	}
	if h.cur == nil {
		// The stream broke or stopped meanwhile; its consumers were told.
		// This one is told the same way: a closed channel.
		ch := make(chan backends.Event)
		close(ch)
		return ch, nil
	}
	return h.addLocked(ctx, h.cur, prefix, after), nil
}

func (h *hub) addLocked(ctx context.Context, st *stream, prefix string, after int64) <-chan backends.Event {
	sb := &sub{prefix: prefix, after: after, ch: make(chan backends.Event, subBuffer)}
	st.subs[sb] = struct{}{}
	sb.stop = context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.dropLocked(st, sb)
	})
	return sb.ch
}

// dropLocked ends one consumer, and the stream with its last consumer.
func (h *hub) dropLocked(st *stream, sb *sub) {
	if sb.done {
		return
	}
	sb.done = true
	sb.stop()
	close(sb.ch)
	delete(st.subs, sb)
	if len(st.subs) == 0 && h.cur == st {
		h.cur = nil
		st.cancel() // run stops the watch and exits
	}
}

// endLocked ends the stream and every consumer.
func (h *hub) endLocked(st *stream) {
	for sb := range st.subs {
		h.dropLocked(st, sb)
	}
	if h.cur == st {
		h.cur = nil
	}
	st.cancel() // run stops the watch and exits
}

// run turns object events into logical events until the API server watch
// ends (stopped, or broken: the consumers then re-read and watch again).
func (h *hub) run(st *stream) {
	defer h.wg.Done()
	defer func() {
		h.mu.Lock()
		h.endLocked(st)
		h.mu.Unlock()
		st.w.Stop()
	}()
	for ev := range st.w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
		default: // watch.Error: expired resourceVersion, server going away
			h.s.log.Debug("kube: watch ended by the server", "event", ev.Type, "object", fmt.Sprint(ev.Object))
			return
		}
		l, ok := ev.Object.(*coordinationv1.Lease)
		if !ok {
			continue
		}
		rv, err := parseRV(l.ResourceVersion)
		if err != nil {
			h.s.log.Warn("kube: watch: unusable object", "name", l.Name, "err", err)
			return
		}
		if ev.Type == watch.Bookmark {
			st.seenRV.Store(rv)
			continue
		}
		h.handle(st, ev.Type, l, rv)
		st.seenRV.Store(rv)
	}
}

// handle turns one object event into a logical event, if it is one.
func (h *hub) handle(st *stream, typ watch.EventType, l *coordinationv1.Lease, rv int64) {
	prev, had := st.state[l.Name]
	var cur wstate
	if typ == watch.Deleted {
		delete(st.state, l.Name)
		h.s.forget(l.Name, rv)
	} else {
		var ok bool
		if cur, ok = h.logical(l); !ok {
			return
		}
		st.state[l.Name] = cur
		_, _ = h.s.observe(l) // followers learn of renewals without polling
	}
	var out backends.Event
	switch {
	case cur.present && (!had || !prev.present || prev.revision != cur.revision):
		out = backends.Event{Kind: backends.EventPut, Entry: h.entry(l, cur)}
	case !cur.present && had && prev.present:
		out = backends.Event{Kind: backends.EventDelete, Entry: backends.Entry{Key: prev.key, Revision: prev.revision, CreateRevision: prev.createRev}}
	default:
		return // a keep-alive, or nothing tenure sees
	}
	h.dispatch(st, out, rv)
}

// caughtUp reports whether the running watch has handled every event up to
// resourceVersion rv; false if no watch runs.
func (h *hub) caughtUp(rv int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cur != nil && h.cur.seenRV.Load() >= rv
}

// logical is the state a watched object stands for; ok is false for objects
// that are not this store's or cannot be decoded.
func (h *hub) logical(l *coordinationv1.Lease) (wstate, bool) {
	key, ok := h.s.keyOf(l)
	if !ok {
		return wstate{}, false
	}
	st, err := decode(key, l)
	if err != nil {
		h.s.log.Warn("kube: watch: skipping undecodable lease", "name", l.Name, "key", key, "err", err)
		return wstate{}, false
	}
	return wstate{key: key, present: st.present, revision: st.entry.Revision, createRev: st.entry.CreateRevision}, true
}

func (h *hub) entry(l *coordinationv1.Lease, ws wstate) backends.Entry {
	st, _ := decode(ws.key, l) // decoded once already in logical
	e := st.entry
	e.Remaining = e.TTL // just seen changed: a full TTL from here
	return e
}

// dispatch hands out one event without blocking: a consumer whose buffer is
// full has fallen behind and its stream is ended.
func (h *hub) dispatch(st *stream, ev backends.Event, rv int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sb := range st.subs {
		if rv <= sb.after || !strings.HasPrefix(ev.Entry.Key, sb.prefix) {
			continue
		}
		select {
		case sb.ch <- ev:
		default:
			h.s.log.Debug("kube: watch consumer fell behind; ending its stream", "prefix", sb.prefix)
			h.dropLocked(st, sb)
		}
	}
}

// close ends every stream and waits for their goroutines.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	if h.cur != nil {
		h.endLocked(h.cur)
	}
	h.mu.Unlock()
	h.wg.Wait()
}
