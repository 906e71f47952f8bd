package etcd

import clientv3 "go.etcd.io/etcd/client/v3"

// SharedLeaseOf returns the store's shared lease for TTLs of secs seconds,
// or NoLease.
func (s *Store) SharedLeaseOf(secs int64) clientv3.LeaseID {
	s.book.mu.Lock()
	defer s.book.mu.Unlock()
	if g := s.book.groups[secs]; g != nil {
		return g.id
	}
	return clientv3.NoLease
}

// WriteUnknown records that a write of key on the shared lease of secs
// seconds had an unknown outcome, as a timed-out CreateIfAbsent would.
func (s *Store) WriteUnknown(key string, secs int64) {
	s.book.mu.Lock()
	g := s.book.groups[secs]
	s.book.mu.Unlock()
	s.book.writeUnknown(s.prefix+key, writeLease{id: g.id, granted: g.granted, shared: true})
}

// Watching reports whether the store's sentinel has its watch established.
func (s *Store) Watching() bool {
	s.book.mu.Lock()
	defer s.book.mu.Unlock()
	return s.book.watchCreated
}

// Seen is the last revision the store's sentinel saw a change at.
func (s *Store) Seen() int64 {
	s.book.mu.Lock()
	defer s.book.mu.Unlock()
	return s.book.seen
}

// Vouched reports whether the store vouches for key at rev (a KeepAlive of
// it is then a keep-alive alone).
func (s *Store) Vouched(key string, rev int64) bool {
	s.book.mu.Lock()
	defer s.book.mu.Unlock()
	h := s.book.held[s.prefix+key]
	return h != nil && s.book.vouchedLocked(s.prefix+key, h, rev)
}
