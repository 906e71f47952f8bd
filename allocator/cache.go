package allocator

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// Retry delays of the watch after the store refused it: from minRewatch,
// doubling up to maxRewatch, each spread by up to rewatchJitter either way.
const (
	minRewatch    = 50 * time.Millisecond
	maxRewatch    = 5 * time.Second
	rewatchJitter = 0.15
)

// jittered spreads d by up to rewatchJitter either way, so that allocators
// refused at once do not retry in step.
func jittered(d time.Duration) time.Duration {
	return d + time.Duration((2*mrand.Float64()-1)*rewatchJitter*float64(d))
}

func (a *Allocator) cachedIndex(key string) (cached, bool) {
	a.cmu.RLock()
	defer a.cmu.RUnlock()
	c, ok := a.keys[key]
	return c, ok
}

// noteIndex records the revision of an index write this allocator made, so
// that its next compare names it. It only refreshes a mapping the watch
// already delivered: mappings enter and leave the cache (and OnChange) only
// through the watch.
func (a *Allocator) noteIndex(key string, e backends.Entry) {
	n, ready, err := decodeIndex(e.Value)
	if err != nil {
		return
	}
	a.cmu.Lock()
	defer a.cmu.Unlock()
	if c, ok := a.keys[key]; ok && c.id == n && c.ready == ready && c.rev < e.Revision {
		c.rev = e.Revision
		a.keys[key] = c
	}
}

// watchLoop keeps the cache equal to the index: it watches the index
// prefix, lists it, and applies the events that follow; when the stream
// ends it does it again. It returns when the allocator closes or the store
// is closed.
func (a *Allocator) watchLoop() {
	defer a.wg.Done()
	ctx := a.bg
	prefix := a.cfg.Prefix + keyDir
	delay := minRewatch
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		ch, err := a.watcher.Watch(wctx, prefix)
		var list []backends.Entry
		if err == nil {
			list, err = a.store.List(wctx, prefix)
		}
		if err != nil {
			cancel()
			if errors.Is(err, backends.ErrClosed) || ctx.Err() != nil {
				return
			}
			a.cfg.Logger.Warn("allocator: watch failed; retrying", "err", err, "delay", delay)
			t := a.cfg.Clock.Timer(jittered(delay))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			delay = min(2*delay, maxRewatch)
			continue
		}
		delay = minRewatch
		a.replace(prefix, list)
		for ev := range ch {
			a.apply(prefix, ev)
		}
		cancel()
	}
}

// replace makes the cache equal to a fresh listing, reporting differences.
func (a *Allocator) replace(prefix string, list []backends.Entry) {
	seen := make(map[string]bool, len(list))
	var evs []Event
	a.cmu.Lock()
	for _, e := range list {
		key := strings.TrimPrefix(e.Key, prefix)
		seen[key] = true
		evs = a.putLocked(key, e, evs)
	}
	for key, c := range a.keys {
		if !seen[key] {
			evs = a.deleteLocked(key, c.rev, evs)
		}
	}
	a.cmu.Unlock()
	a.report(evs)
}

func (a *Allocator) apply(prefix string, ev backends.Event) {
	key := strings.TrimPrefix(ev.Entry.Key, prefix)
	var evs []Event
	a.cmu.Lock()
	switch ev.Kind {
	case backends.EventPut:
		evs = a.putLocked(key, ev.Entry, nil)
	case backends.EventDelete:
		evs = a.deleteLocked(key, ev.Entry.Revision, nil)
	}
	a.cmu.Unlock()
	a.report(evs)
}

// putLocked applies an index entry unless the cache holds a newer one.
func (a *Allocator) putLocked(key string, e backends.Entry, evs []Event) []Event {
	n, ready, err := decodeIndex(e.Value)
	if err != nil {
		a.cfg.Logger.Error("allocator: corrupt index entry ignored", "key", key, "rev", e.Revision, "err", err)
		return evs
	}
	old, had := a.keys[key]
	if had && old.rev >= e.Revision {
		return evs
	}
	if had && old.ready && (old.id != n || !ready) {
		evs = append(evs, Event{Kind: EventDeleted, ID: old.id, Key: key})
	}
	if had && old.id != n && a.ids[old.id] == key {
		delete(a.ids, old.id)
	}
	a.keys[key] = cached{id: n, ready: ready, rev: e.Revision}
	a.ids[n] = key
	if ready && (!had || !old.ready || old.id != n) {
		evs = append(evs, Event{Kind: EventCreated, ID: n, Key: key})
	}
	return evs
}

// deleteLocked removes key unless the cache holds a revision newer than rev.
func (a *Allocator) deleteLocked(key string, rev int64, evs []Event) []Event {
	old, had := a.keys[key]
	if !had || old.rev > rev {
		return evs
	}
	delete(a.keys, key)
	if a.ids[old.id] == key {
		delete(a.ids, old.id)
	}
	if old.ready {
		evs = append(evs, Event{Kind: EventDeleted, ID: old.id, Key: key})
	}
	return evs
}

func (a *Allocator) report(evs []Event) {
	if a.cfg.OnChange == nil {
		return
	}
	for _, ev := range evs {
		a.cfg.OnChange(ev)
	}
}

// renewLoop keeps this member's references alive, and re-establishes one
// that lapsed while its key still maps to the same ID.
func (a *Allocator) renewLoop() {
	defer a.wg.Done()
	t := a.cfg.Clock.Ticker(a.cfg.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-a.bg.Done():
			return
		case <-t.C:
			a.renew(a.bg)
		}
	}
}

// renew runs one round of keep-alives.
func (a *Allocator) renew(ctx context.Context) {
	type item struct {
		key string
		u   *use
		ref backends.Entry
	}
	var items []item
	a.mu.Lock()
	for k, u := range a.local {
		if u.count > 0 {
			items = append(items, item{k, u, u.ref})
		}
	}
	a.mu.Unlock()
	for _, it := range items {
		if ctx.Err() != nil {
			return
		}
		_, err := a.store.KeepAlive(ctx, it.ref.Key, it.ref.Revision, a.cfg.TTL)
		if err == nil || backends.Classify(err) != backends.ClassLost {
			if err != nil {
				a.cfg.Logger.Warn("allocator: renew reference", "key", it.key, "err", err)
			}
			continue
		}
		a.restore(ctx, it.key, it.ref)
	}
}

// restore re-establishes a lapsed reference. If the key maps to another ID
// by now, the local uses are dropped: they name an ID the key no longer has.
func (a *Allocator) restore(ctx context.Context, key string, lapsed backends.Entry) {
	u, err := a.lock(ctx, key)
	if err != nil {
		return
	}
	defer a.unlock(key, u)
	a.mu.Lock()
	if u.count == 0 || u.ref.Revision != lapsed.Revision {
		a.mu.Unlock()
		return // released or restored meanwhile
	}
	id := u.id
	a.mu.Unlock()
	_, _, ref, err := a.acquire(ctx, key, id, backends.Entry{})
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err == nil:
		u.ref = ref
	case errors.Is(err, errLost):
		a.cfg.Logger.Error("allocator: reference lapsed and key maps to another id; local uses dropped", "key", key, "id", id)
		u.count = 0
	default:
		a.cfg.Logger.Warn("allocator: restore reference", "key", key, "id", id, "err", err)
	}
}
