package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/clocktest"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

const ttl = 2 * time.Second

func newHolder(t *testing.T, id string) backends.Holder {
	t.Helper()
	h, err := backends.NewHolder(id)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func newLocker(t *testing.T, s *Store) *backends.StoreLocker {
	t.Helper()
	l, err := backends.NewLocker(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestKube groups the tests that need a real API server, so that they share
// one: each subtest works in its own namespace. Each runs once per renewal
// mode.
func TestKube(t *testing.T) {
	c0 := startCluster(t)
	for _, m := range modes {
		c := c0.with(m.opts)
		t.Run(m.name, func(t *testing.T) {
			t.Run("TokensSurviveOutOfBandDelete", func(t *testing.T) { testOutOfBandDelete(t, c) })
			t.Run("ReleaseKeepsTheObject", func(t *testing.T) { testReleaseKeepsObject(t, c) })
			t.Run("KeepAliveMovesResourceVersionOnly", func(t *testing.T) { testKeepAliveRV(t, c) })
			t.Run("SkewedClocks", func(t *testing.T) { testSkewedClocks(t, c) })
			t.Run("FreshProcessObservesFullTTL", func(t *testing.T) { testFreshProcess(t, c) })
			if m.opts == nil {
				// Adopted Leases (WithLeaseNames) are per-claim only.
				t.Run("ClientGoLease", func(t *testing.T) { testClientGoLease(t, c) })
			}
			t.Run("ClientGoTakeover", func(t *testing.T) { testClientGoTakeover(t, c) })
			t.Run("TokenWithoutRights", func(t *testing.T) { testForbidden(t, c) })
			t.Run("MissingNamespace", func(t *testing.T) { testMissingNamespace(t, c) })
			t.Run("ForeignObjectAtHashedName", func(t *testing.T) { testForeignName(t, c) })
			t.Run("WatchStartsAndStops", func(t *testing.T) { testWatchLifecycle(t, c) })
			t.Run("StalledWatchStillReportsExpiry", func(t *testing.T) { testStalledWatchExpiry(t, c) })
			t.Run("StalledWatchReportsExpiryOfARenewal", func(t *testing.T) { testStalledWatchRenewalExpiry(t, c) })
			t.Run("StalledWatchEndsWithinItsLifetime", func(t *testing.T) { testStalledWatchLifetime(t, c) })
			t.Run("Observer", func(t *testing.T) { testObserver(t, c) })
		})
	}
	// Last: it restarts the API server under every other store.
	for _, m := range modes {
		c := c0.with(m.opts)
		t.Run(m.name+"/APIServerRestartMidLease", func(t *testing.T) { testRestart(t, c) })
	}
}

// An object deleted behind tenure's back (kubectl delete) must not let a
// token repeat: the next create gets a resourceVersion above every one the
// old object had.
func testOutOfBandDelete(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	s := c.store(t, ns, clk, nil)
	l := newLocker(t, s)
	const key = "jobs/indexer leader"

	first, err := l.TryAcquire(ctx, key, newHolder(t, "a"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	renewed, err := l.Renew(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	last := c.lease(t, s, key)
	lastRV, _ := parseRV(last.ResourceVersion)
	if err := c.admin.CoordinationV1().Leases(ns).Delete(ctx, s.LeaseName(key), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The holder finds out at its next renewal.
	if _, err := l.Renew(ctx, renewed); backends.Classify(err) != backends.ClassLost {
		t.Errorf("Renew after the object was deleted = %v, want class lost", err)
	}
	// A second process, which never saw the old object, takes the key.
	s2 := c.store(t, ns, clk, nil)
	second, err := newLocker(t, s2).TryAcquire(ctx, key, newHolder(t, "b"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if second.Token <= lastRV || second.Token <= first.Token {
		t.Errorf("token after an out-of-band delete = %d, want above the old object's last resourceVersion %d and token %d", second.Token, lastRV, first.Token)
	}
	// And the first process, which still remembers the old object, sees the
	// new holder rather than its own stale claim.
	hs, err := l.Holders(ctx, key)
	if err != nil || len(hs) != 1 || hs[0].Token != second.Token {
		t.Errorf("Holders from the first process = %+v, %v; want the second holder with token %d", hs, err, second.Token)
	}
}

// Release clears the object instead of deleting it; a cleared object reads
// as absent, and the next token is above the released one.
func testReleaseKeepsObject(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	s := c.store(t, ns, clocktest.New(time.Time{}), nil)
	l := newLocker(t, s)
	const key = "release"
	le, err := l.TryAcquire(ctx, key, newHolder(t, "a"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, le); err != nil {
		t.Fatal(err)
	}
	obj := c.lease(t, s, key)
	if obj.Spec.HolderIdentity != nil {
		t.Errorf("released Lease holderIdentity = %q, want cleared", *obj.Spec.HolderIdentity)
	}
	if obj.Annotations[AnnotationKey] != key {
		t.Errorf("released Lease key annotation = %q, want %q", obj.Annotations[AnnotationKey], key)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Get of a released key = %v, want ErrNotFound", err)
	}
	again, err := l.TryAcquire(ctx, key, newHolder(t, "b"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if again.Token <= le.Revision {
		t.Errorf("token after release = %d, want above %d", again.Token, le.Revision)
	}
}

// KeepAlive rewrites renewTime, so the resourceVersion moves and observers
// restart their expiry clocks, while the logical Revision stays put.
func testKeepAliveRV(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	s := c.store(t, ns, clk, nil)
	e, err := s.CreateIfAbsent(ctx, "k", []byte("v"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	before := c.lease(t, s, "k")
	clk.Add(time.Second)
	k, err := s.KeepAlive(ctx, "k", e.Revision, 3*ttl)
	if err != nil {
		t.Fatal(err)
	}
	after := c.lease(t, s, "k")
	if before.ResourceVersion == after.ResourceVersion {
		t.Errorf("KeepAlive left resourceVersion at %s, want it moved", after.ResourceVersion)
	}
	if k.Revision != e.Revision || k.CreateRevision != e.CreateRevision {
		t.Errorf("KeepAlive = rev %d create %d, want %d %d", k.Revision, k.CreateRevision, e.Revision, e.CreateRevision)
	}
	if !after.Spec.RenewTime.After(before.Spec.RenewTime.Time) {
		t.Errorf("renewTime %v after KeepAlive, want after %v", after.Spec.RenewTime, before.Spec.RenewTime)
	}
	if got := deref(after.Spec.LeaseDurationSeconds); got != 6 {
		t.Errorf("leaseDurationSeconds = %d, want 6", got)
	}
	// A sub-second TTL is exact for tenure and rounded up for the spec.
	if _, err := s.KeepAlive(ctx, "k", e.Revision, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := deref(c.lease(t, s, "k").Spec.LeaseDurationSeconds); got != 2 {
		t.Errorf("leaseDurationSeconds for 1.5s = %d, want 2 (rounded up)", got)
	}
	if got, err := s.Get(ctx, "k"); err != nil || got.TTL != 1500*time.Millisecond {
		t.Errorf("Get after KeepAlive(1.5s) = TTL %v, %v; want 1.5s", got.TTL, err)
	}
	// Two keep-alives at one instant of the writer's clock (renewTime
	// repeats, as after a wall clock set back): each must still move the
	// resourceVersion, or observers would not restart their count while
	// the holder extends its deadline.
	for i := range 2 {
		before := c.renewed(t, s, "k").ResourceVersion
		if _, err := s.KeepAlive(ctx, "k", e.Revision, 1500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if after := c.renewed(t, s, "k").ResourceVersion; after == before {
			t.Errorf("keep-alive %d at an unchanged clock left resourceVersion at %s", i+1, after)
		}
	}
}

// Two processes whose wall clocks disagree by an hour, one of them also
// running fast: neither takes the other's claim before it has itself seen
// the claim unchanged for the TTL, whatever renewTime says.
func testSkewedClocks(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		holderOffset time.Duration // holder's wall clock relative to the observer's
		rate         float64       // observer's clock rate relative to real (fake) time
	}{
		{"holder an hour behind", -time.Hour, 1},
		{"holder an hour ahead", time.Hour, 1},
		{"observer an hour behind and 1% fast", time.Hour, 1.01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holderClk := clocktest.New(base.Add(tc.holderOffset))
			obsClk := clocktest.New(base)
			obsView := obsClk.Skewed(tc.rate)
			a := c.store(t, ns, holderClk, nil)
			b := c.store(t, ns, obsView, nil)
			key := "skew/" + tc.name
			held, err := newLocker(t, a).TryAcquire(ctx, key, newHolder(t, "holder"), ttl)
			if err != nil {
				t.Fatal(err)
			}
			lb := newLocker(t, b)
			// The holder's renewTime is an hour off from the observer's
			// point of view: it must not matter.
			if _, err := lb.TryAcquire(ctx, key, newHolder(t, "observer"), ttl); !errors.Is(err, backends.ErrHeld) {
				t.Fatalf("observer TryAcquire at once = %v, want ErrHeld", err)
			}
			// Real time passes equally for both; the observer's clock runs
			// at its rate. Just short of a TTL on the observer's clock:
			short := time.Duration(float64(ttl-10*time.Millisecond) / tc.rate)
			holderClk.Add(short)
			obsClk.Add(short)
			if _, err := lb.TryAcquire(ctx, key, newHolder(t, "observer"), ttl); !errors.Is(err, backends.ErrHeld) {
				t.Fatalf("observer TryAcquire %v into the TTL (its clock) = %v, want ErrHeld", ttl-10*time.Millisecond, err)
			}
			holderClk.Add(20 * time.Millisecond)
			obsClk.Add(20 * time.Millisecond)
			took, err := lb.TryAcquire(ctx, key, newHolder(t, "observer"), ttl)
			if err != nil {
				t.Fatalf("observer TryAcquire past the TTL (its clock): %v", err)
			}
			if took.Token <= held.Token {
				t.Errorf("takeover token %d, want above %d", took.Token, held.Token)
			}
			if _, err := newLocker(t, a).Renew(ctx, held); backends.Classify(err) != backends.ClassLost {
				t.Errorf("old holder's Renew after the takeover = %v, want class lost", err)
			}
		})
	}
}

// A process that starts after a claim was last renewed knows nothing of its
// age: it waits a full TTL of its own observation, even if the holder is
// long gone.
func testFreshProcess(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	a := c.store(t, ns, clk, nil)
	if _, err := a.CreateIfAbsent(ctx, "k", []byte("v"), ttl); err != nil {
		t.Fatal(err)
	}
	w := c.store(t, ns, clk, nil)
	if _, err := w.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	// The holder's process died long ago (in session mode a live store
	// would have cleared the claim its holders stopped renewing).
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Add(10 * ttl)
	if _, err := w.Get(ctx, "k"); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get by a process that watched it age = %v, want ErrNotFound", err)
	}
	fresh := c.store(t, ns, clk, nil)
	e, err := fresh.Get(ctx, "k")
	if err != nil {
		t.Fatalf("Get by a fresh process = %v, want the entry (not yet observed for a TTL)", err)
	}
	if e.Remaining != ttl {
		t.Errorf("fresh process: Remaining = %v, want the full TTL %v", e.Remaining, ttl)
	}
	if _, err := fresh.CreateIfAbsent(ctx, "k", []byte("w"), ttl); !errors.Is(err, backends.ErrExists) {
		t.Errorf("fresh process CreateIfAbsent at once = %v, want ErrExists", err)
	}
	clk.Add(ttl)
	if _, err := fresh.CreateIfAbsent(ctx, "k", []byte("w"), ttl); err != nil {
		t.Errorf("fresh process CreateIfAbsent after a TTL of observation: %v", err)
	}
}

// clientGoLock is a LeaseLock of client-go's leaderelection on the admin
// client, as a client-go candidate of identity id would hold it.
func clientGoLock(c *cluster, ns, name, id string) *resourcelock.LeaseLock {
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: name},
		Client:     c.admin.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
}

// A Lease written by client-go's leaderelection reads as a claim of its
// holderIdentity, and tenure waits out its leaseDurationSeconds before
// taking it, leaving a Lease client-go candidates read correctly.
func testClientGoLease(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	const key, name = "controller leader", "my-controller"
	lock := clientGoLock(c, ns, name, "pod-a")
	now := metav1.NewTime(time.Now())
	rec := resourcelock.LeaderElectionRecord{HolderIdentity: "pod-a", LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now, LeaderTransitions: 3}
	if err := lock.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	clk := clocktest.New(time.Time{})
	s := c.store(t, ns, clk, nil, WithLeaseNames(map[string]string{key: name}))
	l := newLocker(t, s)

	hs, err := l.Holders(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 1 || hs[0].Holder.ID != "pod-a" || hs[0].TTL != 15*time.Second {
		t.Fatalf("Holders of a client-go Lease = %+v, want pod-a with TTL 15s", hs)
	}
	if es, err := s.List(ctx, "controller"); err != nil || len(es) != 1 || es[0].Key != key {
		t.Errorf("List of an adopted Lease = %+v, %v; want the one key", es, err)
	}
	me := newHolder(t, "tenure-pod")
	if _, err := l.TryAcquire(ctx, key, me, ttl); !errors.Is(err, backends.ErrHeld) {
		t.Fatalf("TryAcquire of a live client-go Lease = %v, want ErrHeld", err)
	}
	clk.Add(15 * time.Second)
	le, err := l.TryAcquire(ctx, key, me, ttl)
	if err != nil {
		t.Fatalf("TryAcquire after observing the client-go Lease for its duration: %v", err)
	}

	// What a client-go candidate now reads.
	got, _, err := lock.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := me.ID + "#" + me.Nonce; got.HolderIdentity != want {
		t.Errorf("client-go reads holderIdentity %q, want %q", got.HolderIdentity, want)
	}
	if got.LeaderTransitions != 4 || got.LeaseDurationSeconds != 2 {
		t.Errorf("client-go reads transitions %d, duration %ds; want 4 and 2", got.LeaderTransitions, got.LeaseDurationSeconds)
	}

	// client-go releases the way ReleaseOnCancel does: an empty holder.
	if err := l.Release(ctx, le); err != nil {
		t.Fatal(err)
	}
	got, _, err = lock.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got.HolderIdentity = "pod-b"
	got.RenewTime = metav1.NewTime(time.Now())
	if err := lock.Update(ctx, *got); err != nil {
		t.Fatal(err)
	}
	if hs, err := l.Holders(ctx, key); err != nil || len(hs) != 1 || hs[0].Holder.ID != "pod-b" {
		t.Errorf("Holders after a client-go candidate took the released Lease = %+v, %v; want pod-b", hs, err)
	}
	got.HolderIdentity = ""
	if err := lock.Update(ctx, *got); err != nil {
		t.Fatal(err)
	}
	if hs, err := l.Holders(ctx, key); err != nil || len(hs) != 0 {
		t.Errorf("Holders after client-go released = %+v, %v; want none", hs, err)
	}
}

// A client-go candidate that takes over a tenure Lease keeps tenure's
// annotations; tenure must read the new holder, not the stale claim.
func testClientGoTakeover(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	s := c.store(t, ns, clk, nil)
	l := newLocker(t, s)
	const key = "shared"
	mine, err := l.TryAcquire(ctx, key, newHolder(t, "tenure"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Renew(ctx, mine); err != nil { // records the revision in annotations
		t.Fatal(err)
	}
	lock := clientGoLock(c, ns, s.LeaseName(key), "pod-x")
	rec, _, err := lock.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec.HolderIdentity = "pod-x"
	rec.LeaderTransitions++
	if err := lock.Update(ctx, *rec); err != nil {
		t.Fatal(err)
	}
	hs, err := l.Holders(ctx, key)
	if err != nil || len(hs) != 1 || hs[0].Holder.ID != "pod-x" {
		t.Fatalf("Holders after a client-go takeover = %+v, %v; want pod-x", hs, err)
	}
	if hs[0].Token <= mine.Token {
		t.Errorf("client-go holder's token %d, want above the tenure holder's %d", hs[0].Token, mine.Token)
	}
	if _, err := l.Renew(ctx, mine); backends.Classify(err) != backends.ClassLost {
		t.Errorf("tenure holder's Renew after the takeover = %v, want class lost", err)
	}
}

// A token the API server authenticates but grants nothing gets a fatal
// error that says what is missing, for reads, writes and watches alike.
func testForbidden(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	s := c.store(t, ns, clocktest.New(time.Time{}), c.srv.UnprivilegedRESTConfig())
	calls := map[string]func() error{
		"Get":            func() error { _, err := s.Get(ctx, "k"); return err },
		"List":           func() error { _, err := s.List(ctx, ""); return err },
		"CreateIfAbsent": func() error { _, err := s.CreateIfAbsent(ctx, "k", nil, ttl); return err },
		"KeepAlive":      func() error { _, err := s.KeepAlive(ctx, "k", 1, ttl); return err },
		"Watch":          func() error { _, err := s.Watch(ctx, ""); return err },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, backends.ErrPermission) || backends.Classify(err) != backends.ClassFatal {
			t.Errorf("%s with a token without rights = %v, want ErrPermission, class fatal", name, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "grant get, list, watch, create and update") || !strings.Contains(msg, ns) {
			t.Errorf("%s error %q does not say what to grant in which namespace", name, msg)
		}
	}
}

func testMissingNamespace(t *testing.T, c *cluster) {
	ctx := t.Context()
	s := c.store(t, "no-such-namespace", clocktest.New(time.Time{}), nil)
	_, err := s.CreateIfAbsent(ctx, "k", nil, ttl)
	if !errors.Is(err, backends.ErrMissingResource) || backends.Classify(err) != backends.ClassFatal {
		t.Fatalf("CreateIfAbsent in a missing namespace = %v, want ErrMissingResource, class fatal", err)
	}
	if !strings.Contains(err.Error(), `namespace "no-such-namespace"`) {
		t.Errorf("error %q does not name the namespace", err)
	}
}

// A Lease at a key's hashed name that holds another key is corrupt state:
// never read as absent, never overwritten.
func testForeignName(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	s := c.store(t, ns, clocktest.New(time.Time{}), nil)
	obj := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name:        s.LeaseName("k"),
		Labels:      map[string]string{LabelManaged: "true"},
		Annotations: map[string]string{AnnotationKey: "not k"},
	}}
	if _, err := c.admin.CoordinationV1().Leases(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, backends.ErrCorrupt) {
		t.Errorf("Get = %v, want ErrCorrupt", err)
	}
	if _, err := s.CreateIfAbsent(ctx, "k", nil, ttl); !errors.Is(err, backends.ErrCorrupt) || backends.Classify(err) != backends.ClassFatal {
		t.Errorf("CreateIfAbsent = %v, want ErrCorrupt (fatal)", err)
	}
	if es, err := s.List(ctx, ""); err != nil || len(es) != 0 {
		t.Errorf("List = %+v, %v; want nothing (the object is not this key's)", es, err)
	}
}

// The shared watch starts with the first Watch, stops with the last, and
// ends every channel on Close.
func testWatchLifecycle(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	s := c.store(t, ns, clocktest.New(time.Time{}), nil)
	running := func() bool {
		s.hub.mu.Lock()
		defer s.hub.mu.Unlock()
		return s.hub.cur != nil
	}
	w1ctx, cancel1 := context.WithCancel(ctx)
	w1, err := s.Watch(w1ctx, "a/")
	if err != nil {
		t.Fatal(err)
	}
	w2, err := s.Watch(ctx, "b/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateIfAbsent(ctx, "b/1", nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateIfAbsent(ctx, "a/1", nil, 0); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan backends.Event{"a/": w1, "b/": w2} {
		select {
		case ev := <-ch:
			if !strings.HasPrefix(ev.Entry.Key, name) || ev.Kind != backends.EventPut {
				t.Errorf("watch %q got %v %q", name, ev.Kind, ev.Entry.Key)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("watch %q: no event", name)
		}
	}
	cancel1()
	if _, ok := <-w1; ok {
		t.Error("cancelled watch delivered an event, want closed")
	}
	if !running() {
		t.Error("API server watch stopped while a consumer remains")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-w2; ok {
		t.Error("watch after Close delivered an event, want closed")
	}
	if running() {
		t.Error("API server watch still running after Close")
	}
	if _, err := s.Watch(ctx, ""); !errors.Is(err, backends.ErrClosed) {
		t.Errorf("Watch after Close = %v, want ErrClosed", err)
	}
}

// The API server restarts in the middle of a lease, gracefully or after a
// crash: the holder's renewals fail as transient while it is down (the
// elector retries until its own deadline), the watch ends so followers
// re-read, and after the restart the same lease renews with the same token.
func testRestart(t *testing.T, c *cluster) {
	for _, tc := range []struct {
		name string
		stop func(testing.TB)
	}{
		{"graceful", c.srv.Stop},
		{"crash", c.srv.Kill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			ns := c.namespace(t)
			clk := clocktest.New(time.Time{})
			s := c.store(t, ns, clk, nil)
			l := newLocker(t, s)
			const key = "restart"
			le, err := l.TryAcquire(ctx, key, newHolder(t, "survivor"), 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			events, err := s.Watch(ctx, "")
			if err != nil {
				t.Fatal(err)
			}

			tc.stop(t)
			down, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = l.Renew(down, le)
			cancel()
			if backends.Classify(err) != backends.ClassTransient {
				t.Errorf("Renew while the API server is down = %v (class %v), want transient", err, backends.Classify(err))
			}
			select {
			case _, ok := <-events:
				if ok {
					t.Error("watch delivered an event while the API server was down, want closed")
				}
			case <-time.After(10 * time.Second):
				t.Error("watch not closed after the API server went down")
			}

			c.srv.Restart(t)
			renewed, err := l.Renew(ctx, le)
			if err != nil {
				t.Fatalf("Renew after the restart: %v", err)
			}
			if renewed.Token != le.Token || renewed.Revision != le.Revision {
				t.Errorf("after restart: token %d rev %d, want %d %d", renewed.Token, renewed.Revision, le.Token, le.Revision)
			}
			other := c.store(t, ns, clk, nil)
			if _, err := newLocker(t, other).TryAcquire(ctx, key, newHolder(t, "other"), ttl); !errors.Is(err, backends.ErrHeld) {
				t.Errorf("another process after the restart: TryAcquire = %v, want ErrHeld", err)
			}
			if _, err := s.Watch(ctx, ""); err != nil {
				t.Errorf("Watch again after the restart: %v", err)
			}
		})
	}
}

// offline is a client for tests that do no I/O: New never calls the server.
func offline() kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: "https://127.0.0.1:1"})
}

// TestClassify checks the mapping of API errors to the contract's classes
// without a server.
func TestClassify(t *testing.T) {
	s, err := New(offline(), WithNamespace("ns"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gr := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:1", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	tests := []struct {
		name     string
		err      error
		sentinel error
		class    backends.Class
	}{
		{"forbidden", apierrors.NewForbidden(gr, "x", errors.New("no")), backends.ErrPermission, backends.ClassFatal},
		{"unauthorized", apierrors.NewUnauthorized("bad token"), backends.ErrPermission, backends.ClassFatal},
		{"not found on create", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns"), backends.ErrMissingResource, backends.ClassFatal},
		{"invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Lease"}, "x", nil), backends.ErrInvalid, backends.ClassFatal},
		{"429", apierrors.NewTooManyRequests("slow down", 1), backends.ErrThrottled, backends.ClassTransient},
		{"500", apierrors.NewInternalError(errors.New("boom")), backends.ErrUnavailable, backends.ClassTransient},
		{"503", apierrors.NewServiceUnavailable("later"), backends.ErrUnavailable, backends.ClassTransient},
		{"server timeout", apierrors.NewServerTimeout(gr, "update", 1), backends.ErrUnavailable, backends.ClassTransient},
		{"gateway timeout", apierrors.NewTimeoutError("slow", 1), backends.ErrUnavailable, backends.ClassTransient},
		{"connection refused", refused, backends.ErrUnavailable, backends.ClassTransient},
		{"conflict", apierrors.NewConflict(gr, "x", errors.New("stale")), backends.ErrConflict, backends.ClassLost},
		{"deadline", fmt.Errorf("client: %w", context.DeadlineExceeded), context.DeadlineExceeded, backends.ClassTransient},
	}
	for _, tt := range tests {
		got := s.classify("update", "k", tt.err)
		if !errors.Is(got, tt.sentinel) || backends.Classify(got) != tt.class {
			t.Errorf("%s: classify(%v) = %v (class %v), want wrapping %v, class %v", tt.name, tt.err, got, backends.Classify(got), tt.sentinel, tt.class)
		}
		if !errors.Is(got, tt.err) {
			t.Errorf("%s: classify dropped the original error from the chain: %v", tt.name, got)
		}
	}
}

// TestNames checks key-to-name mapping and the validation of the options.
func TestNames(t *testing.T) {
	for _, key := range []string{"a", "with space", "ünïcødé/キー/🔑", strings.Repeat("/", backends.MaxKeyBytes)} {
		n := hashName(key)
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			t.Errorf("hashName(%q) = %q: %v", key, n, errs)
		}
	}
	if hashName("a") == hashName("b") {
		t.Error("hashName collides on a and b")
	}
	client := offline()
	for _, tc := range []struct {
		name string
		opt  Option
	}{
		{"bad namespace", WithNamespace("Not_A_Namespace")},
		{"bad lease name", WithLeaseNames(map[string]string{"k": "Bad Name"})},
		{"reserved prefix", WithLeaseNames(map[string]string{"k": "tenure-x"})},
		{"one name twice", WithLeaseNames(map[string]string{"k1": "same", "k2": "same"})},
		{"bad key", WithLeaseNames(map[string]string{"": "name"})},
		{"negative watch timeout", WithWatchTimeout(-time.Second)},
		{"zero watch timeout", WithWatchTimeout(0)},
	} {
		if _, err := New(client, tc.opt); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("New with %s = %v, want ErrInvalid", tc.name, err)
		}
	}
	if _, err := New(nil); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("New(nil client) = %v, want ErrInvalid", err)
	}
	s, err := New(client, WithLeaseNames(map[string]string{"old leader": "old-leader"}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.LeaseName("old leader"); got != "old-leader" {
		t.Errorf("LeaseName of an adopted key = %q", got)
	}
	if got := s.LeaseName("other"); got != hashName("other") {
		t.Errorf("LeaseName of another key = %q, want the hashed name", got)
	}
}

// stalledWatches makes every watch request through cfg hang: the API server
// is never asked, and the response stream never sends a byte until the
// request ends. Lists, reads and writes go through.
func stalledWatches(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Query().Get("watch") != "true" {
				return rt.RoundTrip(r)
			}
			return &http.Response{
				StatusCode: http.StatusOK,
				Header:     http.Header{"Content-Type": []string{"application/json"}},
				Body:       &silentBody{ctx: r.Context(), closed: make(chan struct{})},
				Request:    r,
			}, nil
		})
	}
	return cfg
}

// silentBody blocks every Read until its request ends or it is closed.
type silentBody struct {
	ctx    context.Context
	closed chan struct{}
	once   sync.Once
}

func (b *silentBody) Read([]byte) (int, error) {
	select {
	case <-b.ctx.Done():
	case <-b.closed:
	}
	return 0, io.EOF
}

func (b *silentBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// A watch that stalls without breaking delivers nothing, but the store's
// own sightings still time expiry: here one claim was replaced and another
// created after the watch began, both seen by reads and never by the watch,
// and their holders then stopped renewing. The expiry of each is still
// reported, at the revision the read saw, one TTL after that read.
func testStalledWatchExpiry(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	writer := c.store(t, ns, clocktest.New(time.Time{}), nil)
	s := c.store(t, ns, clk, stalledWatches(c.srv.RESTConfig()))
	first, err := writer.CreateIfAbsent(ctx, "replaced", []byte("first"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := s.Watch(wctx, "")
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl / 2)
	replaced, err := writer.CompareAndSet(ctx, "replaced", first.Revision, []byte("second"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	late, err := writer.CreateIfAbsent(ctx, "late", []byte("late"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]backends.Entry{"replaced": replaced, "late": late}
	for key, e := range want {
		if got, err := s.Get(ctx, key); err != nil || got.Revision != e.Revision {
			t.Fatalf("Get(%q) = rev %d, %v; want rev %d", key, got.Revision, err, e.Revision)
		}
	}
	// Both sightings are timed: the timer armed from the first sighting of
	// "replaced" moves, and "late" gets one (beside the watch's lifetime).
	bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
	defer bcancel()
	if err := clk.BlockUntil(bctx, 1+2); err != nil {
		t.Fatalf("expiry timers for the sightings the reads made: %v", err)
	}
	clk.Add(ttl - time.Millisecond)
	select {
	case ev := <-events:
		t.Fatalf("event %v %q@%d before the entries expired", ev.Kind, ev.Entry.Key, ev.Entry.Revision)
	default:
	}
	clk.Add(time.Millisecond)
	for range want {
		select {
		case ev, ok := <-events:
			e, known := want[ev.Entry.Key]
			if !ok || !known || ev.Kind != backends.EventDelete || ev.Entry.Revision != e.Revision || ev.Entry.CreateRevision != e.CreateRevision {
				t.Fatalf("event = %v %q@%d/%d (open %v), want the deletes of %v", ev.Kind, ev.Entry.Key, ev.Entry.Revision, ev.Entry.CreateRevision, ok, want)
			}
			delete(want, ev.Entry.Key)
		case <-time.After(10 * time.Second):
			t.Fatalf("no expiry event within 10s for %v", want)
		}
	}
}

// nextEvent waits (in real time: the watch runs in its own goroutine) for
// the next event on events.
func nextEvent(t *testing.T, events <-chan backends.Event, what string) (backends.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatalf("watch closed while waiting for %s", what)
		}
		return ev, true
	case <-time.After(10 * time.Second):
		return backends.Event{}, false
	}
}

// A stalled watch reported a claim expired; then a read saw its holder's
// renewal, a keep-alive, which moves the resourceVersion and keeps the
// revision. That renewal is reported, and when it expires in turn its
// expiry is reported too: a follower waiting on the watch has no other
// wake-up, so an expiry skipped as "already reported at this revision"
// leaves it waiting while the claim stands abandoned.
func testStalledWatchRenewalExpiry(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	writer := c.store(t, ns, clocktest.New(time.Time{}), nil)
	s := c.store(t, ns, clk, stalledWatches(c.srv.RESTConfig()))
	const key = "renewed"
	e, err := writer.CreateIfAbsent(ctx, key, []byte("v"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := s.Watch(wctx, "") // its list sees the claim and times it
	if err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
	defer bcancel()
	// The watch's lifetime, and the listed claim's expiry.
	if err := clk.BlockUntil(bctx, 1+1); err != nil {
		t.Fatalf("expiry timer for the listed claim: %v", err)
	}
	clk.Add(ttl)
	isDelete := func(ev backends.Event) bool {
		return ev.Kind == backends.EventDelete && ev.Entry.Key == key && ev.Entry.Revision == e.Revision && ev.Entry.CreateRevision == e.CreateRevision
	}
	if ev, ok := nextEvent(t, events, "the first expiry"); !ok || !isDelete(ev) {
		t.Fatalf("after a TTL: event %v %q@%d/%d (got one: %v), want the delete of %q@%d/%d", ev.Kind, ev.Entry.Key, ev.Entry.Revision, ev.Entry.CreateRevision, ok, key, e.Revision, e.CreateRevision)
	}

	// The holder renews late; only the follower's read sees it.
	before := c.renewed(t, s, key).ResourceVersion
	if _, err := writer.KeepAlive(ctx, key, e.Revision, ttl); err != nil {
		t.Fatal(err)
	}
	if after := c.renewed(t, s, key).ResourceVersion; after == before {
		t.Fatalf("keep-alive left resourceVersion at %s", after)
	}
	got, err := s.Get(ctx, key)
	if err != nil || got.Revision != e.Revision {
		t.Fatalf("Get of the renewal = rev %d, %v; want rev %d", got.Revision, err, e.Revision)
	}
	if err := clk.BlockUntil(bctx, 1+1); err != nil {
		t.Fatalf("expiry timer for the renewal the read saw: %v", err)
	}
	if ev, ok := nextEvent(t, events, "the renewal"); !ok || ev.Kind != backends.EventPut || ev.Entry.Key != key || ev.Entry.Revision != e.Revision {
		t.Errorf("after the read of the renewal: event %v %q@%d (got one: %v), want the put of %q@%d", ev.Kind, ev.Entry.Key, ev.Entry.Revision, ok, key, e.Revision)
	}

	// The holder dies: its renewal expires one TTL after the read saw it.
	clk.Add(ttl - time.Millisecond)
	select {
	case ev := <-events:
		t.Fatalf("event %v %q@%d before the renewal expired", ev.Kind, ev.Entry.Key, ev.Entry.Revision)
	default:
	}
	clk.Add(time.Millisecond)
	if ev, ok := nextEvent(t, events, "the renewal's expiry"); !ok || !isDelete(ev) {
		t.Fatalf("a TTL after the read of the renewal: event %v %q@%d/%d (got one: %v), want the delete of %q@%d/%d", ev.Kind, ev.Entry.Key, ev.Entry.Revision, ev.Entry.CreateRevision, ok, key, e.Revision, e.CreateRevision)
	}
}

// TestWatchReportsEachExpiredVersion drives the watch's expiry judgement
// by hand, without a server, for the case a real watch cannot order
// deterministically: the watch reported a claim expired, a read then saw
// the holder's renewal (a keep-alive: new resourceVersion, same revision),
// and that renewal expired too before the watch judged it, as in a process
// starved for a TTL. The expiry of the renewal is a second expiry and is
// reported; the same version judged again is not.
func TestWatchReportsEachExpiredVersion(t *testing.T) {
	clk := clocktest.New(time.Time{})
	s, err := New(offline(), WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const key = "k"
	name := s.LeaseName(key)
	claimed := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "10"}}
	if err := apply(claimed, key, write{value: []byte("v"), ttl: ttl}, clk.Now()); err != nil {
		t.Fatal(err)
	}
	renewed := claimed.DeepCopy()
	renewed.ResourceVersion = "12"
	if err := apply(renewed, key, write{value: []byte("v"), ttl: ttl, revision: 10, createRevision: 10}, clk.Now()); err != nil {
		t.Fatal(err)
	}

	h := s.hub
	st := &stream{subs: map[*sub]struct{}{}, state: map[string]wstate{}, timers: map[string]*clock.Timer{}, due: map[string]struct{}{}, wake: make(chan struct{}, 1)}
	defer func() {
		for _, tm := range st.timers {
			tm.Stop()
		}
	}()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h.mu.Lock()
	events := h.addLocked(ctx, st, "", 0)
	h.mu.Unlock()
	judge := func(l *coordinationv1.Lease) []backends.Event {
		t.Helper()
		if _, _, err := s.sight(l); err != nil {
			t.Fatal(err)
		}
		st.markDue(name)
		h.expireDue(st)
		var got []backends.Event
		for {
			select {
			case ev := <-events:
				got = append(got, ev)
			default:
				return got
			}
		}
	}
	expired := backends.Event{Kind: backends.EventDelete, Entry: backends.Entry{Key: key, Revision: 10, CreateRevision: 10}}
	isExpiry := func(evs []backends.Event) bool {
		return len(evs) == 1 && evs[0].Kind == expired.Kind && evs[0].Entry.Key == key &&
			evs[0].Entry.Revision == 10 && evs[0].Entry.CreateRevision == 10
	}

	ws, _ := h.logical(claimed)
	st.state[name] = ws
	if _, _, err := s.sight(claimed); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl)
	if got := judge(claimed); !isExpiry(got) {
		t.Fatalf("a TTL after the claim was seen: events %+v, want %+v", got, expired)
	}
	if got := judge(claimed); len(got) != 0 {
		t.Fatalf("the same expired version judged again: events %+v, want none", got)
	}
	if _, _, err := s.sight(renewed); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl) // the watch judges the renewal only once it has expired
	if got := judge(renewed); !isExpiry(got) {
		t.Fatalf("a TTL after the renewal was seen: events %+v, want %+v", got, expired)
	}
	if got := judge(renewed); len(got) != 0 {
		t.Fatalf("the expired renewal judged again: events %+v, want none", got)
	}
}

// A watch that stalls delivers nothing at all, not even its own end: a
// follower waiting on it for a change (here, a release the watch never
// delivers, and that no expiry timer covers, the claim having no TTL)
// would wait for good. The watch ends within twice the watch timeout of
// its start, closing every channel, and the next Watch works.
func testStalledWatchLifetime(t *testing.T, c *cluster) {
	ctx := t.Context()
	ns := c.namespace(t)
	clk := clocktest.New(time.Time{})
	const life = time.Minute
	s := c.store(t, ns, clk, stalledWatches(c.srv.RESTConfig()), WithWatchTimeout(life))
	e, err := s.CreateIfAbsent(ctx, "k", []byte("v"), 0)
	if err != nil {
		t.Fatal(err)
	}
	events, err := s.Watch(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.store(t, ns, clocktest.New(time.Time{}), nil).CompareAndDelete(ctx, "k", e.Revision); err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
	defer bcancel()
	if err := clk.BlockUntil(bctx, 1); err != nil {
		t.Fatalf("the watch's lifetime timer: %v", err)
	}
	clk.Add(life - time.Millisecond) // the shortest lifetime, not yet over
	select {
	case ev, ok := <-events:
		t.Fatalf("before its lifetime: event %v %q (open %v), want nothing", ev.Kind, ev.Entry.Key, ok)
	default:
	}
	clk.Add(life + time.Millisecond) // the longest
	select {
	case ev, ok := <-events:
		if ok {
			t.Fatalf("at the end of its lifetime: event %v %q, want the channel closed", ev.Kind, ev.Entry.Key)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("stalled watch still open %v after it started, with a watch timeout of %v", 2*life, life)
	}
	again, err := s.Watch(ctx, "")
	if err != nil {
		t.Fatalf("Watch after the lifetime ended the last one: %v", err)
	}
	select {
	case ev, ok := <-again:
		t.Fatalf("new watch: event %v %q (open %v), want nothing yet", ev.Kind, ev.Entry.Key, ok)
	default:
	}
}
