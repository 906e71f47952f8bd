package backendtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// core is what the suite's core checks need; stores without it fail closed,
// which testCapabilitiesDeclared checks.
const core = backends.CapCreateIfAbsent | backends.CapCompareAndSet | backends.CapCompareAndDelete | backends.CapKeepAlive

func (s *suite) testCapabilitiesDeclared(t *testing.T) {
	st := s.store(t)
	caps := st.Capabilities()
	if caps.Scope < backends.ScopeProcess || caps.Scope > backends.ScopeDistributed {
		t.Errorf("Capabilities().Scope = %v, want process, host or distributed", caps.Scope)
	}
	if caps.ExpiryJudge == "" {
		t.Error("Capabilities().ExpiryJudge is empty, want who judges expiry")
	}
	if caps.TTLGranularity < 0 || caps.MinTTL < 0 {
		t.Errorf("Capabilities() TTLGranularity %v, MinTTL %v, want non-negative", caps.TTLGranularity, caps.MinTTL)
	}
	if caps.MinTTL > s.ttl {
		t.Errorf("Harness.TTL %v is below the store's MinTTL %v: set a TTL the store honours", s.ttl, caps.MinTTL)
	}
	if err := backends.Require(st, caps.Atomic); err != nil {
		t.Errorf("Require(store, its own declaration %s) = %v, want nil", caps.Atomic, err)
	}
	if _, ok := st.(backends.Watcher); caps.Has(backends.CapWatch) && !ok {
		t.Errorf("store %T declares watch but does not implement backends.Watcher", st)
	}
	if _, ok := st.(backends.Txner); caps.Has(backends.CapTxn) && !ok {
		t.Errorf("store %T declares txn but does not implement backends.Txner", st)
	}
	for _, c := range []backends.Capability{backends.CapWatch, backends.CapTxn} {
		if caps.Has(c) {
			continue
		}
		err := backends.Require(st, c)
		wantErrIs(t, fmt.Sprintf("Require(store, undeclared %s)", c), err, backends.ErrUnsupported)
		wantErrIs(t, fmt.Sprintf("Require(store, undeclared %s)", c), err, errors.ErrUnsupported)
	}
	_, err := backends.NewLocker(st)
	if caps.Has(backends.CapClaims) && err != nil {
		t.Errorf("NewLocker over a store declaring %s: %v", caps.Atomic, err)
	}
	if !caps.Has(backends.CapClaims) {
		wantErrIs(t, "NewLocker over a store without the claim capabilities", err, backends.ErrUnsupported)
	}

	// Fail closed: what is not declared must not report success.
	ctx := t.Context()
	if !caps.Has(backends.CapCreateIfAbsent) {
		_, err := st.CreateIfAbsent(ctx, "caps/create", []byte("v"), 0)
		wantErrIs(t, "CreateIfAbsent on a store not declaring it", err, backends.ErrUnsupported)
	}
	if !caps.Has(backends.CapCompareAndSet) {
		_, err := st.CompareAndSet(ctx, "caps/cas", 0, []byte("v"), 0)
		wantErrIs(t, "CompareAndSet on a store not declaring it", err, backends.ErrUnsupported)
	}
	if !caps.Has(core) {
		t.Fatalf("store declares %s; the suite's other checks need %s", caps.Atomic, core)
	}
}

// hidden forwards Capabilities (and the Store methods) but hides every
// optional interface, as a careless wrapper would.
type hidden struct{ backends.Store }

