package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/tests/chaos/journal"
)

// recorder is a Store that journals every operation on the claim's keys
// and passes it on unchanged. It declares what the store under it
// declares, and watches and runs transactions through it, so the Locker
// over it behaves exactly as over the store itself.
type recorder struct {
	backends.Store
	j      *journal.Journal
	worker string
	pid    int
	key    string // the claim key: ops on it and on its slot keys are journaled
	seq    atomic.Int64
}

var (
	_ backends.Watcher = (*recorder)(nil)
	_ backends.Txner   = (*recorder)(nil)
)

func (r *recorder) watched(key string) bool {
	return key == r.key || strings.HasPrefix(key, r.key+"/slot-")
}

func (r *recorder) call(o journal.OpRec) journal.OpRec {
	o.Seq = r.seq.Add(1)
	r.j.Write(journal.Record{Ev: journal.EvOp, Worker: r.worker, PID: r.pid, Op: &o})
	return o
}

func (r *recorder) ret(o journal.OpRec, e backends.Entry, err error) {
	o.Ret = true
	o.Value = ""
	var ce *backends.ConflictError
	switch {
	case err == nil:
		o.OK, o.OutRev, o.OutCreate, o.OutValue = true, e.Revision, e.CreateRevision, string(e.Value)
	case errors.As(err, &ce):
		c := ce.Current
		o.Found, o.OutRev, o.OutCreate, o.OutValue = ce.Found, c.Revision, c.CreateRevision, string(c.Value)
	case o.Kind == "get" && errors.Is(err, backends.ErrNotFound):
	case errors.Is(err, backends.ErrNotFound):
		// A conditional write refused for an absent key without a
		// ConflictError: the key was absent.
	default:
		o.Unknown = true
	}
	r.j.Write(journal.Record{Ev: journal.EvOp, Worker: r.worker, PID: r.pid, Op: &o})
}

func (r *recorder) Get(ctx context.Context, key string) (backends.Entry, error) {
	if !r.watched(key) {
		return r.Store.Get(ctx, key)
	}
	o := r.call(journal.OpRec{Kind: "get", Key: key})
	e, err := r.Store.Get(ctx, key)
	r.ret(o, e, err)
	return e, err
}

func (r *recorder) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	if !r.watched(key) {
		return r.Store.CreateIfAbsent(ctx, key, value, ttl)
	}
	o := r.call(journal.OpRec{Kind: "create", Key: key, TTL: int64(ttl), Value: string(value)})
	e, err := r.Store.CreateIfAbsent(ctx, key, value, ttl)
	r.ret(o, e, err)
	return e, err
}

func (r *recorder) CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	if !r.watched(key) {
		return r.Store.CompareAndSet(ctx, key, rev, value, ttl)
	}
	o := r.call(journal.OpRec{Kind: "cas", Key: key, Rev: rev, TTL: int64(ttl), Value: string(value)})
	e, err := r.Store.CompareAndSet(ctx, key, rev, value, ttl)
	r.ret(o, e, err)
	return e, err
}

func (r *recorder) CompareAndDelete(ctx context.Context, key string, rev int64) error {
	if !r.watched(key) {
		return r.Store.CompareAndDelete(ctx, key, rev)
	}
	o := r.call(journal.OpRec{Kind: "delete", Key: key, Rev: rev})
	err := r.Store.CompareAndDelete(ctx, key, rev)
	r.ret(o, backends.Entry{}, err)
	return err
}

func (r *recorder) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	if !r.watched(key) {
		return r.Store.KeepAlive(ctx, key, rev, ttl)
	}
	o := r.call(journal.OpRec{Kind: "keepalive", Key: key, Rev: rev, TTL: int64(ttl)})
	e, err := r.Store.KeepAlive(ctx, key, rev, ttl)
	r.ret(o, e, err)
	return e, err
}

func (r *recorder) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	w, ok := r.Store.(backends.Watcher)
	if !ok {
		return nil, fmt.Errorf("chaos: watch: %w", backends.ErrUnsupported)
	}
	return w.Watch(ctx, prefix)
}

// Txn passes the transaction on. A single claim's create
// (backends.StoreLocker.TryAcquire on a store with transactions: one put
// of a claim key conditioned on its absence, and on the absence of keys
// that are not journaled, its slot group's size entry) is journaled as the
// create it is. Any other transaction that writes a claim key is journaled
// as "txn" only, without its effect: the linearizability check leaves such
// a key out (see package check).
func (r *recorder) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	t, ok := r.Store.(backends.Txner)
	if !ok {
		return backends.TxnResult{}, fmt.Errorf("chaos: txn: %w", backends.ErrUnsupported)
	}
	if key, ok := r.claimCreate(conds, ops); ok {
		o := r.call(journal.OpRec{Kind: "create", Key: key, TTL: int64(ops[0].TTL), Value: string(ops[0].Value)})
		res, err := t.Txn(ctx, conds, ops)
		var ce *backends.ConflictError
		switch {
		case err == nil && len(res.Entries) == 1:
			r.ret(o, res.Entries[0], nil)
		case errors.As(err, &ce) && ce.Key != key:
			// Refused on another key's condition: the claim key was not
			// written, and this call read nothing of it. Journaled as an
			// outcome unknown, which the check may take as not applied.
			r.ret(o, backends.Entry{}, fmt.Errorf("chaos: txn refused on %q", ce.Key))
		default:
			r.ret(o, backends.Entry{}, err)
		}
		return res, err
	}
	for _, op := range ops {
		if r.watched(op.Key) {
			r.call(journal.OpRec{Kind: "txn", Key: op.Key})
		}
	}
	return t.Txn(ctx, conds, ops)
}

// claimCreate reports whether conds and ops are a single claim's create of
// a journaled key, and which.
func (r *recorder) claimCreate(conds []backends.Cond, ops []backends.Op) (string, bool) {
	if len(ops) != 1 || ops[0].Kind != backends.OpPut || !r.watched(ops[0].Key) {
		return "", false
	}
	key, absent := ops[0].Key, false
	for _, c := range conds {
		switch {
		case c.Key == key && c.Revision == 0:
			absent = true
		case r.watched(c.Key) || c.Revision != 0:
			return "", false
		}
	}
	return key, absent
}
