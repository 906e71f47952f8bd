package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
)

// Harness tells Run how to make and drive the stores under test.
type Harness struct {
	// New returns a fresh, empty store isolated from every other store New
	// returned (own dir / key prefix). Cleanup via t.Cleanup.
	New func(t *testing.T) backends.Store
	// Elapse makes d pass for the store's expiry judge (e.g. a fake clock's
	// Add). Nil means the store judges expiry on real time; the suite then
	// waits for expiry by polling under a bounded context deadline (never a
	// fixed sleep). Elapse must bring every judge up to date: where each
	// Store value judges expiry by its own observation (kube), the stores
	// New and Peer returned must all have observed the current state before
	// the time passes, or a peer may rightly still see an entry as live.
	Elapse func(d time.Duration)
	// TTL is the TTL the suite gives entries that must expire (default 1s);
	// the store must honour it.
	TTL time.Duration
	// Reopen closes s and opens a new Store over the same persistent state,
	// as after a process restart. Nil for stores that do not persist.
	Reopen func(t *testing.T, s backends.Store) backends.Store
	// Peer returns another Store over the same state as s, as a second
	// process would open it. Nil: the suite shares s.
	Peer func(t *testing.T, s backends.Store) backends.Store
}

// defaultTTL is the TTL the suite uses when Harness.TTL is zero.
const defaultTTL = time.Second

// pollEvery is how often the suite re-reads a store while it waits for real
// time to pass.
const pollEvery = 20 * time.Millisecond

// Run runs the conformance suite against the stores h makes. Every property
// is a subtest named after what it checks.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("backendtest: Harness.New is nil")
	}
	if h.TTL < 0 {
		t.Fatalf("backendtest: Harness.TTL is %v, want positive (or 0 for the default %v)", h.TTL, defaultTTL)
	}
	if h.TTL == 0 {
		h.TTL = defaultTTL
	}
	s := &suite{h: h, ttl: h.TTL, wall: clock.New()}

	t.Run("Capabilities", func(t *testing.T) {
		t.Run("Declared", s.testCapabilitiesDeclared)
		t.Run("HiddenByWrapper", s.testCapabilitiesHidden)
	})
	t.Run("CreateIfAbsent", func(t *testing.T) {
		t.Run("Entry", s.testCreateEntry)
		t.Run("Race", s.testCreateRace)
	})
	t.Run("Conflicts", s.testConflicts)
	t.Run("CompareAndSet", func(t *testing.T) {
		t.Run("Updates", s.testCASUpdates)
		t.Run("NoLostUpdate", s.testNoLostUpdate)
	})
	t.Run("Revisions", func(t *testing.T) {
		t.Run("UpdateDeleteRecreate", s.testRevisionsDelete)
		t.Run("ExpireRecreate", s.testRevisionsExpire)
		t.Run("AcrossReopen", s.testRevisionsReopen)
	})
	t.Run("KeepAlive", func(t *testing.T) {
		t.Run("KeepsRevisionAndValue", s.testKeepAliveKeeps)
		t.Run("ExtendsExpiry", s.testKeepAliveExtends)
	})
	t.Run("Expiry", func(t *testing.T) {
		t.Run("AbsentForEveryOperation", s.testExpiredAbsent)
	})
	t.Run("List", func(t *testing.T) {
		t.Run("PrefixAndOrder", s.testListPrefixOrder)
	})
	t.Run("Keys", func(t *testing.T) {
		t.Run("RoundTrip", s.testKeysRoundTrip)
	})
	t.Run("Values", func(t *testing.T) {
		t.Run("RoundTrip", s.testValuesRoundTrip)
		t.Run("CopiedInAndOut", s.testValuesCopied)
	})
	t.Run("BadInput", s.testBadInput)
	t.Run("TTLBound", s.testTTLBound)
	t.Run("Closed", s.testClosed)
	t.Run("Peer", s.testPeer)
	t.Run("Watch", func(t *testing.T) {
		t.Run("OrderAndPrefix", s.testWatchOrder)
		t.Run("OnlyLaterChanges", s.testWatchLater)
		t.Run("ClosesOnCancel", s.testWatchCancel)
		t.Run("ReportsExpiry", s.testWatchExpiry)
	})
	t.Run("Txn", func(t *testing.T) {
		t.Run("AllOrNothing", s.testTxnAllOrNothing)
		t.Run("Applies", s.testTxnApplies)
		t.Run("AtomicToReaders", s.testTxnAtomic)
	})
	t.Run("Locker", func(t *testing.T) {
		t.Run("SameIdentityTwoHolders", s.testLockerSameIdentity)
		t.Run("TokensIncrease", s.testLockerTokens)
		t.Run("Advertised", s.testLockerAdvertised)
		t.Run("WatchClaim", s.testLockerWatch)
		t.Run("Transfer", s.testLockerTransfer)
		t.Run("Candidacies", s.testLockerCandidacies)
	})
	t.Run("Linearizable", s.testLinearizable)
}

