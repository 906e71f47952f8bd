package faults_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
)

// mapStore is a minimal store for testing the wrapper without depending on
// a real backend: one mutex, one counter, TTLs on an injected clock.
type mapStore struct {
	clk  clock.Clock
	caps backends.Capabilities

	mu      sync.Mutex
	rev     int64               // mu
	entries map[string]mapEntry // mu
}

type mapEntry struct {
	e      backends.Entry
	expiry time.Time
}

func newMapStore(clk clock.Clock) *mapStore {
	return &mapStore{
		clk:     clk,
		caps:    backends.Capabilities{Atomic: backends.CapClaims | backends.CapCompareAndSet, Scope: backends.ScopeProcess},
		entries: make(map[string]mapEntry),
	}
}

// live returns key's entry if present and not expired; mu held.
func (m *mapStore) live(key string) (backends.Entry, bool) {
	me, ok := m.entries[key]
	if !ok {
		return backends.Entry{}, false
	}
	if me.e.TTL > 0 {
		left := me.expiry.Sub(m.clk.Now())
		if left <= 0 {
			delete(m.entries, key)
			return backends.Entry{}, false
		}
		me.e.Remaining = left
	}
	me.e.Value = slices.Clone(me.e.Value)
	return me.e, true
}

func (m *mapStore) put(key string, create int64, value []byte, ttl time.Duration) backends.Entry {
	m.rev++
	if create == 0 {
		create = m.rev
	}
	e := backends.Entry{Key: key, Value: slices.Clone(value), Revision: m.rev, CreateRevision: create, TTL: ttl, Remaining: ttl}
	m.entries[key] = mapEntry{e: e, expiry: m.clk.Now().Add(ttl)}
	return e
}

func (m *mapStore) Capabilities() backends.Capabilities { return m.caps }

func (m *mapStore) Get(_ context.Context, key string) (backends.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.live(key); ok {
		return e, nil
	}
	return backends.Entry{}, fmt.Errorf("map: get %q: %w", key, backends.ErrNotFound)
}

func (m *mapStore) List(_ context.Context, prefix string) ([]backends.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []backends.Entry
	for k := range m.entries {
		if e, ok := m.live(k); ok && strings.HasPrefix(k, prefix) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b backends.Entry) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

func (m *mapStore) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	return m.CompareAndSet(ctx, key, 0, value, ttl)
}

func (m *mapStore) CompareAndSet(_ context.Context, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.live(key)
	if (rev == 0 && ok) || (rev != 0 && (!ok || cur.Revision != rev)) {
		op := "cas"
		if rev == 0 {
			op = "create"
		}
		return backends.Entry{}, &backends.ConflictError{Op: op, Key: key, Expected: rev, Found: ok, Current: cur}
	}
	return m.put(key, cur.CreateRevision, value, ttl), nil
}

func (m *mapStore) CompareAndDelete(_ context.Context, key string, rev int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.live(key)
	if !ok || cur.Revision != rev {
		return &backends.ConflictError{Op: "delete", Key: key, Expected: rev, Found: ok, Current: cur}
	}
	delete(m.entries, key)
	return nil
}

func (m *mapStore) KeepAlive(_ context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.live(key)
	if !ok || cur.Revision != rev {
		return backends.Entry{}, &backends.ConflictError{Op: "keepalive", Key: key, Expected: rev, Found: ok, Current: cur}
	}
	cur.TTL, cur.Remaining = ttl, ttl
	m.entries[key] = mapEntry{e: cur, expiry: m.clk.Now().Add(ttl)}
	return cur, nil
}

func (m *mapStore) Close() error { return nil }

// watchStore adds a Watch that sends one event and closes when ctx ends.
type watchStore struct{ *mapStore }

func (w watchStore) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	ch := make(chan backends.Event, 1)
	ch <- backends.Event{Kind: backends.EventPut, Entry: backends.Entry{Key: prefix}}
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch, nil
}

// txnStore adds a Txn that applies puts without checking conditions.
type txnStore struct{ *mapStore }

func (t txnStore) Txn(ctx context.Context, _ []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	var res backends.TxnResult
	for _, op := range ops {
		t.mu.Lock()
		res.Entries = append(res.Entries, t.put(op.Key, 0, op.Value, op.TTL))
		t.mu.Unlock()
	}
	return res, nil
}

// fullStore has both.
type fullStore struct{ *mapStore }

func newFull(clk clock.Clock, caps backends.Capability) fullStore {
	m := newMapStore(clk)
	m.caps.Atomic |= caps
	return fullStore{m}
}

func (f fullStore) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	return watchStore{f.mapStore}.Watch(ctx, prefix)
}

func (f fullStore) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	return txnStore{f.mapStore}.Txn(ctx, conds, ops)
}
