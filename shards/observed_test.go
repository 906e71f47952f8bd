package shards_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
)

// observed is one member's store over a shared memstore that judges expiry
// by local observation and reports no expiry in its watch, as the PostgreSQL
// store does: an entry with a TTL is expired for it only once it has seen the
// same revision and keep-alive unchanged for a whole TTL on its own clock.
//
// The memstore judges expiry from the last keep-alive, which is never later
// than this store's first sighting of it, so everything the memstore holds
// is live for every observer too; an observer only keeps an entry the
// memstore has expired live a while longer (Get, List, CreateIfAbsent),
// until a TTL after it first saw its last keep-alive. A keep-alive is told
// by the expiry it set (Remaining from now, on the shared fake clock).
type observed struct {
	inner   *memstore.Store
	deletes *deletes // the deletes every observer made, shared
	clk     clock.Clock

	mu   sync.Mutex
	seen map[string]sighting // guarded by mu
}

// sighting is what an observer last saw of a key, and when it first saw it.
type sighting struct {
	entry backends.Entry
	beat  time.Time // the expiry the last keep-alive set
	at    time.Time
}

// deletes records the entries deleted by CompareAndDelete, so that the
// observers' watches pass those deletes on and drop the memstore's expiry
// events.
type deletes struct {
	mu   sync.Mutex
	revs map[string]map[int64]bool // guarded by mu
}

func (d *deletes) mark(key string, rev int64, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.revs[key] == nil {
		d.revs[key] = map[int64]bool{}
	}
	if on {
		d.revs[key][rev] = true
	} else {
		delete(d.revs[key], rev)
	}
}

func (d *deletes) marked(key string, rev int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.revs[key][rev]
}

// observers returns a factory of observers over inner, sharing deletes.
func observers(clk clock.Clock) func(backends.Store) backends.Store {
	d := &deletes{revs: map[string]map[int64]bool{}}
	return func(inner backends.Store) backends.Store {
		return &observed{inner: inner.(*memstore.Store), deletes: d, clk: clk, seen: map[string]sighting{}}
	}
}

func (o *observed) Capabilities() backends.Capabilities {
	c := o.inner.Capabilities()
	c.Atomic &^= backends.CapTxn
	c.ExpiryEvents, c.ObservedExpiry = false, true
	c.ExpiryJudge = "local observation (test)"
	return c
}

// sight records e, read or written at now, and returns it with the
// remaining time this observer gives it.
func (o *observed) sight(e backends.Entry, now time.Time) backends.Entry {
	if e.TTL <= 0 {
		return e
	}
	beat := now.Add(e.Remaining)
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.seen[e.Key]
	if !ok || s.entry.Revision != e.Revision || !s.beat.Equal(beat) {
		o.seen[e.Key] = sighting{entry: e, beat: beat, at: now}
		e.Remaining = e.TTL
		return e
	}
	e.Remaining = e.TTL - now.Sub(s.at)
	return e
}

// lingering returns the entry of key this observer still holds live
// although the memstore no longer has it, if any.
func (o *observed) lingering(key string, now time.Time) (backends.Entry, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.seen[key]
	if !ok {
		return backends.Entry{}, false
	}
	left := s.entry.TTL - now.Sub(s.at)
	if left <= 0 || o.deletes.marked(key, s.entry.Revision) {
		delete(o.seen, key)
		return backends.Entry{}, false
	}
	e := s.entry
	e.Remaining = left
	return e, true
}

func (o *observed) Get(ctx context.Context, key string) (backends.Entry, error) {
	e, err := o.inner.Get(ctx, key)
	now := o.clk.Now()
	if errors.Is(err, backends.ErrNotFound) {
		if e, ok := o.lingering(key, now); ok {
			return e, nil
		}
	}
	if err != nil {
		return e, err
	}
	return o.sight(e, now), nil
}

