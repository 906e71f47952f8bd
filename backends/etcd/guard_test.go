package etcd_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/clocktest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// guardCase is an entry on a lease of its own whose renewals are guarded:
// one the store wrote (renewed by a keep-alive alone), or one a peer wrote
// that the store has kept alive once (renewed by a read, then a keep-alive).
type guardCase struct {
	name string
	// ttl is the entry's lease; its guard is 1 s either way.
	ttl time.Duration
	// setup returns the entry and the store renewing it, with the last
	// keep-alive or grant etcd answered alive sent at the store's clock's
	// current reading.
	setup func(t *testing.T, f *fixture, ttl time.Duration) (*etcd.Store, backends.Entry)
}

var guardCases = []guardCase{
	{"own", 2 * time.Second, func(t *testing.T, f *fixture, ttl time.Duration) (*etcd.Store, backends.Entry) {
		return f.store, mustCreate(t, f.store, "a", "v", ttl)
	}},
	// A peer's entry on a 2 s lease could not be kept alive at all: its
	// first renewal counts from the whole seconds etcd reports left,
	// rounded down (TestFirstKeepAliveOfAPeersEntry).
	{"peer's", 4 * time.Second, func(t *testing.T, f *fixture, ttl time.Duration) (*etcd.Store, backends.Entry) {
		e := mustCreate(t, f.peer(t), "a", "v", ttl)
		if _, err := f.store.KeepAlive(testContext(t), "a", e.Revision, ttl); err != nil {
			t.Fatalf("first KeepAlive of the peer's entry: %v", err)
		}
		return f.store, e
	}},
}

// guard is how long before its lease's possible expiry the store stops
// keeping an entry of either case alive (leaseGuard of 2 s and of 4 s).
const guard = time.Second

// start opens a fixture whose store runs on a fake clock and sets the case
// up on it; id is the entry's lease.
func (tc guardCase) start(t *testing.T) (clk *clocktest.Clock, f *fixture, s *etcd.Store, e backends.Entry, id clientv3.LeaseID) {
	clk = clocktest.New(time.Time{})
	f = newFixture(t, etcd.WithClock(clk))
	s, e = tc.setup(t, f, tc.ttl)
	return clk, f, s, e, f.leaseOfKey(t, "a")
}

