package kube

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
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
	// done is closed by cancel: run ends on it, not on w's results channel
	// closing, which a watch.Interface need not do when its ctx ends
	// (client-go's fake clientset never does).
	done <-chan struct{}
	w    watch.Interface
	subs map[*sub]struct{} // guarded by hub.mu
	// state is the last logical state of every object, by name; owned by
	// the stream's goroutine once it runs.
	state map[string]wstate
	// timers fire at the local expiry of every present object with a TTL,
	// by name; owned like state.
	timers map[string]*clock.Timer
	// seenRV is the resourceVersion of the last event handled, bookmarks
	// and objects of no interest included.
	seenRV atomic.Int64
	// life ends the watch at the end of its lifetime (WithWatchTimeout).
	life *clock.Timer
	// claims are the names of the tracked claims of each session, by
	// session name, and sessionOf the session of each tracked claim; owned
	// like state. A session's renewal, end or deletion moves the expiry of
	// each of its claims.
	claims    map[string]map[string]struct{}
	sessionOf map[string]string

	dueMu sync.Mutex
	due   map[string]struct{} // names whose expiry timer fired; guarded by dueMu
	wake  chan struct{}       // signals due; buffered, never blocks
}

// markDue is the callback of an expiry timer: it hands the name to the
// stream's goroutine, which judges it.
func (st *stream) markDue(name string) {
	st.dueMu.Lock()
	st.due[name] = struct{}{}
	st.dueMu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

func (st *stream) takeDue() []string {
	st.dueMu.Lock()
	defer st.dueMu.Unlock()
	names := make([]string, 0, len(st.due))
	for name := range st.due {
		names = append(names, name)
	}
	clear(st.due)
	sort.Strings(names) // a stable order for the events of one tick
	return names
}

// wstate is what a watch last reported about one object.
type wstate struct {
	key                 string
	present             bool
	revision, createRev int64
	// expiredRV, when not 0, is the resourceVersion of the sighting whose
	// expiry was reported. A keep-alive keeps the logical revision, so the
	// revision alone cannot tell an expiry already reported from that of a
	// renewal seen since. For a claim of a session, expiredSession is the
	// session's sighting then: its renewal changes the session, not the
	// claim.
	expiredRV      int64
	expiredSession int64
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
// produce EventDelete, and so does expiry: once this process has seen an
// object unchanged for its TTL (the moment a write would find it expired),
// every open watch gets an EventDelete with the entry's last revisions. An
// entry that changes after its expiry was reported (its holder's renewal
// arriving late, or a new holder) is reported again as EventPut, and its
// expiry after that again as EventDelete.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("kube: watch: %w", err)
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
	st := &stream{
		subs:      map[*sub]struct{}{},
		state:     make(map[string]wstate, len(items)),
		timers:    map[string]*clock.Timer{},
		due:       map[string]struct{}{},
		claims:    map[string]map[string]struct{}{},
		sessionOf: map[string]string{},
		wake:      make(chan struct{}, 1),
	}
	for _, l := range items {
		if ws, ok := h.logical(l); ok {
			st.state[l.Name] = ws
			h.track(st, l, ws)
		}
	}
	wctx, cancel := context.WithCancel(context.Background())
	w, err := s.leases.Watch(wctx, metav1.ListOptions{LabelSelector: s.selector, ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		cancel()
		return nil, s.classify("watch", prefix, err)
	}
	st.cancel, st.done, st.w = cancel, wctx.Done(), w
	st.seenRV.Store(after)
	// A watch that stalls without breaking would otherwise keep its
	// consumers waiting for good on a change it will never deliver.
	life := s.watchLife + rand.N(s.watchLife+1)
	st.life = s.clock.AfterFunc(life, func() {
		s.log.Debug("kube: watch reached the end of its lifetime; ending it so its consumers read again", "lifetime", life)
		cancel()
	})

	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		st.life.Stop()
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
		st.life.Stop()
		for _, t := range st.timers {
			t.Stop()
		}
	}()
	results := st.w.ResultChan()
	for {
		select {
		case <-st.done:
			return
		case <-st.wake:
			h.expireDue(st)
			continue
		case ev, ok := <-results:
			if !ok {
				return
			}
			if !h.event(st, ev) {
				return
			}
		}
	}
}

// event handles one API server watch event; false ends the stream.
func (h *hub) event(st *stream, ev watch.Event) bool {
	switch ev.Type {
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
	default: // watch.Error: expired resourceVersion, server going away
		h.s.log.Debug("kube: watch ended by the server", "event", ev.Type, "object", fmt.Sprint(ev.Object))
		return false
	}
	l, ok := ev.Object.(*coordinationv1.Lease)
	if !ok {
		return true
	}
	rv, err := parseRV(l.ResourceVersion)
	if err != nil {
		h.s.log.Warn("kube: watch: unusable object", "name", l.Name, "err", err)
		return false
	}
	switch {
	case ev.Type == watch.Bookmark:
	case l.Labels[LabelSession] == sessionSelf || st.claims[l.Name] != nil:
		h.session(st, ev.Type, l, rv)
	default:
		h.handle(st, ev.Type, l, rv)
	}
	st.seenRV.Store(rv)
	return true
}

// session records an event of a session Lease (or of any object at the
// name of one), which is no logical event, and has every claim of the
// session judged again.
func (h *hub) session(st *stream, typ watch.EventType, l *coordinationv1.Lease, rv int64) {
	if typ == watch.Deleted {
		h.s.sightSession(l.Name, nil, rv)
	} else {
		h.s.sightSession(l.Name, l, 0)
	}
	st.markDue(l.Name)
}

// handle turns one object event into a logical event, if it is one.
func (h *hub) handle(st *stream, typ watch.EventType, l *coordinationv1.Lease, rv int64) {
	prev, had := st.state[l.Name]
	var cur wstate
	if typ == watch.Deleted {
		delete(st.state, l.Name)
		h.untrack(st, l.Name)
		h.s.forget(l.Name, rv)
	} else {
		var ok bool
		if cur, ok = h.logical(l); !ok {
			return
		}
		st.state[l.Name] = cur
		h.track(st, l, cur) // followers learn of renewals without polling
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

// track records a version of an object seen by the watch and arms its
// expiry timer from this process's sighting of it: a renewal moves the
// timer, a cleared object or one without a TTL stops it.
func (h *hub) track(st *stream, l *coordinationv1.Lease, ws wstate) {
	sg, _, err := h.s.sight(l)
	if err != nil || !ws.present {
		h.untrack(st, l.Name)
		return
	}
	st0, err := decode(ws.key, sg.lease)
	if err != nil || st0.entry.TTL <= 0 {
		h.untrack(st, l.Name)
		return
	}
	if name := st0.session; name != "" {
		if _, _, known := h.s.sessionSince(name); !known {
			// The watch delivers every object in resourceVersion order
			// and started from a list that held every session: one not
			// seen by now did not exist at this claim's version.
			rv, _ := parseRV(sg.lease.ResourceVersion)
			h.s.sightSession(name, nil, rv)
		}
	}
	v, err := h.s.judge(ws.key, sg)
	if err != nil {
		h.untrack(st, l.Name)
		return
	}
	h.index(st, l.Name, st0.session)
	h.arm(st, l.Name, v.st.entry.Remaining) // 0 when already expired
}

// index records that claim name is of session (none if "").
func (h *hub) index(st *stream, name, session string) {
	if old := st.sessionOf[name]; old != session && old != "" {
		delete(st.claims[old], name)
		if len(st.claims[old]) == 0 {
			delete(st.claims, old)
		}
	}
	if session == "" {
		delete(st.sessionOf, name)
		return
	}
	st.sessionOf[name] = session
	if st.claims[session] == nil {
		st.claims[session] = map[string]struct{}{}
	}
	st.claims[session][name] = struct{}{}
}

func (h *hub) arm(st *stream, name string, d time.Duration) {
	if t, ok := st.timers[name]; ok {
		t.Stop()
	}
	st.timers[name] = h.s.clock.AfterFunc(d, func() { st.markDue(name) })
}

func (h *hub) untrack(st *stream, name string) {
	if t, ok := st.timers[name]; ok {
		t.Stop()
		delete(st.timers, name)
	}
	h.index(st, name, "")
}

// sighted hands the running watch, if any, an object of which this process
// has just seen a new version through a read or a write, so that its expiry
// is timed even if the watch never delivers that version (it lags or
// stalls).
func (h *hub) sighted(name string) {
	h.mu.Lock()
	st := h.cur
	h.mu.Unlock()
	if st != nil {
		st.markDue(name)
	}
}

// expireDue judges the objects whose expiry timers fired, or of which a
// read or write saw a new version, by this process's newest sighting of
// each, which may be newer than the watch's state: an entry still
// unchanged for its TTL is reported expired, once, at the revisions that
// sighting shows; a live one gets its timer moved to its expiry.
func (h *hub) expireDue(st *stream) {
	var names []string
	for _, name := range st.takeDue() {
		names = append(names, name)
		for c := range st.claims[name] { // a session: judge its claims
			names = append(names, c)
		}
	}
	for _, name := range names {
		sg, ok := h.s.cached(name)
		if !ok {
			continue
		}
		key, ok := h.s.keyOf(sg.lease)
		if !ok {
			continue
		}
		v, err := h.s.judge(key, sg)
		switch {
		case err != nil || !v.st.present || v.st.entry.TTL <= 0:
			continue // cleared or not expiring: nothing to time
		case v.live:
			h.arm(st, name, v.st.entry.Remaining)
			h.revived(st, name, v)
			continue
		}
		e := v.st.entry
		sess := h.sessionRV(v)
		if ws, ok := st.state[name]; ok && !ws.present && ws.expiredRV == sg.rv && ws.expiredSession == sess {
			continue // this very version was reported expired already
		}
		if t, ok := st.timers[name]; ok {
			t.Stop()
			delete(st.timers, name)
		}
		st.state[name] = wstate{key: key, revision: e.Revision, createRev: e.CreateRevision, expiredRV: sg.rv, expiredSession: sess}
		// Expiry happens now, for every consumer open now, whatever
		// resourceVersion it joined at.
		h.dispatch(st, backends.Event{Kind: backends.EventDelete, Entry: backends.Entry{
			Key: key, Revision: e.Revision, CreateRevision: e.CreateRevision,
		}}, math.MaxInt64)
	}
}

// revived reports, as EventPut, the renewal of an entry whose expiry this
// watch reported, when a read or a write of this process saw the renewal
// before the watch delivered it (the holder's keep-alive arriving late, on
// a watch that lags or stalls). Only a renewal at the same revisions
// qualifies: between the expired version and this one there were then
// only keep-alives, which the watch reports as nothing, so the event
// cannot overtake another change of the entry. Once revived, the entry's
// next expiry is reported again.
func (h *hub) revived(st *stream, name string, v view) {
	ws, ok := st.state[name]
	e := v.st.entry
	if !ok || ws.present || ws.expiredRV == 0 || ws.expiredRV > v.rv ||
		ws.revision != e.Revision || ws.createRev != e.CreateRevision {
		return
	}
	if ws.expiredRV == v.rv && h.sessionRV(v) <= ws.expiredSession {
		return // neither the claim nor its session changed since
	}
	st.state[name] = wstate{key: ws.key, present: true, revision: e.Revision, createRev: e.CreateRevision}
	// Like the expiry it corrects, for every consumer open now.
	h.dispatch(st, backends.Event{Kind: backends.EventPut, Entry: e}, math.MaxInt64)
}

// sessionRV is the resourceVersion of the newest sighting of v's session,
// 0 for a claim outside sessions.
func (h *hub) sessionRV(v view) int64 {
	if v.st.session == "" {
		return 0
	}
	_, rv, _ := h.s.sessionSince(v.st.session)
	return rv
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
