package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/internal/wire"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// requestLog records the requests a store sends, as "METHOD name" (name is
// the Lease's, or "" for a list), and can run a hook before one is sent.
type requestLog struct {
	mu     sync.Mutex
	seen   []string
	before func(method, name string) // run before a request is sent; may be nil
}

func (rl *requestLog) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Query().Get("watch") == "true" {
				return rt.RoundTrip(r)
			}
			name := ""
			if i := strings.LastIndex(r.URL.Path, "/leases/"); i >= 0 {
				name = r.URL.Path[i+len("/leases/"):]
			}
			rl.mu.Lock()
			rl.seen = append(rl.seen, r.Method+" "+name)
			hook := rl.before
			rl.mu.Unlock()
			if hook != nil {
				hook(r.Method, name)
			}
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

// take returns the requests recorded since the last take.
func (rl *requestLog) take() []string {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	out := rl.seen
	rl.seen = nil
	return out
}

func (rl *requestLog) hook(f func(method, name string)) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.before = f
}

func (o *owner) pendingLen() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.queue.Len()
}

// settled reports whether the store's batcher has nothing to do at the
// current time: no call waits, no batch runs, and no bound has passed (so
// every claim nobody kept alive has been cleared). Per-claim stores are
// always settled.
func (s *Store) settled() bool {
	if s.own == nil || s.checkOpen() != nil {
		return true
	}
	o := s.own
	now := s.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.busy || o.queue.Len() > 0 {
		return false
	}
	for _, b := range o.bounds {
		if !now.Before(b) {
			return false
		}
	}
	return true
}

// debug describes the batcher's state, for a test that finds it unsettled.
func (o *owner) debug() string {
	if o == nil {
		return "per-claim mode"
	}
	now := o.s.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprintf("busy %v pending %d failedAt %v now %v bounds %v", o.busy, o.queue.Len(), o.failedAt, now, o.bounds)
}

// sessionOf reads the session Lease that key's claim names.
func (c *cluster) sessionOf(t testing.TB, s *Store, key string) *coordinationv1.Lease {
	t.Helper()
	l := c.lease(t, s, key)
	name := l.Labels[LabelSession]
	if name == "" {
		t.Fatalf("claim %q names no session; labels %v", key, l.Labels)
	}
	sess, err := c.admin.CoordinationV1().Leases(s.namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get session %s of %q: %v", name, key, err)
	}
	return sess
}

// wantHeld fails the test unless h's TryAcquire of key finds it held.
func wantHeld(t *testing.T, l backends.Locker, key string, h backends.Holder, when string) {
	t.Helper()
	if _, err := l.TryAcquire(t.Context(), key, h, ttl); !errors.Is(err, backends.ErrHeld) {
		t.Fatalf("TryAcquire(%q) %s = %v, want ErrHeld", key, when, err)
	}
}

// untouched fails the test if the Lease l was written since it was read.
func (c *cluster) untouched(t *testing.T, l *coordinationv1.Lease, after string) {
	t.Helper()
	now, err := c.admin.CoordinationV1().Leases(l.Namespace).Get(t.Context(), l.Name, metav1.GetOptions{})
	if err != nil || now.ResourceVersion != l.ResourceVersion {
		t.Errorf("foreign Lease %s %s: rv %s, %v; want untouched at %s", l.Name, after, now.ResourceVersion, err, l.ResourceVersion)
	}
}

// pair is two processes (stores a and b, and their lockers) in a fresh
// namespace, on one fake clock.
type pair struct {
	ns     string
	clk    *clocktest.Clock
	a, b   *Store
	la, lb *backends.StoreLocker
}

func (c *cluster) pair(t *testing.T) pair {
	t.Helper()
	p := pair{ns: c.namespace(t), clk: clocktest.New(time.Time{})}
	p.a, p.b = c.store(t, p.ns, p.clk, nil), c.store(t, p.ns, p.clk, nil)
	p.la, p.lb = newLocker(t, p.a), newLocker(t, p.b)
	return p
}

