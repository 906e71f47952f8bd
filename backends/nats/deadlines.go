package nats

import (
	"container/heap"
	"time"
)

// deadline is the time a sighting of key would expire: at, the time the
// sighting began, plus ttl.
type deadline struct {
	key string
	seq uint64
	at  time.Time
	ttl time.Duration
}

func (d deadline) due() time.Time { return d.at.Add(d.ttl) }

// deadlines orders the sightings a store made by when they would expire,
// so that the hub's expiry timer finds those due without visiting every
// key. An item is pushed for each new sighting and stays when its
// sighting is replaced: the timer checks each item it takes against the
// key's current sighting and drops stale ones, and the heap is rebuilt
// from the sightings when stale items outnumber them (see
// Store.pushDeadlineLocked), so its size stays a small multiple of the
// keys seen.
type deadlines []deadline

func (h deadlines) Len() int           { return len(h) }
func (h deadlines) Less(i, j int) bool { return h[i].due().Before(h[j].due()) }
func (h deadlines) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlines) Push(x any)        { *h = append(*h, x.(deadline)) }
func (h *deadlines) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	return d
}

// currentLocked reports whether d is still key's sighting, unreported, with a
// TTL. s.mu is held.
func (s *Store) currentLocked(d deadline) bool {
	sg, ok := s.seen[d.key]
	return ok && sg.seq == d.seq && sg.at.Equal(d.at) && sg.last.TTL == d.ttl && sg.last.TTL > 0 && !sg.reported
}

// setSightingLocked records sg as key's new sighting (a new message, or a
// first sight of it) and queues its expiry. s.mu is held.
func (s *Store) setSightingLocked(key string, sg sighting) {
	s.seen[key] = sg
	if sg.last.TTL <= 0 {
		return
	}
	if len(s.expiries) >= 4*len(s.seen)+1024 {
		// Mostly items of sightings replaced since: start again from
		// the sightings themselves.
		s.expiries = s.expiries[:0]
		for k, g := range s.seen {
			if g.last.TTL > 0 && !g.reported {
				s.expiries = append(s.expiries, deadline{key: k, seq: g.seq, at: g.at, ttl: g.last.TTL})
			}
		}
		heap.Init(&s.expiries)
		return
	}
	heap.Push(&s.expiries, deadline{key: key, seq: sg.seq, at: sg.at, ttl: sg.last.TTL})
}

// dueLocked takes from the queue every sighting due by now that is still
// current, and returns them with the time the next one is due (zero:
// none queued). s.mu is held.
func (s *Store) dueLocked(now time.Time) (due []expiry, next time.Time) {
	for len(s.expiries) > 0 {
		d := s.expiries[0]
		if s.examined != nil {
			s.examined(false)
		}
		if !s.currentLocked(d) {
			heap.Pop(&s.expiries)
			continue
		}
		if now.Before(d.due()) {
			return due, d.due()
		}
		heap.Pop(&s.expiries)
		due = append(due, expiry{key: d.key, seq: d.seq, at: d.at})
	}
	return due, time.Time{}
}
