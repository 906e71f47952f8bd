package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/check"
	"github.com/tenure-go/tenure/internal/closer"
)

// defaultWatchBuffer is the number of events a watch channel buffers before
// the watcher counts as fallen behind and its channel is closed.
const defaultWatchBuffer = 256

// Option configures a Store.
type Option func(*options)

type options struct {
	clock       clock.Clock
	watchBuffer int
}

// WithClock makes c the store's expiry judge. The default, also used when c
// is nil, is the real clock (clock.New()).
func WithClock(c clock.Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithWatchBuffer sets how many events each watch channel buffers
// (default 256). Values below 1 are raised to 1.
func WithWatchBuffer(n int) Option {
	return func(o *options) { o.watchBuffer = max(n, 1) }
}

// Store is the in-memory store. Create it with New; it is safe for
// concurrent use; after Close every method fails with an error wrapping
// backends.ErrClosed. A Store is not reusable after Close.
type Store struct {
	clock       clock.Clock
	watchBuffer int

	// wg counts the store's callbacks that may still run: the armed expiry
	// timer and one context callback per open watch. Close waits on it.
	wg sync.WaitGroup

	mu sync.Mutex
	// Everything below is guarded by mu.
	closing  closer.Once      // marked under mu
	rev      int64            // the last revision issued
	items    map[string]*item // live entries (expired ones are swept first)
	expiry   expiryHeap       // the items that have a TTL, earliest first
	watchers map[*watcher]struct{}
	timer    *clock.Timer // armed only while a watch is open and expiry is non-empty
	timerAt  time.Time    // when timer fires
	timerGen uint64       // identifies the current timer to its callback
	// timerDone marks the current timer's callback as accounted for in wg,
	// once: either its callback finished or Stop prevented it. A fake clock
	// may report Stop true for a timer it fires anyway, so the two paths
	// share one sync.Once rather than trusting Stop.
	timerDone func()
}

type item struct {
	key            string
	value          []byte // never written in place; replaced on every write
	rev, createRev int64
	ttl            time.Duration
	expiresAt      time.Time // meaningful when ttl > 0
	index          int       // position in Store.expiry, -1 when not there
}

type watcher struct {
	prefix string
	ch     chan backends.Event
	stop   func() bool // stops the context callback; see Watch
}

var (
	_ backends.Store   = (*Store)(nil)
	_ backends.Watcher = (*Store)(nil)
	_ backends.Txner   = (*Store)(nil)
)

// New returns an empty store. Options: WithClock (default: the real clock),
// WithWatchBuffer (default: 256).
func New(opts ...Option) *Store {
	o := options{clock: clock.New(), watchBuffer: defaultWatchBuffer}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return &Store{
		clock:       o.clock,
		watchBuffer: o.watchBuffer,
		items:       make(map[string]*item),
		watchers:    make(map[*watcher]struct{}),
	}
}

// Capabilities implements backends.Store: every operation is atomic, within
// one process, judged by the injected clock.
func (s *Store) Capabilities() backends.Capabilities {
	return backends.Capabilities{
		Atomic: backends.CapCreateIfAbsent | backends.CapCompareAndSet | backends.CapCompareAndDelete |
			backends.CapKeepAlive | backends.CapWatch | backends.CapTxn,
		Scope:        backends.ScopeProcess,
		ExpiryJudge:  "injected clock",
		ExpiryEvents: true,
	}
}

// Get implements backends.Store.
func (s *Store) Get(ctx context.Context, key string) (backends.Entry, error) {
	if err := checkCall(ctx, backends.ValidateKey(key)); err != nil {
		return backends.Entry{}, opErr("get", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.begin()
	if err != nil {
		return backends.Entry{}, opErr("get", key, err)
	}
	it := s.items[key]
	if it == nil {
		return backends.Entry{}, opErr("get", key, backends.ErrNotFound)
	}
	return it.entry(now), nil
}

// List implements backends.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]backends.Entry, error) {
	if err := checkCall(ctx, backends.ValidatePrefix(prefix)); err != nil {
		return nil, opErr("list", prefix, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.begin()
	if err != nil {
		return nil, opErr("list", prefix, err)
	}
	var found []*item
	for k, it := range s.items {
		if strings.HasPrefix(k, prefix) {
			found = append(found, it)
		}
	}
	slices.SortFunc(found, func(a, b *item) int { return strings.Compare(a.key, b.key) })
	out := make([]backends.Entry, len(found))
	for i, it := range found {
		out[i] = it.entry(now)
	}
	return out, nil
}

// CreateIfAbsent implements backends.Store.
func (s *Store) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	if err := checkCall(ctx, check.Write(key, 0, value, ttl)); err != nil {
		return backends.Entry{}, opErr("create", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.begin()
	if err != nil {
		return backends.Entry{}, opErr("create", key, err)
	}
	if it := s.items[key]; it != nil {
		return backends.Entry{}, conflict("create", key, 0, it, now)
	}
	return s.put(nil, key, value, ttl, now), nil
}

// CompareAndSet implements backends.Store. rev 0 means create-only.
func (s *Store) CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	if err := checkCall(ctx, check.Write(key, rev, value, ttl)); err != nil {
		return backends.Entry{}, opErr("cas", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.begin()
	if err != nil {
		return backends.Entry{}, opErr("cas", key, err)
	}
	it := s.items[key]
	if !matches(it, rev) {
		return backends.Entry{}, conflict("cas", key, rev, it, now)
	}
	return s.put(it, key, value, ttl, now), nil
}

// CompareAndDelete implements backends.Store.
func (s *Store) CompareAndDelete(ctx context.Context, key string, rev int64) error {
	err := backends.ValidateKey(key)
	if err == nil {
		err = check.Revision(rev, true)
	}
	if err := checkCall(ctx, err); err != nil {
		return opErr("delete", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.begin()
	if err != nil {
		return opErr("delete", key, err)
	}
	it := s.items[key]
	if !matches(it, rev) {
		return conflict("delete", key, rev, it, now)
	}
	s.rev++
	s.remove(it)
	s.rearm(now)
	return nil
}

// KeepAlive implements backends.Store: it sets the TTL to ttl from the
// clock's Now, keeps Revision and value, and emits no event.
func (s *Store) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	err := backends.ValidateKey(key)
	if err == nil {
		err = check.Revision(rev, true)
	}
	if err == nil {
		err = check.KeepAliveTTL(ttl)
	}
	if err := checkCall(ctx, err); err != nil {
		return backends.Entry{}, opErr("keepalive", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.begin()
	if err != nil {
		return backends.Entry{}, opErr("keepalive", key, err)
	}
	it := s.items[key]
	if !matches(it, rev) {
		return backends.Entry{}, conflict("keepalive", key, rev, it, now)
	}
	s.setTTL(it, ttl, now)
	s.rearm(now)
	return it.entry(now), nil
}

// Txn implements backends.Txner. All the operations share one new revision.
func (s *Store) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	if err := checkCall(ctx, check.Txn(conds, ops)); err != nil {
		return backends.TxnResult{}, opErr("txn", "", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.begin()
	if err != nil {
		return backends.TxnResult{}, opErr("txn", "", err)
	}
	for _, c := range conds {
		if it := s.items[c.Key]; !matches(it, c.Revision) {
			return backends.TxnResult{}, conflict("txn", c.Key, c.Revision, it, now)
		}
	}
	res := backends.TxnResult{Entries: make([]backends.Entry, len(ops))}
	if len(ops) == 0 {
		return res, nil
	}
	s.rev++
	for i, op := range ops {
		it := s.items[op.Key]
		switch op.Kind {
		case backends.OpPut:
			res.Entries[i] = s.write(it, op.Key, op.Value, op.TTL, now)
		case backends.OpDelete:
			if it == nil {
				res.Entries[i] = backends.Entry{Key: op.Key}
				continue
			}
			res.Entries[i] = it.entry(now)
			s.remove(it)
		}
	}
	s.rearm(now)
	return res, nil
}

// Watch implements backends.Watcher. The channel is closed when ctx is done,
// the store is closed, or the watcher falls more than the watch buffer
// behind.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	if err := checkCall(ctx, backends.ValidatePrefix(prefix)); err != nil {
		return nil, opErr("watch", prefix, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now, err := s.begin()
	if err != nil {
		return nil, opErr("watch", prefix, err)
	}
	w := &watcher{prefix: prefix, ch: make(chan backends.Event, s.watchBuffer)}
	s.watchers[w] = struct{}{}
	// The callback runs exactly when stop() has not stopped it first; it
	// and dropWatcher between them call wg.Done once.
	s.wg.Add(1)
	w.stop = context.AfterFunc(ctx, func() {
		defer s.wg.Done()
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.watchers[w]; ok {
			delete(s.watchers, w)
			close(w.ch)
			if !s.closing.Closed() {
				now := s.clock.Now()
				s.sweep(now) // so that the timer rearm arms is in the future
				s.rearm(now)
			}
		}
	})
	s.rearm(now)
	return w.ch, nil
}

// Close implements backends.Store. It closes every watch channel, stops the
// expiry timer and returns once the store's callbacks have returned.
func (s *Store) Close() error {
	return s.closing.Close(&s.mu, func() error {
		s.mu.Lock()
		for w := range s.watchers {
			s.dropWatcher(w)
		}
		if s.timer != nil {
			s.stopTimer()
		}
		s.mu.Unlock()
		s.wg.Wait()
		return nil
	})
}

// begin starts an operation under mu: it fails on a closed store, reads the
// clock once and removes every entry that has expired by then, so the map
// holds live entries only.
func (s *Store) begin() (time.Time, error) {
	if s.closing.Closed() {
		return time.Time{}, backends.ErrClosed
	}
	now := s.clock.Now()
	s.sweep(now)
	return now, nil
}

// sweep expires every entry whose deadline is not after now.
func (s *Store) sweep(now time.Time) {
	for len(s.expiry) > 0 && !now.Before(s.expiry[0].expiresAt) {
		s.rev++
		s.remove(s.expiry[0])
	}
}

// matches reports whether it (nil when absent) is at revision rev, where 0
// means absent.
func matches(it *item, rev int64) bool {
	if it == nil {
		return rev == 0
	}
	return it.rev == rev
}

// put writes one key under a fresh revision.
func (s *Store) put(it *item, key string, value []byte, ttl time.Duration, now time.Time) backends.Entry {
	s.rev++
	e := s.write(it, key, value, ttl, now)
	s.rearm(now)
	return e
}

// write stores value at the current revision s.rev, creating the item if it
// is nil, and emits the put.
func (s *Store) write(it *item, key string, value []byte, ttl time.Duration, now time.Time) backends.Entry {
	if it == nil {
		it = &item{key: key, createRev: s.rev, index: -1}
		s.items[key] = it
	}
	it.value = clone(value)
	it.rev = s.rev
	s.setTTL(it, ttl, now)
	s.emit(backends.EventPut, it, now)
	return it.entry(now)
}

// remove deletes it from the store and emits the delete. The caller has
// moved the revision counter.
func (s *Store) remove(it *item) {
	if it.index >= 0 {
		s.expiry.remove(it.index)
	}
	delete(s.items, it.key)
	s.emit(backends.EventDelete, it, time.Time{})
}

func (s *Store) setTTL(it *item, ttl time.Duration, now time.Time) {
	it.ttl = ttl
	if ttl <= 0 {
		it.expiresAt = time.Time{}
		if it.index >= 0 {
			s.expiry.remove(it.index)
		}
		return
	}
	it.expiresAt = now.Add(ttl)
	if it.index >= 0 {
		s.expiry.fix(it.index)
	} else {
		s.expiry.push(it)
	}
}

func (it *item) entry(now time.Time) backends.Entry {
	e := backends.Entry{
		Key:            it.key,
		Value:          clone(it.value),
		Revision:       it.rev,
		CreateRevision: it.createRev,
		TTL:            it.ttl,
	}
	if it.ttl > 0 {
		e.Remaining = it.expiresAt.Sub(now)
	}
	return e
}

// emit delivers an event to every matching watcher without blocking: a
// watcher whose buffer is full is dropped and its channel closed.
func (s *Store) emit(kind backends.EventKind, it *item, now time.Time) {
	if len(s.watchers) == 0 {
		return
	}
	for w := range s.watchers {
		if !strings.HasPrefix(it.key, w.prefix) {
			continue
		}
		ev := backends.Event{Kind: kind}
		if kind == backends.EventPut {
			ev.Entry = it.entry(now)
		} else {
			ev.Entry = backends.Entry{Key: it.key, Revision: it.rev, CreateRevision: it.createRev, TTL: it.ttl}
		}
		select {
		case w.ch <- ev:
		default:
			s.dropWatcher(w)
		}
	}
}

func (s *Store) dropWatcher(w *watcher) {
	delete(s.watchers, w)
	close(w.ch)
	if w.stop() {
		s.wg.Done() // the context callback will never run
	}
}

// rearm keeps one timer armed at the earliest expiry while a watch is open,
// so that expiry is reported without waiting for the next operation, and
// none otherwise. Callers have swept at now, so the timer is always in the
// future: a fake clock may fire a due timer synchronously.
func (s *Store) rearm(now time.Time) {
	if len(s.watchers) == 0 || len(s.expiry) == 0 {
		if s.timer != nil {
			s.stopTimer()
		}
		return
	}
	at := s.expiry[0].expiresAt
	if s.timer != nil {
		if !s.timerAt.After(at) {
			return // it fires first; its callback re-arms
		}
		s.stopTimer()
	}
	s.timerGen++
	gen := s.timerGen
	s.timerAt = at
	s.wg.Add(1)
	done := sync.OnceFunc(s.wg.Done)
	s.timerDone = done
	s.timer = s.clock.AfterFunc(at.Sub(now), func() {
		defer done()
		s.onTimer(gen)
	})
}

func (s *Store) stopTimer() {
	if s.timer.Stop() {
		s.timerDone() // the callback should never run
	}
	s.timer, s.timerDone = nil, nil
}

func (s *Store) onTimer(gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Closed() {
		return
	}
	if gen == s.timerGen {
		s.timer, s.timerDone = nil, nil
	}
	now := s.clock.Now()
	s.sweep(now)
	s.rearm(now)
}

// checkCall reports a nil or finished context, or the argument error.
func checkCall(ctx context.Context, argErr error) error {
	if argErr != nil {
		return argErr
	}
	if ctx == nil {
		return fmt.Errorf("nil context: %w", backends.ErrInvalid)
	}
	return ctx.Err()
}

// clone copies a value, keeping nil and empty apart.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	c := make([]byte, len(b))
	copy(c, b)
	return c
}