func (s *suite) testCapabilitiesHidden(t *testing.T) {
	st := s.store(t)
	caps := st.Capabilities()
	w := hidden{st}
	for _, c := range []backends.Capability{backends.CapWatch, backends.CapTxn} {
		err := backends.Require(w, c)
		wantErrIs(t, fmt.Sprintf("Require(wrapper hiding %s)", c), err, backends.ErrUnsupported)
	}
	if err := backends.Require(w, caps.Atomic&^(backends.CapWatch|backends.CapTxn)); err != nil {
		t.Errorf("Require(wrapper, %s) = %v, want nil: the wrapper forwards those", caps.Atomic&^(backends.CapWatch|backends.CapTxn), err)
	}
	if !caps.Has(backends.CapClaims) {
		return
	}
	l, err := backends.NewLocker(w)
	if err != nil {
		t.Fatalf("NewLocker(wrapper): %v", err)
	}
	ch, err := l.WatchClaim(t.Context(), "hidden/claim")
	wantErrIs(t, "WatchClaim through a wrapper hiding Watch", err, backends.ErrUnsupported)
	if ch != nil {
		t.Error("WatchClaim through a wrapper hiding Watch returned a channel, want nil")
	}
}

func (s *suite) testCreateEntry(t *testing.T) {
	st := s.store(t)
	for _, tc := range []struct {
		key   string
		value string
		ttl   bool
	}{
		{"create/forever", "v1", false},
		{"create/ttl", "v2", true},
	} {
		ttl := s.ttl
		if !tc.ttl {
			ttl = 0
		}
		e := mustCreate(t, st, tc.key, []byte(tc.value), ttl)
		what := fmt.Sprintf("CreateIfAbsent(%q, %q, %v)", tc.key, tc.value, ttl)
		if e.Key != tc.key || string(e.Value) != tc.value {
			t.Errorf("%s = key %q value %q, want key %q value %q", what, e.Key, e.Value, tc.key, tc.value)
		}
		if e.Revision <= 0 || e.CreateRevision != e.Revision {
			t.Errorf("%s: Revision %d, CreateRevision %d, want equal and positive", what, e.Revision, e.CreateRevision)
		}
		checkTTL(t, what, e, ttl)
		got := mustGet(t, st, tc.key)
		sameEntry(t, fmt.Sprintf("Get(%q)", tc.key), got, e)
		checkTTL(t, fmt.Sprintf("Get(%q)", tc.key), got, ttl)
	}
}

// racers is how many goroutines race for one key.
const racers = 64

func (s *suite) testCreateRace(t *testing.T) {
	st := s.store(t)
	stores := []backends.Store{st, s.peer(t, st)}
	const key = "race/claim"
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		ents  [racers]backends.Entry
		errs  [racers]error
	)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ents[i], errs[i] = st0(stores, i).CreateIfAbsent(t.Context(), key, []byte("racer-"+strconv.Itoa(i)), 0)
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		if err == nil {
			if winner >= 0 {
				t.Errorf("racers %d and %d both created %q (revisions %d and %d); want exactly one winner", winner, i, key, ents[winner].Revision, ents[i].Revision)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("none of %d racers created %q; first error: %v", racers, key, errs[0])
	}
	win := ents[winner]
	if string(win.Value) != "racer-"+strconv.Itoa(winner) {
		t.Errorf("winner %d got value %q back, want %q", winner, win.Value, "racer-"+strconv.Itoa(winner))
	}
	for i, err := range errs {
		if i == winner {
			continue
		}
		what := fmt.Sprintf("racer %d (winner %d)", i, winner)
		if !errors.Is(err, backends.ErrExists) {
			t.Errorf("%s: err = %v, want a conflict wrapping ErrExists", what, err)
			continue
		}
		if ce := conflictOf(t, what, err, key, 0, true); ce != nil {
			sameEntry(t, what+": ConflictError.Current", ce.Current, win)
		}
	}
	sameEntry(t, fmt.Sprintf("Get(%q) after the race", key), mustGet(t, st, key), win)
}

// st0 spreads goroutine i over the stores (the store and its peer).
func st0(stores []backends.Store, i int) backends.Store { return stores[i%len(stores)] }