// TestSession covers session mode against a real API server: its cost, and
// each case the package doc answers.
func TestSession(t *testing.T) {
	c := startCluster(t).with([]Option{WithSession(0)})
	t.Run("OneRenewalForManyClaims", func(t *testing.T) { testOneRenewal(t, c) })
	t.Run("TakeoverEndsTheSession", func(t *testing.T) { testTakeoverEndsSession(t, c) })
	t.Run("RenewalBeatsTheEnd", func(t *testing.T) { testRenewalBeatsEnd(t, c) })
	t.Run("DeletedSession", func(t *testing.T) { testDeletedSession(t, c) })
	t.Run("SessionThatNeverExisted", func(t *testing.T) { testNoSuchSession(t, c) })
	t.Run("ForeignObjectAtSessionName", func(t *testing.T) { testForeignSession(t, c) })
	t.Run("ForeignLeaseLabelledWithTheSession", func(t *testing.T) { testForeignInSession(t, c) })
	t.Run("DuplicateIdentities", func(t *testing.T) { testDuplicateIdentities(t, c) })
	t.Run("UnrenewedClaimIsCleared", func(t *testing.T) { testUnrenewedCleared(t, c) })
	t.Run("PerClaimObserver", func(t *testing.T) { testPerClaimObserver(t, c) })
	t.Run("CloseDeletesUnusedSessions", func(t *testing.T) { testCloseRetires(t, c) })
	t.Run("ClearRacesAnotherWrite", func(t *testing.T) { testClearRaces(t, c) })
	t.Run("NewSessionWhileARenewalWaits", func(t *testing.T) { testRenewalMoves(t, c) })
}

// A renewal waits for its batch while the store starts a new session (a
// claim of a shorter TTL found the old one unrenewed for that TTL): the
// renewal is not lost, its claim moves into the new session.
func testRenewalMoves(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	a := c.store(t, ns, clk, nil, WithSession(time.Hour))
	la := newLocker(t, a)
	long, err := la.TryAcquire(ctx, "long", newHolder(t, "a"), 2*ttl)
	if err != nil {
		t.Fatal(err)
	}
	old := c.sessionOf(t, a, "long").Name
	if long, err = la.Renew(ctx, long); err != nil { // the store's first batch runs at once
		t.Fatal(err)
	}
	clk.Add(ttl)
	done := make(chan error, 1)
	go func() {
		_, err := la.Renew(ctx, long) // waits a quarter of its TTL (1 s) for its batch
		done <- err
	}()
	if err := waitFor(ctx, func() bool { return a.own.pendingLen() == 1 }); err != nil {
		t.Fatal(err)
	}
	if _, err := la.TryAcquire(ctx, "short", newHolder(t, "a"), ttl); err != nil {
		t.Fatal(err)
	}
	renewed := c.sessionOf(t, a, "short").Name
	if renewed == old {
		t.Fatalf("claim of TTL %v written into a session unrenewed for %v", ttl, ttl)
	}
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl / 2) // the renewal's batch is due; "short" is still within its TTL
	if err := <-done; err != nil {
		t.Fatalf("Renew that waited while the store started a new session: %v", err)
	}
	if got := c.sessionOf(t, a, "long").Name; got != renewed {
		t.Errorf("renewed claim in session %s, want the new session %s", got, renewed)
	}
}