func (o *observed) List(ctx context.Context, prefix string) ([]backends.Entry, error) {
	es, err := o.inner.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	now := o.clk.Now()
	have := map[string]bool{}
	for i, e := range es {
		es[i] = o.sight(e, now)
		have[e.Key] = true
	}
	o.mu.Lock()
	var keys []string
	for k := range o.seen {
		if strings.HasPrefix(k, prefix) && !have[k] {
			keys = append(keys, k)
		}
	}
	o.mu.Unlock()
	for _, k := range keys {
		if e, ok := o.lingering(k, now); ok {
			es = append(es, e)
		}
	}
	return es, nil
}

// heldBy is the conflict a create meets on an entry this observer holds live.
func heldBy(op string, e backends.Entry) error {
	return fmt.Errorf("observed: %w", &backends.ConflictError{Op: op, Key: e.Key, Current: e, Found: true})
}

func (o *observed) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	if _, err := o.inner.Get(ctx, key); errors.Is(err, backends.ErrNotFound) {
		if e, ok := o.lingering(key, o.clk.Now()); ok {
			return backends.Entry{}, heldBy("create", e)
		}
	}
	e, err := o.inner.CreateIfAbsent(ctx, key, value, ttl)
	var ce *backends.ConflictError
	if errors.As(err, &ce) && ce.Found {
		ce.Current = o.sight(ce.Current, o.clk.Now())
	}
	if err == nil {
		e = o.sight(e, o.clk.Now())
	}
	return e, err
}

func (o *observed) CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	if rev == 0 {
		return o.CreateIfAbsent(ctx, key, value, ttl)
	}
	e, err := o.inner.CompareAndSet(ctx, key, rev, value, ttl)
	if err == nil {
		e = o.sight(e, o.clk.Now())
	}
	return e, err
}

func (o *observed) CompareAndDelete(ctx context.Context, key string, rev int64) error {
	o.deletes.mark(key, rev, true)
	err := o.inner.CompareAndDelete(ctx, key, rev)
	if err != nil {
		o.deletes.mark(key, rev, false)
		return err
	}
	o.mu.Lock()
	delete(o.seen, key)
	o.mu.Unlock()
	return nil
}

func (o *observed) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	e, err := o.inner.KeepAlive(ctx, key, rev, ttl)
	if err == nil {
		e = o.sight(e, o.clk.Now())
	}
	return e, err
}

// Watch passes on the memstore's events but its expiry deletes: those of
// entries no observer deleted.
func (o *observed) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	in, err := o.inner.Watch(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make(chan backends.Event, 256)
	go func() {
		defer close(out)
		for ev := range in {
			if ev.Kind == backends.EventDelete && !o.deletes.marked(ev.Entry.Key, ev.Entry.Revision) {
				continue // an expiry: this store reports none
			}
			select {
			case out <- ev:
			default:
				return // fallen behind: end the stream, as the store does
			}
		}
	}()
	return out, nil
}

func (o *observed) Close() error { return nil }

// TestObservedExpiryCrashTakeover checks that on a store that judges expiry
// by local observation and reports none in its watch (PostgreSQL), the
// shards of a member that crashed are taken over within a TTL and a third
// of it: the others' stores have seen the crashed member's last keep-alives
// of its shards within TTL/6, so its claims expire for them with its
// membership. Before, they first saw those keep-alives when they started
// campaigning for the shards, after the membership had expired, and waited
// a second TTL from then.
func TestObservedExpiryCrashTakeover(t *testing.T) {
	c := newCluster(t, 8)
	c.wrap = observers(c.clk)
	c.add("a")
	b := c.add("b")
	c.stepUntil("settle", 4*testTTL, func() bool { return c.settled("a", "b") })
	// Ten TTLs at rest: the full reads at start are long past, and every
	// claim has been renewed many times since.
	rest := c.clk.Now()
	c.stepUntil("rest", 11*testTTL, func() bool { return c.clk.Now().Sub(rest) >= 10*testTTL })
	b.Cut()
	took := c.stepUntil("takeover", 4*testTTL, func() bool { return c.settled("a") })
	if limit := testTTL + testTTL/3; took > limit {
		t.Errorf("the crashed member's shards were taken over after %v, want at most %v (TTL %v)", took, limit, testTTL)
	}
	t.Logf("takeover after %v (TTL %v)", took, testTTL)
}
