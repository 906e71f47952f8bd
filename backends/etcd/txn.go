package etcd

import (
	"bytes"
	"context"
	"fmt"
	"time"

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
// TTL get a lease each, or the shared lease of their TTL. etcd refuses
// transactions of more than its --max-txn-ops (128 by default) compares or
// operations; that is an error wrapping ErrInvalid.
//
// A refused Txn (what most attempts on a held claim are) costs one request
// and takes no lease, except right after a watch of this store saw the key
// of every put with a TTL deleted, when the attempt most likely wins and
// goes out at once. docs/stores/etcd.md gives what each case costs.
func (s *Store) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	if err := check.Txn(conds, ops); err != nil {
		return backends.TxnResult{}, fmt.Errorf("etcd: txn: %w", err)
	}
	secs, err := txnSeconds(ops)
	if err != nil {
		return backends.TxnResult{}, err
	}
	first := txnFirstKey(conds, ops)
	if err := s.checkOpen("txn", first); err != nil {
		return backends.TxnResult{}, err
	}
	for _, op := range ops {
		k := s.prefix + op.Key
		s.book.beginWrite(k)
		defer s.book.endWrite(k)
	}
	start := s.clock.Now()

	cmps, reads := s.txnCompares(conds)
	if len(cmps) > 0 && s.needsLeaseRequest(secs) && !s.allFreed(ops, secs) {
		if err := s.precheckTxn(ctx, conds, cmps, reads, first); err != nil {
			return backends.TxnResult{}, err
		}
	}

	// Whatever the outcome, a key this transaction wrote or found held is
	// no longer known free: the next create of it checks first.
	defer s.unfree(ops, secs)

	resp, leases, err := s.commitTxn(ctx, ops, secs, cmps, reads, first)
	if err != nil {
		return backends.TxnResult{}, err
	}
	if !resp.Succeeded {
		s.discardLeases(ctx, leases)
		return backends.TxnResult{}, fmt.Errorf("etcd: %w", s.txnConflict(ctx, conds, resp.Responses))
	}
	if err := s.confirmTxn(ctx, ops, leases); err != nil {
		return backends.TxnResult{}, s.fail("txn", first, err)
	}
	return s.txnWritten(resp, ops, leases, start), nil
}

// txnSeconds is the TTL of each put of ops in whole seconds (0 for a
// delete or a put without TTL).
func txnSeconds(ops []backends.Op) ([]int64, error) {
	secs := make([]int64, len(ops))
	for i, op := range ops {
		if op.Kind != backends.OpPut {
			continue
		}
		n, err := ttlSeconds("txn", op.Key, op.TTL)
		if err != nil {
			return nil, err
		}
		secs[i] = n
	}
	return secs, nil
}

// txnFirstKey is the key a transaction's errors name: its first
// operation's, or without operations its first condition's.
func txnFirstKey(conds []backends.Cond, ops []backends.Op) string {
	switch {
	case len(ops) > 0:
		return ops[0].Key
	case len(conds) > 0:
		return conds[0].Key
	}
	return ""
}

// txnCompares is the compare of each condition, and the read of its key
// that the failure branch makes.
func (s *Store) txnCompares(conds []backends.Cond) (cmps []clientv3.Cmp, reads []clientv3.Op) {
	cmps = make([]clientv3.Cmp, 0, len(conds))
	reads = make([]clientv3.Op, 0, len(conds))
	for _, c := range conds {
		cmps = append(cmps, cmpRevision(s.prefix+c.Key, c.Revision))
		reads = append(reads, clientv3.OpGet(s.prefix+c.Key))
	}
	return cmps, reads
}