// A claim the batch would clear changes between the batch's List and its
// clearing update (here out of band): the clear loses, and the other
// claims of the batch are renewed all the same, not failed as conflicts.
func testClearRaces(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	var rl requestLog
	// Batches wait for their calls' TTL/4, and no batch clears on its own
	// before the interval: the clear happens in the batch that renews.
	a := c.store(t, ns, clk, rl.config(c.srv.RESTConfig()), WithSession(time.Hour))
	la := newLocker(t, a)
	kept, err := la.TryAcquire(ctx, "kept", newHolder(t, "a"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := la.TryAcquire(ctx, "left", newHolder(t, "a"), ttl); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl / 2)
	if kept, err = la.Renew(ctx, kept); err != nil {
		t.Fatal(err)
	}
	left := a.LeaseName("left")
	var raced error
	var once sync.Once
	rl.hook(func(method, name string) {
		if method != http.MethodPut || name != left {
			return
		}
		once.Do(func() {
			l, err := c.admin.CoordinationV1().Leases(ns).Get(ctx, left, metav1.GetOptions{})
			if err == nil {
				l.Annotations["example.com/touched"] = "yes"
				_, err = c.admin.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
			}
			raced = err
		})
	})
	clk.Add(ttl / 2) // "left" was last written a TTL ago: the batch clears it
	done := make(chan error, 1)
	go func() {
		_, err := la.Renew(ctx, kept)
		done <- err
	}()
	if err := waitFor(ctx, func() bool { return a.own.pendingLen() == 1 }); err != nil {
		t.Fatal(err)
	}
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl / 4)
	err = <-done
	rl.hook(nil)
	if raced != nil {
		t.Fatalf("out-of-band write during the batch: %v", raced)
	}
	if err != nil {
		t.Errorf("Renew of a claim whose batch lost a clear to another write: %v, want success", err)
	}
}

// Close deletes a session that no claim names, and keeps one that a claim
// still names (its claims expire a TTL after its last renewal).
func testCloseRetires(t *testing.T, c *cluster) {
	ctx := t.Context()
	p := c.pair(t)
	released, err := p.la.TryAcquire(ctx, "released", newHolder(t, "a"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	unused := c.sessionOf(t, p.a, "released").Name
	if err := p.la.Release(ctx, released); err != nil {
		t.Fatal(err)
	}
	if _, err := p.lb.TryAcquire(ctx, "held", newHolder(t, "b"), ttl); err != nil {
		t.Fatal(err)
	}
	used := c.sessionOf(t, p.b, "held").Name
	for _, s := range []*Store{p.a, p.b} {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	leases := c.admin.CoordinationV1().Leases(p.ns)
	if _, err := leases.Get(ctx, unused, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("session no claim names, after Close: %v, want NotFound", err)
	}
	if _, err := leases.Get(ctx, used, metav1.GetOptions{}); err != nil {
		t.Errorf("session a claim names, after Close: %v, want it kept", err)
	}
}

// A hundred KeepAlive calls cost one List and one update of the session,
// and leave every claim object as it was.
func testOneRenewal(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	var rl requestLog
	s := c.store(t, ns, clk, rl.config(c.srv.RESTConfig()), WithSession(time.Hour))
	const n = 100
	entries := make([]backends.Entry, n)
	for i := range entries {
		var err error
		if entries[i], err = s.CreateIfAbsent(ctx, fmt.Sprintf("shard/%d", i), nil, ttl); err != nil {
			t.Fatal(err)
		}
	}
	// The first batch of a store runs at once; the next one waits for its
	// interval, or for its calls' TTLs (a quarter of the TTL).
	if _, err := s.KeepAlive(ctx, "shard/0", entries[0].Revision, ttl); err != nil {
		t.Fatal(err)
	}
	session := c.sessionOf(t, s, "shard/0").Name
	rl.take()
	errs := make([]error, n)
	got := make([]backends.Entry, n)
	var wg sync.WaitGroup
	for i := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = s.KeepAlive(ctx, entries[i].Key, entries[i].Revision, ttl)
		}()
	}
	if err := waitFor(ctx, func() bool { return s.own.pendingLen() == n }); err != nil {
		t.Fatalf("%d calls waiting, want %d: %v", s.own.pendingLen(), n, err)
	}
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl / 4)
	wg.Wait()
	for i, err := range errs {
		if err != nil || got[i].Revision != entries[i].Revision || got[i].Remaining != ttl {
			t.Errorf("KeepAlive(%q) = rev %d remaining %v, %v; want rev %d, a full TTL", entries[i].Key, got[i].Revision, got[i].Remaining, err, entries[i].Revision)
		}
	}
	want := []string{"GET ", "PUT " + session}
	if reqs := rl.take(); fmt.Sprint(reqs) != fmt.Sprint(want) {
		t.Errorf("requests for %d keep-alives = %q, want %q", n, reqs, want)
	}
	for _, e := range entries {
		if rv := c.lease(t, s, e.Key).ResourceVersion; rv != strconv.FormatInt(e.Revision, 10) {
			t.Errorf("claim %q at resourceVersion %s after the batch, want %d (untouched)", e.Key, rv, e.Revision)
		}
	}
}

