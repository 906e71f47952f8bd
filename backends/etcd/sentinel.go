package etcd

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// sentinelRetry is how long the sentinel waits before watching again after
// its watch ended for another reason than Close.
const sentinelRetry = time.Second

// The sentinel is the store's own watch of its prefix. It exists so that a
// KeepAlive of an entry the store wrote can be one keep-alive and nothing
// else (see vouchedLocked): within the contract only the writing store and
// its lease's expiry change such an entry, and the sentinel catches the
// out-of-contract rest, a change made by anyone else, and withdraws the
// store's word for the entry, so that its next KeepAlive verifies by a
// read and reports it lost.
//
// It starts with the first KeepAlive that could use the store's word, from
// the lowest revision the store vouches for, so the events it replays
// cover every entry registered so far; an entry registered later at a
// revision below the watch's start is never vouched for. It costs one
// request (the watch's creation) and the events under the prefix.

// startSentinelLocked starts the sentinel if it is not running and the
// store is open. The caller holds the book's mutex.
func (s *Store) startSentinelLocked() {
	if from := s.book.sentinelFromLocked(); from != 0 {
		s.wg.Add(1)
		go s.sentinel(from)
	}
}

// sentinel watches the store's prefix from revision from until Close. When
// its watch ends otherwise, it watches again from the revision after the
// last it saw, so no event is skipped; if etcd compacted those revisions,
// every entry loses the store's word (distrustAll).
//
// The watch requires a leader: a member cut off from its cluster ends it
// (after a few election timeouts without a leader) instead of leaving it
// silent while the rest of the cluster changes keys, and a keep-alive may
// reach the leader through another endpoint. From the moment the watch
// ends until it is established again, the store vouches for nothing
// (watchDown): every entry loses its word, and a renewal verifies by a read
// after its keep-alive, which gives the word back only once the watch is
// established again (revouch).
func (s *Store) sentinel(from int64) {
	defer s.wg.Done()
	for {
		compacted := false
		wch := s.cli.Watch(clientv3.WithRequireLeader(s.ctx), s.prefix, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithCreatedNotify())
		for resp := range wch {
			if resp.CompactRevision != 0 {
				// Events between from and the compaction are gone: a
				// change among them would go unseen.
				s.book.distrustAll(resp.CompactRevision)
				from, compacted = resp.CompactRevision, true
				continue
			}
			if resp.Created {
				s.book.watchUp()
			}
			for _, ev := range resp.Events {
				s.book.changed(string(ev.Kv.Key), ev.Kv.ModRevision)
				from = ev.Kv.ModRevision + 1
			}
		}
		if s.ctx.Err() != nil {
			return
		}
		if compacted {
			continue // from the compaction on, at once
		}
		s.book.watchEnded()
		s.log.Warn("etcd: the store's watch of its entries ended; watching again", "rev", from)
		select {
		case <-s.ctx.Done():
			return
		case <-s.clock.After(sentinelRetry):
		}
	}
}