type suite struct {
	h    Harness
	ttl  time.Duration
	wall clock.Clock // real time, only for polling intervals
}

// store returns a fresh store from the harness.
func (s *suite) store(t *testing.T) backends.Store {
	t.Helper()
	st := s.h.New(t)
	if st == nil {
		t.Fatal("Harness.New returned a nil store")
	}
	return st
}

// peer returns a second store over st's state, or st itself.
func (s *suite) peer(t *testing.T, st backends.Store) backends.Store {
	t.Helper()
	if s.h.Peer == nil {
		return st
	}
	p := s.h.Peer(t, st)
	if p == nil {
		t.Fatal("Harness.Peer returned a nil store")
	}
	return p
}

// need skips t unless st declares every capability in c.
func need(t *testing.T, st backends.Store, c backends.Capability) {
	t.Helper()
	if !st.Capabilities().Has(c) {
		t.Skipf("store does not declare %s", c)
	}
}

// expire makes the entries es expire and checks that they are gone: with
// Elapse it moves the judge past the longest granted TTL; without it, it
// polls each key until it is absent, under a deadline of that TTL plus 5s.
func (s *suite) expire(t *testing.T, st backends.Store, es ...backends.Entry) {
	t.Helper()
	longest := s.ttl
	for _, e := range es {
		if e.TTL <= 0 {
			t.Fatalf("expire: entry %q has no TTL", e.Key)
		}
		longest = max(longest, e.TTL)
	}
	ctx := t.Context()
	if s.h.Elapse != nil {
		s.h.Elapse(longest + longest/10)
		for _, e := range es {
			if got, err := st.Get(ctx, e.Key); !errors.Is(err, backends.ErrNotFound) {
				t.Fatalf("Get(%q) after Elapse(%v) past its TTL %v = (rev %d, %v), want ErrNotFound", e.Key, longest+longest/10, e.TTL, got.Revision, err)
			}
		}
		return
	}
	for _, e := range es {
		s.waitAbsent(t, st, e.Key, longest+5*time.Second)
	}
}

// waitAbsent polls Get(key) until it reports ErrNotFound or limit passes.
func (s *suite) waitAbsent(t *testing.T, st backends.Store, key string, limit time.Duration) {
	t.Helper()
	err := s.poll(t, limit, func(ctx context.Context) (bool, error) {
		_, err := st.Get(ctx, key)
		if errors.Is(err, backends.ErrNotFound) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("waiting for %q to expire: %v", key, err)
	}
}

// poll calls cond every pollEvery until it reports done, returns an error,
// or limit passes.
func (s *suite) poll(t *testing.T, limit time.Duration, cond func(ctx context.Context) (bool, error)) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	tk := s.wall.Ticker(pollEvery)
	defer tk.Stop()
	for {
		done, err := cond(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("condition not met within %v: %w", limit, ctx.Err())
		case <-tk.C:
		}
	}
}

// errPanicked stands for the result of a call that panicked.
var errPanicked = errors.New("backendtest: call panicked")

// call runs f and turns a panic into a test failure.
func call(t *testing.T, what string, f func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
			err = errPanicked
		}
	}()
	return f()
}

func mustCreate(t *testing.T, st backends.Store, key string, value []byte, ttl time.Duration) backends.Entry {
	t.Helper()
	e, err := st.CreateIfAbsent(t.Context(), key, value, ttl)
	if err != nil {
		t.Fatalf("CreateIfAbsent(%q, %q, %v): %v", key, value, ttl, err)
	}
	return e
}