// A claim whose session stood unchanged for a TTL is taken over after the
// taker ends the session: the old holder loses that claim and every other
// one of the session at its next renewal, and its next claim goes into a
// new session. Tokens increase.
func testTakeoverEndsSession(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	// a is cut off from the API server while its claims expire: otherwise
	// its own batches would clear them once their holders' deadlines pass,
	// and b would find them released instead of taking them over.
	cut := new(atomic.Bool)
	a := c.store(t, ns, clk, crashable(c.srv.RESTConfig(), cut))
	b := c.store(t, ns, clk, nil)
	la, lb := newLocker(t, a), newLocker(t, b)
	follow(t, b)
	x, err := la.TryAcquire(ctx, "x", newHolder(t, "a"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	y, err := la.TryAcquire(ctx, "y", newHolder(t, "a"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	old := c.sessionOf(t, a, "x")
	if err := c.syncWatches(ctx, []*Store{b}); err != nil {
		t.Fatal(err)
	}
	cut.Store(true)
	clk.Add(ttl - time.Millisecond)
	wantHeld(t, lb, "x", newHolder(t, "b"), "just before the TTL")
	clk.Add(time.Millisecond)
	took, err := lb.TryAcquire(ctx, "x", newHolder(t, "b"), ttl)
	if err != nil {
		t.Fatalf("TryAcquire after the session stood a TTL: %v", err)
	}
	cut.Store(false)
	if took.Token <= x.Token {
		t.Errorf("takeover token %d, want above %d", took.Token, x.Token)
	}
	ended, err := c.admin.CoordinationV1().Leases(ns).Get(ctx, old.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ended.Annotations[AnnotationEnded]; got != old.ResourceVersion {
		t.Errorf("session after the takeover: %s=%q, want the version it was ended at, %s", AnnotationEnded, got, old.ResourceVersion)
	}
	for _, cl := range []backends.Claim{x, y} {
		if _, err := la.Renew(ctx, cl); backends.Classify(err) != backends.ClassLost {
			t.Errorf("old holder's Renew(%q) after its session ended = %v, want class lost", cl.Key, err)
		}
	}
	z, err := la.TryAcquire(ctx, "z", newHolder(t, "a"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if now := c.sessionOf(t, a, "z").Name; now == old.Name {
		t.Errorf("new claim written into the ended session %s", now)
	}
	if _, err := la.Renew(ctx, z); err != nil {
		t.Errorf("Renew of a claim of the new session: %v", err)
	}
}

// The taker judged the session expired, but the holder's renewal, begun
// just inside its deadline, lands between the taker's read of the session
// and its end of it: the end, conditioned on the version read, fails, and
// the claim is still held.
func testRenewalBeatsEnd(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clkA, clkB := clocktest.New(time.Time{}), clocktest.New(time.Time{})
	a := c.store(t, ns, clkA, nil)
	var rl requestLog
	b := c.store(t, ns, clkB, rl.config(c.srv.RESTConfig()))
	la := newLocker(t, a)
	x, err := la.TryAcquire(ctx, "x", newHolder(t, "a"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	session := c.sessionOf(t, a, "x").Name
	lb := newLocker(t, b)
	wantHeld(t, lb, "x", newHolder(t, "b"), "at once")
	clkA.Add(ttl - time.Millisecond) // the holder's renewal starts just in time
	clkB.Add(ttl)
	var renewed error
	var once sync.Once
	rl.hook(func(method, name string) {
		if method == http.MethodPut && name == session {
			once.Do(func() { _, renewed = la.Renew(ctx, x) })
		}
	})
	_, err = lb.TryAcquire(ctx, "x", newHolder(t, "b"), ttl)
	rl.hook(nil)
	if renewed != nil {
		t.Fatalf("holder's Renew just before the end: %v", renewed)
	}
	if !errors.Is(err, backends.ErrHeld) {
		t.Fatalf("TryAcquire whose end of the session lost the race = %v, want ErrHeld", err)
	}
	if _, err := la.Renew(ctx, x); err != nil {
		t.Errorf("holder's Renew after the failed takeover: %v", err)
	}
	if _, ok := c.sessionOf(t, a, "x").Annotations[AnnotationEnded]; ok {
		t.Error("session ended though its holder renewed it first")
	}
}

// A session Lease deleted out of band: its holder loses its claims at the
// next renewal and never recreates it; an observer counts the deletion as
// a change and waits a full TTL from seeing it before taking a claim.
func testDeletedSession(t *testing.T, c *cluster) {
	ctx := t.Context()
	p := c.pair(t)
	ns, clk, a, la, lb := p.ns, p.clk, p.a, p.la, p.lb
	x, err := la.TryAcquire(ctx, "x", newHolder(t, "a"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	session := c.sessionOf(t, a, "x").Name
	wantHeld(t, lb, "x", newHolder(t, "b"), "at once")
	clk.Add(ttl / 2)
	if err := c.admin.CoordinationV1().Leases(ns).Delete(ctx, session, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := la.Renew(ctx, x); backends.Classify(err) != backends.ClassLost {
		t.Errorf("Renew after the session was deleted = %v, want class lost", err)
	}
	if _, err := c.admin.CoordinationV1().Leases(ns).Get(ctx, session, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("session after the holder's failed renewal: %v, want NotFound (never recreated)", err)
	}
	// b saw the session alive; now it sees it gone: a change, timed from now.
	clk.Add(ttl / 2)
	wantHeld(t, lb, "x", newHolder(t, "b"), "when first seeing the session gone")
	clk.Add(ttl - time.Millisecond)
	wantHeld(t, lb, "x", newHolder(t, "b"), "just before a TTL from seeing the session gone")
	clk.Add(time.Millisecond)
	took, err := lb.TryAcquire(ctx, "x", newHolder(t, "b"), ttl)
	if err != nil {
		t.Fatalf("TryAcquire a TTL after seeing the session gone: %v", err)
	}
	if took.Token <= x.Token {
		t.Errorf("token %d, want above %d", took.Token, x.Token)
	}
}

// claimObject is a claim Lease for key as a store in session mode writes
// it, naming session.
func claimObject(s *Store, key, session string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: s.LeaseName(key), Namespace: s.namespace}}
	_ = apply(l, key, write{value: wire.EncodeClaim(wire.Claim{ID: "ghost", Nonce: "0123456789abcdef"}), ttl: ttl, session: session}, time.Now())
	return l
}

// A claim naming a session that never existed is no free claim: it stands
// a full TTL from when it was first seen, like any other, and taking it
// creates nothing at the session's name.
func testNoSuchSession(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	b := c.store(t, ns, clk, nil)
	ghost, err := newSessionName()
	if err != nil {
		t.Fatal(err)
	}
	obj, err := c.admin.CoordinationV1().Leases(ns).Create(ctx, claimObject(b, "x", ghost), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lb := newLocker(t, b)
	wantHeld(t, lb, "x", newHolder(t, "b"), "at once")
	clk.Add(ttl - time.Millisecond)
	wantHeld(t, lb, "x", newHolder(t, "b"), "just before a TTL")
	clk.Add(time.Millisecond)
	took, err := lb.TryAcquire(ctx, "x", newHolder(t, "b"), ttl)
	if err != nil {
		t.Fatalf("TryAcquire after a TTL: %v", err)
	}
	if rv, _ := parseRV(obj.ResourceVersion); took.Token <= rv {
		t.Errorf("token %d, want above the ghost claim's %d", took.Token, rv)
	}
	if _, err := c.admin.CoordinationV1().Leases(ns).Get(ctx, ghost, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Lease at the ghost session's name after the takeover: %v, want NotFound", err)
	}
}

// A Lease that is no session (client-go's, say) at the name a claim gives
// as its session is dead for the claim: the claim stands a TTL, is then
// taken, and the foreign Lease is never written.
func testForeignSession(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	b := c.store(t, ns, clk, nil)
	name, err := newSessionName()
	if err != nil {
		t.Fatal(err)
	}
	holder := "pod-a"
	foreign, err := c.admin.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr(int32(15))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.admin.CoordinationV1().Leases(ns).Create(ctx, claimObject(b, "x", name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lb := newLocker(t, b)
	wantHeld(t, lb, "x", newHolder(t, "b"), "at once")
	clk.Add(ttl)
	if _, err := lb.TryAcquire(ctx, "x", newHolder(t, "b"), ttl); err != nil {
		t.Fatalf("TryAcquire after a TTL: %v", err)
	}
	c.untouched(t, foreign, "after the takeover")
}

// A Lease that carries a session's label but is no claim of tenure's is
// neither renewed nor cleared by the session's batches.
func testForeignInSession(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	a := c.store(t, ns, clk, nil)
	e, err := a.CreateIfAbsent(ctx, "x", nil, ttl)
	if err != nil {
		t.Fatal(err)
	}
	session := c.sessionOf(t, a, "x").Name
	holder := "pod-a"
	foreign, err := c.admin.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "my-controller", Labels: map[string]string{LabelManaged: "true", LabelSession: session}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl / 2)
	if _, err := a.KeepAlive(ctx, "x", e.Revision, ttl); err != nil {
		t.Fatal(err)
	}
	c.untouched(t, foreign, "after a batch")
}

// Two processes under one identity get a session each; the claim is held
// by one of them only, and the other takes it over only after ending the
// first one's session.
func testDuplicateIdentities(t *testing.T, c *cluster) {
	ctx := t.Context()
	p := c.pair(t)
	ns, clk, a, b, la, lb := p.ns, p.clk, p.a, p.b, p.la, p.lb
	ha, hb := newHolder(t, "node-1"), newHolder(t, "node-1")
	xa, err := la.TryAcquire(ctx, "x", ha, ttl)
	if err != nil {
		t.Fatal(err)
	}
	wantHeld(t, lb, "x", hb, "by a second process of the same identity")
	yb, err := lb.TryAcquire(ctx, "y", hb, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if sa, sb := c.sessionOf(t, a, "x").Name, c.sessionOf(t, b, "y").Name; sa == sb {
		t.Fatalf("two processes share session %s", sa)
	}
	// While a renews, b cannot take x.
	for range 3 {
		clk.Add(ttl / 2)
		if xa, err = la.Renew(ctx, xa); err != nil {
			t.Fatal(err)
		}
		if yb, err = lb.Renew(ctx, yb); err != nil {
			t.Fatal(err)
		}
		if _, err := lb.TryAcquire(ctx, "x", hb, ttl); !errors.Is(err, backends.ErrHeld) {
			t.Fatalf("TryAcquire while a renews = %v, want ErrHeld", err)
		}
	}
	// a crashes: its batches stop. b takes x, but not before a TTL after
	// a's last renewal, and only by ending a's session.
	lastRenewal := clk.Now()
	session := c.sessionOf(t, a, "x")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	var xb backends.Claim
	for range 8 {
		clk.Add(ttl / 2)
		if yb, err = lb.Renew(ctx, yb); err != nil {
			t.Fatal(err)
		}
		if xb, err = lb.TryAcquire(ctx, "x", hb, ttl); err == nil {
			break
		}
		if !errors.Is(err, backends.ErrHeld) {
			t.Fatal(err)
		}
	}
	if err != nil {
		t.Fatalf("TryAcquire 4 TTLs after a crashed: %v", err)
	}
	if since := clk.Since(lastRenewal); since < ttl {
		t.Errorf("b took x %v after a's last renewal, want at least the TTL %v", since, ttl)
	}
	if xb.Token <= xa.Token {
		t.Errorf("token %d, want above %d", xb.Token, xa.Token)
	}
	ended, err := c.admin.CoordinationV1().Leases(ns).Get(ctx, session.Name, metav1.GetOptions{})
	if err != nil || ended.Annotations[AnnotationEnded] == "" {
		t.Errorf("a's session after the takeover: %v, annotations %v; want it ended", err, ended.Annotations)
	}
	if _, err := lb.Renew(ctx, yb); err != nil {
		t.Errorf("b's other claim: Renew = %v, want success (its session lives)", err)
	}
}

// A claim of a session that its holder stopped renewing (left to expire)
// is not kept alive by the batches that renew the session for the other
// claims: once its holder's deadline has passed, a batch clears it.
func testUnrenewedCleared(t *testing.T, c *cluster) {
	ctx := t.Context()
	p := c.pair(t)
	clk, a, la, lb := p.clk, p.a, p.la, p.lb
	kept, err := la.TryAcquire(ctx, "kept", newHolder(t, "a"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	left, err := la.TryAcquire(ctx, "left", newHolder(t, "a"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		clk.Add(ttl / 2)
		if kept, err = la.Renew(ctx, kept); err != nil {
			t.Fatal(err)
		}
	}
	// The holder of "left" stopped a TTL ago: the last batch cleared it.
	if l := c.lease(t, a, "left"); l.Spec.HolderIdentity != nil || l.Labels[LabelSession] != "" {
		t.Errorf("claim left to expire still held by %v in session %q, want cleared", deref(l.Spec.HolderIdentity), l.Labels[LabelSession])
	}
	took, err := lb.TryAcquire(ctx, "left", newHolder(t, "b"), ttl)
	if err != nil {
		t.Fatalf("TryAcquire of the cleared claim: %v", err)
	}
	if took.Token <= left.Token {
		t.Errorf("token %d, want above %d", took.Token, left.Token)
	}
	if _, err := la.Renew(ctx, kept); err != nil {
		t.Errorf("Renew of the claim kept alive: %v", err)
	}
}

// A store in per-claim mode judges claims of sessions by the same rule:
// renewals of the session keep the claim alive for it, and it takes the
// claim only after ending the session.
func testPerClaimObserver(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	a := c.store(t, ns, clk, nil)
	b, err := New(c.admin, WithNamespace(ns), WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	la, lb := newLocker(t, a), newLocker(t, b)
	x, err := la.TryAcquire(ctx, "x", newHolder(t, "a"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		clk.Add(ttl / 2)
		if x, err = la.Renew(ctx, x); err != nil {
			t.Fatal(err)
		}
		if _, err := lb.TryAcquire(ctx, "x", newHolder(t, "b"), ttl); !errors.Is(err, backends.ErrHeld) {
			t.Fatalf("per-claim TryAcquire of a claim whose session is renewed = %v, want ErrHeld", err)
		}
	}
	clk.Add(ttl)
	took, err := lb.TryAcquire(ctx, "x", newHolder(t, "b"), ttl)
	if err != nil {
		t.Fatalf("per-claim TryAcquire after the session stood a TTL: %v", err)
	}
	if l := c.lease(t, b, "x"); l.Labels[LabelSession] != "" {
		t.Errorf("per-claim store wrote the claim into session %q", l.Labels[LabelSession])
	}
	if took.Token <= x.Token {
		t.Errorf("token %d, want above %d", took.Token, x.Token)
	}
	if _, err := la.Renew(ctx, x); backends.Classify(err) != backends.ClassLost {
		t.Errorf("old holder's Renew = %v, want class lost", err)
	}
}

// TestSessionOptions checks what New refuses in session mode, without a
// server.
func TestSessionOptions(t *testing.T) {
	for name, opts := range map[string][]Option{
		"negative interval": {WithSession(-time.Second)},
		"with lease names":  {WithSession(0), WithLeaseNames(map[string]string{"k": "my-lease"})},
	} {
		if s, err := New(offline(), opts...); !errors.Is(err, backends.ErrInvalid) {
			if s != nil {
				_ = s.Close()
			}
			t.Errorf("New with %s = %v, want ErrInvalid", name, err)
		}
	}
}
