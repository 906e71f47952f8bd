package shards_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// ownWrites is one member's view of the store, which checks the rule of use
// the etcd store's renewals rely on: an entry a Store wrote with a TTL is
// changed afterwards only by that Store's own writes (and by expiry). Every
// CompareAndSet, CompareAndDelete and KeepAlive a member sends must name a
// revision its own store created; the test fails otherwise. Every member
// instance of the fake-clock tests runs on one, so each of their scenarios
// checks the rule.
type ownWrites struct {
	backends.Store
	t testing.TB

	mu      sync.Mutex
	created map[string]map[int64]bool // revisions this store wrote, by key; guarded by mu
}

func newOwnWrites(t testing.TB, inner backends.Store) *ownWrites {
	return &ownWrites{Store: inner, t: t, created: map[string]map[int64]bool{}}
}

func (w *ownWrites) wrote(key string, rev int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.created[key] == nil {
		w.created[key] = map[int64]bool{}
	}
	w.created[key][rev] = true
}

// check fails the test if rev of key was not written by this store.
func (w *ownWrites) check(op, key string, rev int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.created[key][rev] {
		w.t.Errorf("%s of %q at revision %d, which this member's store did not write", op, key, rev)
	}
}

func (w *ownWrites) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	e, err := w.Store.CreateIfAbsent(ctx, key, value, ttl)
	if err == nil {
		w.wrote(key, e.Revision)
	}
	return e, err
}

func (w *ownWrites) CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	w.check("CompareAndSet", key, rev)
	e, err := w.Store.CompareAndSet(ctx, key, rev, value, ttl)
	if err == nil {
		w.wrote(key, e.Revision)
	}
	return e, err
}

func (w *ownWrites) CompareAndDelete(ctx context.Context, key string, rev int64) error {
	w.check("CompareAndDelete", key, rev)
	return w.Store.CompareAndDelete(ctx, key, rev)
}

func (w *ownWrites) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	w.check("KeepAlive", key, rev)
	e, err := w.Store.KeepAlive(ctx, key, rev, ttl)
	if err == nil {
		w.wrote(key, e.Revision)
	}
	return e, err
}

func (w *ownWrites) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	return w.Store.(backends.Watcher).Watch(ctx, prefix)
}
