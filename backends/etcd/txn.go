package etcd

import (
	"bytes"
	"context"
	"fmt"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/check"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Txn implements backends.Txner with one etcd transaction: every condition
// is a compare (Version = 0 for absence, ModRevision otherwise), every
// operation a put or delete of the success branch, and the failure branch
// reads the conditions' keys to report the first that failed. Puts with a
// TTL get a lease each (one Grant per put, before the transaction), or the
// shared lease of their TTL. etcd refuses transactions of more than its
// --max-txn-ops (128 by default) compares or operations; that is an error
// wrapping ErrInvalid.
func (s *Store) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	if err := check.Txn(conds, ops); err != nil {
		return backends.TxnResult{}, fmt.Errorf("etcd: txn: %w", err)
	}
	secs := make([]int64, len(ops))
	for i, op := range ops {
		if op.Kind != backends.OpPut {
			continue
		}
		n, err := ttlSeconds("txn", op.Key, op.TTL)
		if err != nil {
			return backends.TxnResult{}, err
		}
		secs[i] = n
	}
	first := ""
	if len(ops) > 0 {
		first = ops[0].Key
	} else if len(conds) > 0 {
		first = conds[0].Key
	}
	if err := s.checkOpen("txn", first); err != nil {
		return backends.TxnResult{}, err
	}
	for _, op := range ops {
		k := s.prefix + op.Key
		s.beginWrite(k)
		defer s.endWrite(k)
	}
	start := s.clock.Now()

	leases := make([]writeLease, len(ops))
	discard := func() {
		for _, wl := range leases {
			s.discardLease(ctx, wl)
		}
	}
	sharedBySecs := make(map[int64]writeLease) // one keep-alive per shared lease
	for i := range ops {
		if secs[i] == 0 {
			continue
		}
		if wl, ok := sharedBySecs[secs[i]]; ok {
			leases[i] = wl
			continue
		}
		wl, err := s.leaseFor(ctx, secs[i], false)
		if err != nil {
			discard()
			return backends.TxnResult{}, s.fail("txn", ops[i].Key, err)
		}
		leases[i] = wl
		if wl.shared {
			sharedBySecs[secs[i]] = wl
		}
	}

	cmps := make([]clientv3.Cmp, 0, len(conds))
	reads := make([]clientv3.Op, 0, len(conds))
	for _, c := range conds {
		cmps = append(cmps, cmpRevision(s.prefix+c.Key, c.Revision))
		reads = append(reads, clientv3.OpGet(s.prefix+c.Key))
	}
	writes := make([]clientv3.Op, 0, len(ops))
	for i, op := range ops {
		k := s.prefix + op.Key
		if op.Kind == backends.OpDelete {
			writes = append(writes, clientv3.OpDelete(k, clientv3.WithPrevKV()))
			continue
		}
		opts := []clientv3.OpOption{clientv3.WithPrevKV()}
		if leases[i].id != clientv3.NoLease {
			opts = append(opts, clientv3.WithLease(leases[i].id))
		}
		writes = append(writes, clientv3.OpPut(k, string(op.Value), opts...))
	}
	resp, err := s.cli.Txn(opctx(ctx)).If(cmps...).Then(writes...).Else(reads...).Commit()
	if err != nil {
		if unknownOutcome(err) {
			for i, op := range ops {
				if op.Kind == backends.OpPut {
					s.writeUnknown(s.prefix+op.Key, leases[i])
				} else {
					s.unsure(s.prefix + op.Key)
				}
			}
		} else {
			discard()
		}
		return backends.TxnResult{}, s.fail("txn", first, err)
	}
	if !resp.Succeeded {
		discard()
		return backends.TxnResult{}, fmt.Errorf("etcd: %w", s.txnConflict(ctx, conds, resp.Responses))
	}

	res := backends.TxnResult{Entries: make([]backends.Entry, len(ops))}
	for i, op := range ops {
		k := s.prefix + op.Key
		r := resp.Responses[i]
		if op.Kind == backends.OpDelete {
			e := backends.Entry{Key: op.Key}
			if prevs := r.GetResponseDeleteRange().GetPrevKvs(); len(prevs) > 0 {
				e = s.entry(prevs[0])
			}
			s.deleted(k)
			res.Entries[i] = e
			continue
		}
		e := backends.Entry{
			Key:            op.Key,
			Value:          bytes.Clone(op.Value),
			Revision:       resp.Header.Revision,
			CreateRevision: resp.Header.Revision,
			TTL:            leases[i].granted,
			Remaining:      leases[i].granted,
		}
		if prev := r.GetResponsePut().GetPrevKv(); prev != nil {
			e.CreateRevision = prev.CreateRevision
		}
		s.wrote(k, e, leases[i], start, true)
		res.Entries[i] = e
	}
	return res, nil
}

// txnConflict builds the error of a failed transaction from the reads of its
// failure branch: the first condition that does not hold.
func (s *Store) txnConflict(ctx context.Context, conds []backends.Cond, reads []*pb.ResponseOp) error {
	for i, c := range conds {
		var kv *mvccpb.KeyValue
		if kvs := reads[i].GetResponseRange().GetKvs(); len(kvs) > 0 {
			kv = kvs[0]
		}
		var holds bool
		if c.Revision == 0 {
			holds = kv == nil
		} else {
			holds = kv != nil && kv.ModRevision == c.Revision
		}
		if holds {
			continue
		}
		ce := &backends.ConflictError{Op: "txn", Key: c.Key, Expected: c.Revision}
		if kv != nil {
			ce.Current, ce.Found = s.current(kv), true
		}
		return ce
	}
	// The reads run in the same transaction as the compares, so one of the
	// conditions must have failed; this is unreachable short of an etcd bug.
	return fmt.Errorf("txn: etcd refused the conditions but they read back as holding: %w", backends.ErrConflict)
}