// leaseOfKey is the lease etcd has key on, read behind the store's back.
func (f *fixture) leaseOfKey(t *testing.T, key string) clientv3.LeaseID {
	t.Helper()
	resp, err := f.raw.Get(testContext(t), f.prefix+key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("Get(%q) behind the store: %v, %d keys; want the key", key, err, len(resp.Kvs))
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// TestKeepAliveNotNearExpiry checks that with a lease per claim, a renewal
// that comes when its lease may be close to its expiry at the server (here
// 100 ms past TTL − guard after the last keep-alive etcd answered alive)
// sends no keep-alive and is lost, and so is its retry. A keep-alive then
// could be answered alive while etcd's revoke loop deletes the key, and a
// peer could take the claim while this holder believes it has a fresh
// deadline. The store's clock moves and etcd's does not, so the lease is
// alive at the server and a keep-alive would succeed: before the guard, both
// renewals were sent and answered alive.
func TestKeepAliveNotNearExpiry(t *testing.T) {
	for _, tc := range guardCases {
		t.Run(tc.name, func(t *testing.T) {
			clk, f, s, e, id := tc.start(t)

			late := tc.ttl - guard + 100*time.Millisecond
			clk.Add(late)
			f.reqs.reset()
			for _, try := range []string{"renewal", "retry"} {
				_, err := s.KeepAlive(testContext(t), "a", e.Revision, tc.ttl)
				if !tooLateLost(err) {
					t.Errorf("%s %v after the last keep-alive of a %v lease: %v, want lost, saying neither absent nor changed", try, late, tc.ttl, err)
				}
				if n := f.reqs.of("LeaseKeepAlive"); n != 0 {
					t.Errorf("%s %v after the last keep-alive of a %v lease: %d keep-alives (%s), want none", try, late, tc.ttl, n, f.reqs)
				}
			}
			// The entry is left to lapse with its lease, not deleted.
			if got := f.leaseOfKey(t, "a"); got != id {
				t.Errorf("entry after the refused renewals is on lease %x, want %x", got, id)
			}
		})
	}
}

// TestKeepAliveWithinGuardIsSent checks that renewals that come before the
// guard (0.9 s after the last keep-alive etcd answered alive) are sent, and
// each one counts the guard again from its own send; a renewal at exactly TTL
// − guard is not.
func TestKeepAliveWithinGuardIsSent(t *testing.T) {
	for _, tc := range guardCases {
		t.Run(tc.name, func(t *testing.T) {
			clk, f, s, e, id := tc.start(t)

			for i := range 3 {
				clk.Add(900 * time.Millisecond)
				before := f.reqs.keepAlivesOf(id)
				got, err := s.KeepAlive(testContext(t), "a", e.Revision, tc.ttl)
				if err != nil || got.Revision != e.Revision {
					t.Fatalf("renewal %d, 0.9s after the last one: %+v, %v; want revision %d", i, got, err, e.Revision)
				}
				if n := f.reqs.keepAlivesOf(id) - before; n != 1 {
					t.Errorf("renewal %d, 0.9s after the last one: %d keep-alives of the lease (%s), want 1", i, n, f.reqs)
				}
			}
			clk.Add(tc.ttl - guard)
			before := f.reqs.keepAlivesOf(id)
			if _, err := s.KeepAlive(testContext(t), "a", e.Revision, tc.ttl); !tooLateLost(err) {
				t.Errorf("renewal exactly TTL − guard after the last keep-alive of a %v lease: %v, want lost, saying neither absent nor changed", tc.ttl, err)
			}
			if n := f.reqs.keepAlivesOf(id) - before; n != 0 {
				t.Errorf("renewal exactly TTL − guard after the last keep-alive: %d keep-alives (%s), want none", n, f.reqs)
			}
		})
	}
}

// TestFirstKeepAliveOfAPeersEntry checks that the first renewal of an entry
// whose lease the store neither granted nor kept alive is guarded too, by the
// time to live etcd reports (whole seconds, rounded down) counted from before
// the store asked. A 2 s lease just granted has 1 s left by that count, no
// more than its guard, so its first renewal is refused without a keep-alive
// (before, it was sent, with nothing to tell how close the lease was to its
// expiry); a 5 s lease has 4 s left, and its first renewal is sent. The
// store's clock does not move: the lease's time left is etcd's.
func TestFirstKeepAliveOfAPeersEntry(t *testing.T) {
	for _, tc := range []struct {
		ttl  time.Duration
		sent bool
	}{{2 * time.Second, false}, {5 * time.Second, true}} {
		t.Run(tc.ttl.String(), func(t *testing.T) {
			f := newFixture(t, etcd.WithClock(clocktest.New(time.Time{})))
			e := mustCreate(t, f.peer(t), "a", "v", tc.ttl)
			id := f.leaseOfKey(t, "a")
			f.reqs.reset()
			_, err := f.store.KeepAlive(testContext(t), "a", e.Revision, tc.ttl)
			n := f.reqs.keepAlivesOf(id)
			switch {
			case tc.sent && (err != nil || n != 1):
				t.Errorf("first renewal of a peer's entry on a fresh %v lease: %v, %d keep-alives (%s); want it renewed by one", tc.ttl, err, n, f.reqs)
			case !tc.sent && (!tooLateLost(err) || n != 0):
				t.Errorf("first renewal of a peer's entry on a fresh %v lease: %v, %d keep-alives (%s); want lost, saying neither absent nor changed, and none sent", tc.ttl, err, n, f.reqs)
			}
		})
	}
}

// tooLateLost reports whether err is the answer to a renewal the store
// refused to send near its lease's expiry: class lost, but no claim that
// the key is absent or changed, since the entry is still there until its
// lease expires (a history checker holds the store to what it says).
func tooLateLost(err error) bool {
	return backends.Classify(err) == backends.ClassLost &&
		!errors.Is(err, backends.ErrNotFound) && !errors.Is(err, backends.ErrConflict)
}