func mustCAS(t *testing.T, st backends.Store, key string, rev int64, value []byte, ttl time.Duration) backends.Entry {
	t.Helper()
	e, err := st.CompareAndSet(t.Context(), key, rev, value, ttl)
	if err != nil {
		t.Fatalf("CompareAndSet(%q, rev %d, %q, %v): %v", key, rev, value, ttl, err)
	}
	return e
}

func mustGet(t *testing.T, st backends.Store, key string) backends.Entry {
	t.Helper()
	e, err := st.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return e
}

func mustDelete(t *testing.T, st backends.Store, key string, rev int64) {
	t.Helper()
	if err := st.CompareAndDelete(t.Context(), key, rev); err != nil {
		t.Fatalf("CompareAndDelete(%q, rev %d): %v", key, rev, err)
	}
}

func wantAbsent(t *testing.T, st backends.Store, key string) {
	t.Helper()
	if e, err := st.Get(t.Context(), key); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Get(%q) = (rev %d, value %q, err %v), want ErrNotFound", key, e.Revision, e.Value, err)
	}
}

// sameEntry reports a difference in what identifies an entry's state: key,
// value and revisions (not the time left).
func sameEntry(t *testing.T, what string, got, want backends.Entry) {
	t.Helper()
	if got.Key != want.Key || !bytes.Equal(got.Value, want.Value) || got.Revision != want.Revision || got.CreateRevision != want.CreateRevision {
		t.Errorf("%s = %s, want %s", what, show(got), show(want))
	}
}

// show formats the parts of an entry the suite compares.
func show(e backends.Entry) string {
	v := string(e.Value)
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return fmt.Sprintf("{key %q value %q rev %d create %d ttl %v}", e.Key, v, e.Revision, e.CreateRevision, e.TTL)
}

// conflictOf checks that err is a *backends.ConflictError for key with the
// expected revision, reporting the current entry iff found, and returns it
// (nil after a failure).
func conflictOf(t *testing.T, what string, err error, key string, expected int64, found bool) *backends.ConflictError {
	t.Helper()
	var ce *backends.ConflictError
	if !errors.As(err, &ce) {
		t.Errorf("%s: err = %v, want a *backends.ConflictError", what, err)
		return nil
	}
	if !errors.Is(err, backends.ErrConflict) {
		t.Errorf("%s: errors.Is(%v, ErrConflict) = false, want true", what, err)
	}
	if ce.Key != key || ce.Expected != expected || ce.Found != found {
		t.Errorf("%s: ConflictError{Key %q, Expected %d, Found %v}, want {Key %q, Expected %d, Found %v}", what, ce.Key, ce.Expected, ce.Found, key, expected, found)
		return nil
	}
	switch {
	case !found && !errors.Is(err, backends.ErrNotFound):
		t.Errorf("%s: errors.Is(%v, ErrNotFound) = false for an absent key, want true", what, err)
	case found && expected == 0 && !errors.Is(err, backends.ErrExists):
		t.Errorf("%s: errors.Is(%v, ErrExists) = false for a present key and revision 0, want true", what, err)
	}
	if c := backends.Classify(err); c != backends.ClassLost {
		t.Errorf("%s: Classify(%v) = %v, want %v", what, err, c, backends.ClassLost)
	}
	return ce
}

// wantErrIs checks that err wraps target.
func wantErrIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v, want an error wrapping %v", what, err, target)
	}
}

// checkTTL checks the TTL and Remaining a write reported for a requested ttl.
func checkTTL(t *testing.T, what string, e backends.Entry, ttl time.Duration) {
	t.Helper()
	if ttl == 0 {
		if e.TTL != 0 {
			t.Errorf("%s: TTL = %v, want 0 (no expiry)", what, e.TTL)
		}
		return
	}
	if e.TTL < ttl {
		t.Errorf("%s: TTL = %v, want at least the %v asked (stores round only upward)", what, e.TTL, ttl)
	}
	if e.Remaining < 0 || e.Remaining > e.TTL {
		t.Errorf("%s: Remaining = %v, want within [0, TTL %v]", what, e.Remaining, e.TTL)
	}
}