func (s *suite) testConflicts(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	const key, absent = "conflict/key", "conflict/absent"
	e1 := mustCreate(t, st, key, []byte("v1"), 0)
	e2 := mustCAS(t, st, key, e1.Revision, []byte("v2"), 0)
	if e2.Revision <= e1.Revision {
		t.Fatalf("CompareAndSet revision %d after %d, want greater", e2.Revision, e1.Revision)
	}

	tests := []struct {
		name     string
		key      string
		expected int64
		found    bool
		do       func() error
	}{
		{"CompareAndSet stale revision", key, e1.Revision, true, func() error {
			_, err := st.CompareAndSet(ctx, key, e1.Revision, []byte("x"), 0)
			return err
		}},
		{"CompareAndSet future revision", key, e2.Revision + 1000, true, func() error {
			_, err := st.CompareAndSet(ctx, key, e2.Revision+1000, []byte("x"), 0)
			return err
		}},
		{"CompareAndSet revision 0 on an existing key", key, 0, true, func() error {
			_, err := st.CompareAndSet(ctx, key, 0, []byte("x"), 0)
			return err
		}},
		{"CompareAndSet revision > 0 on an absent key", absent, e2.Revision, false, func() error {
			_, err := st.CompareAndSet(ctx, absent, e2.Revision, []byte("x"), 0)
			return err
		}},
		{"CreateIfAbsent on an existing key", key, 0, true, func() error {
			_, err := st.CreateIfAbsent(ctx, key, []byte("x"), 0)
			return err
		}},
		{"CompareAndDelete stale revision", key, e1.Revision, true, func() error {
			return st.CompareAndDelete(ctx, key, e1.Revision)
		}},
		{"CompareAndDelete absent key", absent, e2.Revision, false, func() error {
			return st.CompareAndDelete(ctx, absent, e2.Revision)
		}},
		{"KeepAlive stale revision", key, e1.Revision, true, func() error {
			_, err := st.KeepAlive(ctx, key, e1.Revision, s.ttl)
			return err
		}},
		{"KeepAlive absent key", absent, e2.Revision, false, func() error {
			_, err := st.KeepAlive(ctx, absent, e2.Revision, s.ttl)
			return err
		}},
	}
	for _, tt := range tests {
		err := call(t, tt.name, tt.do)
		ce := conflictOf(t, tt.name, err, tt.key, tt.expected, tt.found)
		if ce != nil && tt.found {
			sameEntry(t, tt.name+": ConflictError.Current", ce.Current, e2)
		}
		sameEntry(t, fmt.Sprintf("Get(%q) after %s", key, tt.name), mustGet(t, st, key), e2)
		if got := mustGet(t, st, key); got.TTL != 0 {
			t.Errorf("Get(%q) after %s: TTL %v, want 0 (unchanged)", key, tt.name, got.TTL)
		}
		wantAbsent(t, st, absent)
	}
}

func (s *suite) testCASUpdates(t *testing.T) {
	st := s.store(t)
	const key = "cas/key"
	c := mustCAS(t, st, key, 0, []byte("created"), 0)
	if c.CreateRevision != c.Revision || c.Revision <= 0 {
		t.Errorf("CompareAndSet(%q, rev 0) = rev %d create %d, want a create (equal, positive)", key, c.Revision, c.CreateRevision)
	}
	u := mustCAS(t, st, key, c.Revision, []byte("updated"), s.ttl)
	if u.Revision <= c.Revision || u.CreateRevision != c.CreateRevision || string(u.Value) != "updated" {
		t.Errorf("CompareAndSet(%q, rev %d) = %s, want a higher revision, create revision %d, value %q", key, c.Revision, show(u), c.CreateRevision, "updated")
	}
	checkTTL(t, fmt.Sprintf("CompareAndSet(%q, rev %d, ttl %v)", key, c.Revision, s.ttl), u, s.ttl)
	v := mustCAS(t, st, key, u.Revision, nil, 0)
	checkTTL(t, fmt.Sprintf("CompareAndSet(%q, rev %d, ttl 0)", key, u.Revision), v, 0)
	sameEntry(t, fmt.Sprintf("Get(%q)", key), mustGet(t, st, key), v)
}