// precheckTxn checks the conditions alone, with a transaction that writes
// nothing. It only spares a refused attempt its lease; the transaction that
// writes decides.
func (s *Store) precheckTxn(ctx context.Context, conds []backends.Cond, cmps []clientv3.Cmp, reads []clientv3.Op, first string) error {
	resp, err := s.cli.Txn(opctx(ctx)).If(cmps...).Else(reads...).Commit()
	if err != nil {
		return s.fail("txn", first, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcd: %w", s.txnConflict(ctx, conds, resp.Responses))
	}
	return nil
}

// commitTxn gets the leases of the puts and sends the transaction that
// writes, again with new leases if a shared one expired since its last
// keep-alive. On an error it has already dealt with the leases: marked
// every write unknown if the outcome is, revoked the per-entry leases if
// nothing was written. A refused transaction is no error; the caller
// discards its leases.
func (s *Store) commitTxn(ctx context.Context, ops []backends.Op, secs []int64, cmps []clientv3.Cmp, reads []clientv3.Op, first string) (*clientv3.TxnResponse, []writeLease, error) {
	for {
		leases, err := s.txnLeases(ctx, ops, secs)
		if err != nil {
			return nil, nil, err // txnLeases revoked what it granted
		}
		resp, err := s.cli.Txn(opctx(ctx)).If(cmps...).Then(s.txnWrites(ops, leases)...).Else(reads...).Commit()
		if err != nil && isLeaseNotFound(err) && s.staleShared(leases) {
			// A shared lease expired since its last keep-alive: etcd
			// refused the puts, and wrote nothing. Grant a new one.
			continue
		}
		if err != nil {
			if unknownOutcome(err) {
				s.txnUnknown(ops, leases)
			} else {
				s.discardLeases(ctx, leases)
			}
			return nil, nil, s.fail("txn", first, err)
		}
		return resp, leases, nil
	}
}

// txnWrites is the success branch of a transaction: each operation of ops,
// a put on its lease (leases[i]) or a delete, returning what it replaced.
func (s *Store) txnWrites(ops []backends.Op, leases []writeLease) []clientv3.Op {
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
	return writes
}

// txnUnknown records that every write of ops may or may not have happened.
func (s *Store) txnUnknown(ops []backends.Op, leases []writeLease) {
	for i, op := range ops {
		if op.Kind == backends.OpPut {
			s.book.writeUnknown(s.prefix+op.Key, leases[i])
		} else {
			s.book.unsure(s.prefix + op.Key)
		}
	}
}

// discardLeases revokes the per-entry leases of a transaction that
// certainly wrote nothing (discardLease).
func (s *Store) discardLeases(ctx context.Context, leases []writeLease) {
	for _, wl := range leases {
		s.discardLease(ctx, wl)
	}
}

// txnWritten records the writes of a transaction that succeeded, begun at
// start, and returns its result: for a put the entry it made, for a delete
// the entry it deleted (only its key if there was none).
func (s *Store) txnWritten(resp *clientv3.TxnResponse, ops []backends.Op, leases []writeLease, start time.Time) backends.TxnResult {
	res := backends.TxnResult{Entries: make([]backends.Entry, len(ops))}
	for i, op := range ops {
		k := s.prefix + op.Key
		r := resp.Responses[i]
		if op.Kind == backends.OpDelete {
			e := backends.Entry{Key: op.Key}
			if prevs := r.GetResponseDeleteRange().GetPrevKvs(); len(prevs) > 0 {
				e = s.entry(prevs[0])
			}
			s.book.deleted(k)
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
		s.book.wrote(k, e, leases[i], start, true)
		res.Entries[i] = e
	}
	return res
}

// needsLeaseRequest reports whether a transaction whose puts have TTLs of
// secs seconds (0: none) needs a lease request before it: a grant per put
// with a lease per entry, or, with a shared lease, a TTL whose lease the
// store did not keep alive less than half a TTL ago (leaseReady).
func (s *Store) needsLeaseRequest(secs []int64) bool {
	for _, n := range secs {
		if n > 0 && !s.leaseReady(n) {
			return true
		}
	}
	return false
}

// allFreed reports whether a watch of this store last saw deleted the key
// of every put with a TTL (secs[i] > 0) of ops (Store.freed): a follower
// woken by a release or an expiry. Such a transaction most likely wins, and
// sends its lease request without checking its conditions first; refused,
// it costs a lease for nothing (and a revoke of a per-entry lease) once.
func (s *Store) allFreed(ops []backends.Op, secs []int64) bool {
	s.freedMu.Lock()
	defer s.freedMu.Unlock()
	for i, op := range ops {
		if secs[i] == 0 {
			continue
		}
		if _, ok := s.freed[s.prefix+op.Key]; !ok {
			return false
		}
	}
	return true
}

// unfree forgets the keys of the puts with a TTL of ops (Store.freed).
func (s *Store) unfree(ops []backends.Op, secs []int64) {
	s.freedMu.Lock()
	defer s.freedMu.Unlock()
	for i, op := range ops {
		if secs[i] > 0 {
			delete(s.freed, s.prefix+op.Key)
		}
	}
}

// txnLeases returns the lease of each put of ops with a TTL (secs[i]
// seconds): a grant each, or the shared lease of its TTL, which a ready
// lease needs no request for (leaseFor with later: the transaction keeps
// it alive after it succeeds, confirmTxn). Other ops get none.
func (s *Store) txnLeases(ctx context.Context, ops []backends.Op, secs []int64) ([]writeLease, error) {
	leases := make([]writeLease, len(ops))
	sharedBySecs := make(map[int64]writeLease) // one request per shared lease
	for i := range ops {
		if secs[i] == 0 {
			continue
		}
		if wl, ok := sharedBySecs[secs[i]]; ok {
			leases[i] = wl
			continue
		}
		wl, err := s.leaseFor(ctx, secs[i], true)
		if err != nil {
			for _, wl := range leases {
				s.discardLease(ctx, wl)
			}
			return nil, s.fail("txn", ops[i].Key, err)
		}
		leases[i] = wl
		if wl.shared {
			sharedBySecs[secs[i]] = wl
		}
	}
	return leases, nil
}

// staleShared reports whether leases hold a shared lease the store did not
// keep alive for this write (not fresh), and forgets every such lease: a
// transaction etcd refused because a lease was not found was refused for
// one of those, since a fresh lease was granted or kept alive after the
// call began.
func (s *Store) staleShared(leases []writeLease) bool {
	stale := false
	for _, wl := range leases {
		if wl.shared && !wl.fresh {
			s.book.leaseGone(wl.id)
			stale = true
		}
	}
	return stale
}

// confirmTxn keeps alive, once each, the shared leases a successful
// transaction put entries on without keeping them alive after the call
// began (confirmShared), and gives each such put the TTL the keep-alive
// granted. If one fails, every entry on that lease is left as a write with
// an unknown outcome (the garbage collector deletes what the lease's
// expiry does not), and so is every other entry on a lease not yet
// confirmed; the error is the keep-alive's.
func (s *Store) confirmTxn(ctx context.Context, ops []backends.Op, leases []writeLease) error {
	confirmed := make(map[clientv3.LeaseID]time.Duration)
	for i, op := range ops {
		wl := &leases[i]
		if !wl.shared || wl.fresh {
			continue
		}
		if granted, ok := confirmed[wl.id]; ok {
			wl.granted = granted
			continue
		}
		if err := s.confirmShared(ctx, s.prefix+op.Key, wl); err != nil {
			for j, op := range ops {
				if j != i && leases[j].shared && op.Kind == backends.OpPut {
					s.book.writeUnknown(s.prefix+op.Key, leases[j])
				}
			}
			return err
		}
		confirmed[wl.id] = wl.granted
	}
	return nil
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
