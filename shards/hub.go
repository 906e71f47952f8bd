package shards

import (
	"context"
	"fmt"
	"sync"

	"github.com/tenure-go/tenure/backends"
)

// claims is the Locker a member's electors run on: the store's claims, with
// the electors' claim watches served from the member's one watch of the
// group instead of one store watch each. A member campaigning for 64 shards
// thus holds one watch, not 65: on etcd one watcher, on a filestore one
// inotify instance (a per-user kernel resource, 128 by default).
type claims struct {
	*backends.StoreLocker
	hub *hub
}

var _ backends.ClaimWatcher = (*claims)(nil)

// WatchClaim implements backends.ClaimWatcher: the channel signals each
// change the member's group watch sees at key, and is closed when ctx is
// done or that watch ends and cannot be reopened at once; a break the
// member mends at once signals it instead, since the claim may have
// changed during the break. While the group watch is down it fails as
// unavailable (the elector then times its attempts to the claim's expiry
// and tries to watch again later); on a store that cannot watch, it fails
// as unsupported.
func (c *claims) WatchClaim(ctx context.Context, key string) (<-chan struct{}, error) {
	return c.hub.subscribe(ctx, key)
}

// ExpiryEvents implements backends.ClaimWatcher: true when the store's
// watch reports expiry.
func (c *claims) ExpiryEvents() bool { return c.hub.expiry }

// hub fans the events of the member's group watch out to the claim watches
// of its electors, by key.
type hub struct {
	can    bool // the store can watch
	expiry bool // and its watch reports expiry

	mu   sync.Mutex
	up   bool                         // the group watch runs; guarded by mu
	subs map[string]map[*sub]struct{} // by key; guarded by mu
}

// sub is one claim watch.
type sub struct {
	ch     chan struct{} // coalescing: buffered, never blocks the hub
	closed bool          // guarded by hub.mu
}

func newHub(store backends.Store) *hub {
	can := backends.Require(store, backends.CapWatch) == nil
	if _, ok := store.(backends.Watcher); !ok {
		can = false
	}
	return &hub{can: can, expiry: can && store.Capabilities().ExpiryEvents, subs: map[string]map[*sub]struct{}{}}
}

func (h *hub) subscribe(ctx context.Context, key string) (<-chan struct{}, error) {
	if !h.can {
		return nil, fmt.Errorf("shards: watch %q: %w", key, backends.ErrUnsupported)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.up {
		return nil, fmt.Errorf("shards: watch %q: the group watch is down: %w", key, backends.ErrUnavailable)
	}
	s := &sub{ch: make(chan struct{}, 1)}
	if h.subs[key] == nil {
		h.subs[key] = map[*sub]struct{}{}
	}
	h.subs[key][s] = struct{}{}
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.closeLocked(key, s)
	})
	return s.ch, nil
}

func (h *hub) closeLocked(key string, s *sub) {
	if s.closed {
		return
	}
	s.closed = true
	close(s.ch)
	delete(h.subs[key], s)
	if len(h.subs[key]) == 0 {
		delete(h.subs, key)
	}
}

// notify signals the watches of key.
func (h *hub) notify(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[key] {
		select {
		case s.ch <- struct{}{}:
		default: // a signal is already pending
		}
	}
}

// notifyAll signals every claim watch: the group watch was mended after a
// break, during which any claim may have changed.
func (h *hub) notifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ss := range h.subs {
		for s := range ss {
			select {
			case s.ch <- struct{}{}:
			default:
			}
		}
	}
}

// setUp records whether the group watch runs; when it stops, every claim
// watch ends, as a store watch that breaks ends its stream.
func (h *hub) setUp(up bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.up = up
	if up {
		return
	}
	for key, ss := range h.subs {
		for s := range ss {
			h.closeLocked(key, s)
		}
	}
}