const (
	incrementers = 8
	increments   = 20
)

func (s *suite) testNoLostUpdate(t *testing.T) {
	st := s.store(t)
	stores := []backends.Store{st, s.peer(t, st)}
	const key = "counter"
	first := mustCreate(t, st, key, []byte("0"), 0)

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		revs = map[int]int64{0: first.Revision} // counter value -> revision that wrote it
	)
	for g := range incrementers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := st0(stores, g)
			cur := first
			for range increments {
				for attempt := 0; ; attempt++ {
					if attempt > 100*incrementers*increments {
						t.Errorf("goroutine %d: gave up incrementing %q after %d conflicts", g, key, attempt)
						return
					}
					n, err := strconv.Atoi(string(cur.Value))
					if err != nil {
						t.Errorf("goroutine %d: counter value %q: %v", g, cur.Value, err)
						return
					}
					next, err := st.CompareAndSet(t.Context(), key, cur.Revision, []byte(strconv.Itoa(n+1)), 0)
					if err == nil {
						mu.Lock()
						revs[n+1] = next.Revision
						mu.Unlock()
						cur = next
						break
					}
					var ce *backends.ConflictError
					if !errors.As(err, &ce) || !ce.Found {
						t.Errorf("goroutine %d: CompareAndSet(%q, rev %d): %v, want success or a conflict carrying the current entry", g, key, cur.Revision, err)
						return
					}
					cur = ce.Current // retry from the entry the conflict carried, without a read
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	got := mustGet(t, st, key)
	if want := strconv.Itoa(incrementers * increments); string(got.Value) != want {
		t.Fatalf("counter after %d goroutines x %d increments = %q, want %q (lost updates)", incrementers, increments, got.Value, want)
	}
	for n := 1; n <= incrementers*increments; n++ {
		if revs[n] <= revs[n-1] {
			t.Errorf("counter value %d written at revision %d, value %d at %d: want strictly increasing", n-1, revs[n-1], n, revs[n])
		}
	}
}

// increasing checks that revs strictly increase, naming each step.
func increasing(t *testing.T, steps []string, revs []int64) {
	t.Helper()
	for i := 1; i < len(revs); i++ {
		if revs[i] <= revs[i-1] {
			t.Errorf("revision after %s = %d, not greater than %d after %s", steps[i], revs[i], revs[i-1], steps[i-1])
		}
	}
}

func (s *suite) testRevisionsDelete(t *testing.T) {
	st := s.store(t)
	const key = "rev/key"
	e1 := mustCreate(t, st, key, []byte("a"), 0)
	e2 := mustCAS(t, st, key, e1.Revision, []byte("b"), 0)
	e3 := mustCAS(t, st, key, e2.Revision, []byte("c"), s.ttl)
	k, err := st.KeepAlive(t.Context(), key, e3.Revision, s.ttl)
	if err != nil {
		t.Fatalf("KeepAlive(%q, rev %d): %v", key, e3.Revision, err)
	}
	sameEntry(t, "KeepAlive", k, e3)
	mustDelete(t, st, key, e3.Revision)
	wantAbsent(t, st, key)
	e4 := mustCreate(t, st, key, []byte("d"), 0)
	mustDelete(t, st, key, e4.Revision)
	e5 := mustCAS(t, st, key, 0, []byte("e"), 0)

	for _, e := range []backends.Entry{e2, e3} {
		if e.CreateRevision != e1.CreateRevision {
			t.Errorf("CreateRevision after an update = %d, want %d (kept until delete)", e.CreateRevision, e1.CreateRevision)
		}
	}
	increasing(t,
		[]string{"create", "update", "update", "delete and create", "delete and CompareAndSet(rev 0)"},
		[]int64{e1.Revision, e2.Revision, e3.Revision, e4.CreateRevision, e5.CreateRevision})
	if e4.CreateRevision != e4.Revision || e5.CreateRevision != e5.Revision {
		t.Errorf("re-created entries %s, %s: want Revision == CreateRevision", show(e4), show(e5))
	}
}

func (s *suite) testRevisionsExpire(t *testing.T) {
	st := s.store(t)
	const key = "rev/expiring"
	e1 := mustCreate(t, st, key, []byte("a"), s.ttl)
	e2 := mustCAS(t, st, key, e1.Revision, []byte("b"), s.ttl)
	s.expire(t, st, e2)
	e3 := mustCreate(t, st, key, []byte("c"), s.ttl)
	s.expire(t, st, e3)
	e4 := mustCAS(t, st, key, 0, []byte("d"), 0)
	increasing(t,
		[]string{"create", "update", "expiry and create", "expiry and CompareAndSet(rev 0)"},
		[]int64{e1.Revision, e2.Revision, e3.CreateRevision, e4.CreateRevision})
}

func (s *suite) testRevisionsReopen(t *testing.T) {
	if s.h.Reopen == nil {
		t.Skip("Harness.Reopen is nil: the store does not persist")
	}
	st := s.store(t)
	const a, b = "reopen/a", "reopen/b"
	a1 := mustCreate(t, st, a, []byte("a1"), 0)
	a2 := mustCAS(t, st, a, a1.Revision, []byte("a2"), 0)
	b1 := mustCreate(t, st, b, []byte("b1"), 0)
	mustDelete(t, st, b, b1.Revision)

	st = s.reopen(t, st)
	sameEntry(t, fmt.Sprintf("Get(%q) after Reopen", a), mustGet(t, st, a), a2)
	wantAbsent(t, st, b)
	a3 := mustCAS(t, st, a, a2.Revision, []byte("a3"), 0)
	b2 := mustCreate(t, st, b, []byte("b2"), 0)
	mustDelete(t, st, a, a3.Revision)

	st = s.reopen(t, st)
	wantAbsent(t, st, a)
	sameEntry(t, fmt.Sprintf("Get(%q) after the second Reopen", b), mustGet(t, st, b), b2)
	a4 := mustCreate(t, st, a, []byte("a4"), 0)
	increasing(t,
		[]string{"create", "update", "reopen and update", "delete, reopen and create"},
		[]int64{a1.Revision, a2.Revision, a3.Revision, a4.CreateRevision})
	if b2.CreateRevision <= b1.Revision {
		t.Errorf("%q re-created after Reopen with token %d, want above its revision %d before the restart", b, b2.CreateRevision, b1.Revision)
	}
}

func (s *suite) reopen(t *testing.T, st backends.Store) backends.Store {
	t.Helper()
	n := s.h.Reopen(t, st)
	if n == nil {
		t.Fatal("Harness.Reopen returned a nil store")
	}
	return n
}

func (s *suite) testKeepAliveKeeps(t *testing.T) {
	st := s.store(t)
	const key = "keepalive/key"
	e := mustCreate(t, st, key, []byte("value"), s.ttl)
	k, err := st.KeepAlive(t.Context(), key, e.Revision, e.TTL)
	if err != nil {
		t.Fatalf("KeepAlive(%q, rev %d, %v): %v", key, e.Revision, e.TTL, err)
	}
	sameEntry(t, fmt.Sprintf("KeepAlive(%q, rev %d)", key, e.Revision), k, e)
	checkTTL(t, fmt.Sprintf("KeepAlive(%q, rev %d, %v)", key, e.Revision, e.TTL), k, e.TTL)
	got := mustGet(t, st, key)
	sameEntry(t, fmt.Sprintf("Get(%q) after KeepAlive", key), got, e)
	// A second keep-alive with the same revision still matches: it did not move.
	if _, err := st.KeepAlive(t.Context(), key, e.Revision, e.TTL); err != nil {
		t.Errorf("second KeepAlive(%q, rev %d): %v, want success (KeepAlive keeps the revision)", key, e.Revision, err)
	}
	// A keep-alive asking for another TTL either grants it, still keeping
	// revision and value, or refuses with ErrInvalid and changes nothing:
	// the contract lets a backend that cannot change a TTL in place (etcd
	// leases) refuse rather than shorten or rewrite.
	s.keepAliveNewTTL(t, st, e, 2*s.ttl, "a longer TTL")
	f := mustCreate(t, st, "keepalive/forever", []byte("f"), 0)
	s.keepAliveNewTTL(t, st, f, s.ttl, "a TTL for an entry without one")
}

// keepAliveNewTTL asks KeepAlive for ttl on e, which has another TTL.
func (s *suite) keepAliveNewTTL(t *testing.T, st backends.Store, e backends.Entry, ttl time.Duration, what string) {
	t.Helper()
	call := fmt.Sprintf("KeepAlive(%q, rev %d, %v), %s", e.Key, e.Revision, ttl, what)
	k, err := st.KeepAlive(t.Context(), e.Key, e.Revision, ttl)
	switch {
	case errors.Is(err, backends.ErrInvalid):
		got := mustGet(t, st, e.Key)
		sameEntry(t, call+" refused, then Get", got, e)
		if got.TTL != e.TTL {
			t.Errorf("%s was refused (%v) but the TTL changed from %v to %v", call, err, e.TTL, got.TTL)
		}
	case err != nil:
		t.Errorf("%s: %v, want success or an error wrapping ErrInvalid", call, err)
	default:
		sameEntry(t, call, k, e)
		checkTTL(t, call, k, ttl)
		got := mustGet(t, st, e.Key)
		sameEntry(t, call+", then Get", got, e)
		checkTTL(t, call+", then Get", got, ttl)
	}
}

func (s *suite) testKeepAliveExtends(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	const kept, dropped = "keepalive/kept", "keepalive/dropped"
	// kept is created first, so its original expiry is no later than dropped's.
	k := mustCreate(t, st, kept, []byte("k"), s.ttl)
	d := mustCreate(t, st, dropped, []byte("d"), s.ttl)
	ttl := max(k.TTL, d.TTL)

	if s.h.Elapse != nil {
		s.h.Elapse(ttl / 2)
		if _, err := st.KeepAlive(ctx, kept, k.Revision, s.ttl); err != nil {
			t.Fatalf("KeepAlive(%q, rev %d, %v) at half its TTL: %v", kept, k.Revision, s.ttl, err)
		}
		s.h.Elapse(ttl * 3 / 4) // 1.25 TTL after the creates, 0.75 TTL after the keep-alive
		wantAbsent(t, st, dropped)
		got, err := st.Get(ctx, kept)
		if err != nil {
			t.Fatalf("Get(%q) 1.25 TTL after create, 0.75 TTL after KeepAlive: %v, want present", kept, err)
		}
		sameEntry(t, fmt.Sprintf("Get(%q) after KeepAlive", kept), got, k)
		s.h.Elapse(ttl / 2) // 1.25 TTL after the keep-alive
		wantAbsent(t, st, kept)
		return
	}

	// Real time: keep kept alive until dropped is observed gone; kept's own
	// original TTL has run out by then too.
	err := s.poll(t, ttl+5*time.Second, func(ctx context.Context) (bool, error) {
		if _, err := st.KeepAlive(ctx, kept, k.Revision, s.ttl); err != nil {
			return false, fmt.Errorf("KeepAlive(%q, rev %d, %v): %w", kept, k.Revision, s.ttl, err)
		}
		_, err := st.Get(ctx, dropped)
		if errors.Is(err, backends.ErrNotFound) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("waiting for %q to expire while keeping %q alive: %v", dropped, kept, err)
	}
	got, err := st.Get(ctx, kept)
	if err != nil {
		t.Fatalf("Get(%q) kept alive past its original TTL: %v, want present", kept, err)
	}
	sameEntry(t, fmt.Sprintf("Get(%q) after KeepAlive", kept), got, k)
	s.waitAbsent(t, st, kept, ttl+5*time.Second)
}

func (s *suite) testExpiredAbsent(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	const prefix = "expiry/"
	keys := []string{"get", "list", "create", "cas", "cas0", "delete", "keepalive", "txn", "txn0"}
	old := map[string]backends.Entry{}
	var all []backends.Entry
	for _, k := range keys {
		e := mustCreate(t, st, prefix+k, []byte("old "+k), s.ttl)
		old[k] = e
		all = append(all, e)
	}
	keeper := mustCreate(t, st, prefix+"keeper", []byte("stays"), 0)
	s.expire(t, st, all...)

	got, err := st.List(ctx, prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	if len(got) != 1 {
		var ks []string
		for _, e := range got {
			ks = append(ks, e.Key)
		}
		t.Errorf("List(%q) after expiry = %q, want only %q", prefix, ks, keeper.Key)
	} else {
		sameEntry(t, fmt.Sprintf("List(%q)[0]", prefix), got[0], keeper)
	}
	wantAbsent(t, st, prefix+"get")

	c := mustCreate(t, st, prefix+"create", []byte("new"), 0)
	if c.CreateRevision <= old["create"].Revision {
		t.Errorf("CreateIfAbsent over an expired entry: token %d, want above the expired entry's revision %d", c.CreateRevision, old["create"].Revision)
	}
	c0 := mustCAS(t, st, prefix+"cas0", 0, []byte("new"), 0)
	if c0.CreateRevision <= old["cas0"].Revision {
		t.Errorf("CompareAndSet(rev 0) over an expired entry: token %d, want above the expired entry's revision %d", c0.CreateRevision, old["cas0"].Revision)
	}

	k, r := prefix+"cas", old["cas"].Revision
	_, err = st.CompareAndSet(ctx, k, r, []byte("new"), 0)
	conflictOf(t, fmt.Sprintf("CompareAndSet(%q, rev %d) of an expired entry", k, r), err, k, r, false)
	wantAbsent(t, st, k)

	k, r = prefix+"delete", old["delete"].Revision
	err = st.CompareAndDelete(ctx, k, r)
	conflictOf(t, fmt.Sprintf("CompareAndDelete(%q, rev %d) of an expired entry", k, r), err, k, r, false)

	k, r = prefix+"keepalive", old["keepalive"].Revision
	_, err = st.KeepAlive(ctx, k, r, s.ttl)
	conflictOf(t, fmt.Sprintf("KeepAlive(%q, rev %d) of an expired entry", k, r), err, k, r, false)
	wantAbsent(t, st, k)

	if tx, ok := st.(backends.Txner); ok && st.Capabilities().Has(backends.CapTxn) {
		k, r = prefix+"txn", old["txn"].Revision
		_, err = tx.Txn(ctx, []backends.Cond{{Key: k, Revision: r}}, []backends.Op{{Kind: backends.OpPut, Key: k, Value: []byte("new")}})
		conflictOf(t, fmt.Sprintf("Txn(cond %q at rev %d) of an expired entry", k, r), err, k, r, false)
		wantAbsent(t, st, k)
		k = prefix + "txn0"
		res, err := tx.Txn(ctx, []backends.Cond{{Key: k, Revision: 0}}, []backends.Op{{Kind: backends.OpPut, Key: k, Value: []byte("new")}})
		if err != nil {
			t.Errorf("Txn(cond %q absent) over an expired entry: %v, want success", k, err)
		} else if res.Entries[0].CreateRevision <= old["txn0"].Revision {
			t.Errorf("Txn put over an expired entry: token %d, want above %d", res.Entries[0].CreateRevision, old["txn0"].Revision)
		}
	}
}
