package faults

import (
	"context"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// Hide returns a store that passes every call to inner and declares every
// capability inner declares, but whose method set lacks Watch where hide
// includes CapWatch and Txn where it includes CapTxn. It is the shape of a
// careless wrapper (a struct embedding backends.Store): it still claims what
// it no longer passes through, and backends.Require must refuse it.
// Capabilities other than CapWatch and CapTxn in hide are ignored: they have
// no method to lose.
func Hide(inner backends.Store, hide backends.Capability) backends.Store {
	h := hidden{inner: inner}
	w, canWatch := inner.(backends.Watcher)
	t, canTxn := inner.(backends.Txner)
	canWatch = canWatch && hide&backends.CapWatch == 0
	canTxn = canTxn && hide&backends.CapTxn == 0
	switch {
	case canWatch && canTxn:
		return hiddenWatchTxn{hidden: h, w: w, t: t}
	case canWatch:
		return hiddenWatch{hidden: h, w: w}
	case canTxn:
		return hiddenTxn{hidden: h, t: t}
	}
	return h
}

// hidden has only the methods of backends.Store.
type hidden struct{ inner backends.Store }

func (h hidden) Capabilities() backends.Capabilities { return h.inner.Capabilities() }
func (h hidden) Get(ctx context.Context, key string) (backends.Entry, error) {
	return h.inner.Get(ctx, key)
}
func (h hidden) List(ctx context.Context, prefix string) ([]backends.Entry, error) {
	return h.inner.List(ctx, prefix)
}
func (h hidden) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	return h.inner.CreateIfAbsent(ctx, key, value, ttl)
}
func (h hidden) CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	return h.inner.CompareAndSet(ctx, key, rev, value, ttl)
}
func (h hidden) CompareAndDelete(ctx context.Context, key string, rev int64) error {
	return h.inner.CompareAndDelete(ctx, key, rev)
}
func (h hidden) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	return h.inner.KeepAlive(ctx, key, rev, ttl)
}
func (h hidden) Close() error { return h.inner.Close() }

type hiddenWatch struct {
	hidden
	w backends.Watcher
}

func (h hiddenWatch) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	return h.w.Watch(ctx, prefix)
}

type hiddenTxn struct {
	hidden
	t backends.Txner
}

func (h hiddenTxn) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	return h.t.Txn(ctx, conds, ops)
}

type hiddenWatchTxn struct {
	hidden
	w backends.Watcher
	t backends.Txner
}

func (h hiddenWatchTxn) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	return h.w.Watch(ctx, prefix)
}

func (h hiddenWatchTxn) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	return h.t.Txn(ctx, conds, ops)
}
