package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/clocktest"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// leaseOf reads the lease of an etcd key behind the store's back.
func (f *fixture) leaseOf(t testing.TB, key string) clientv3.LeaseID {
	t.Helper()
	resp, err := f.raw.Get(testContext(t), f.prefix+key)
	if err != nil {
		t.Fatalf("raw Get(%q): %v", key, err)
	}
	if len(resp.Kvs) == 0 {
		return clientv3.NoLease
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

func TestSharedLeaseOneLeasePerTTL(t *testing.T) {
	f := newFixture(t, etcd.WithSharedLease(0))
	ctx := testContext(t)
	for _, k := range []string{"a", "b", "c"} {
		mustCreate(t, f.store, k, "v", 2*time.Second)
	}
	mustCreate(t, f.store, "long", "v", 3*time.Second)
	mustCreate(t, f.store, "plain", "v", 0)

	shared := f.store.SharedLeaseOf(2)
	for _, k := range []string{"a", "b", "c"} {
		if got := f.leaseOf(t, k); got != shared || got == clientv3.NoLease {
			t.Errorf("lease of %q = %x, want the shared 2s lease %x", k, got, shared)
		}
	}
	if got := f.leaseOf(t, "long"); got == shared || got != f.store.SharedLeaseOf(3) {
		t.Errorf("lease of the 3s entry = %x, want the shared 3s lease %x", got, f.store.SharedLeaseOf(3))
	}
	if got := f.leaseOf(t, "plain"); got != clientv3.NoLease {
		t.Errorf("lease of an entry without TTL = %x, want none", got)
	}
	ttl, err := f.raw.TimeToLive(ctx, shared, clientv3.WithAttachedKeys())
	if err != nil || len(ttl.Keys) != 3 || ttl.GrantedTTL != 2 {
		t.Errorf("shared lease = %+v, %v; want 3 keys and a granted TTL of 2s", ttl, err)
	}
}

// TestSharedKeepAliveBatches checks that fifty keep-alives cost the requests
// of one or two batches, not fifty.
func TestSharedKeepAliveBatches(t *testing.T) {
	f := newFixture(t, etcd.WithSharedLease(0))
	const n = 50
	entries := make([]backends.Entry, n)
	for i := range entries {
		entries[i] = mustCreate(t, f.store, fmt.Sprintf("claims/%03d", i), fmt.Sprint(i), 2*time.Second)
	}
	f.reqs.reset()
	ctx := testContext(t)
	var wg sync.WaitGroup
	errs := make([]error, n)
	got := make([]backends.Entry, n)
	for i, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = f.store.KeepAlive(ctx, e.Key, e.Revision, 2*time.Second)
		}()
	}
	wg.Wait()
	for i, e := range entries {
		g := got[i]
		if errs[i] != nil || g.Revision != e.Revision || g.CreateRevision != e.CreateRevision || string(g.Value) != fmt.Sprint(i) || g.TTL != 2*time.Second || g.Key != e.Key {
			t.Errorf("KeepAlive(%q) = %+v, %v; want revision %d, value %d, TTL 2s", e.Key, g, errs[i], e.Revision, i)
		}
	}
	// The first call starts a batch at once; the others arrive during it
	// and wait for the next. Each batch is one read and one KeepAliveOnce.
	if got := f.reqs.Load(); got > 4 {
		t.Errorf("%d keep-alives cost %d requests (%s), want at most 4", n, got, f.reqs)
	}
}

func TestSharedKeepAliveVerifiesEachEntry(t *testing.T) {
	servers(t, func(t *testing.T, start func(testing.TB) server) {
		f := newFixtureOn(t, start(t), etcd.WithSharedLease(20*time.Millisecond))
		ctx := testContext(t)
		a := mustCreate(t, f.store, "a", "v", 2*time.Second)
		b := mustCreate(t, f.store, "b", "v", 2*time.Second)
		c := mustCreate(t, f.store, "c", "v", 2*time.Second)
		renewOnce(t, f.store, c)

		// Behind the store's back: a is rewritten (on the same lease), b deleted.
		// That is outside the rule renewals rely on (only the writer and expiry
		// change an entry); the store's watch catches it.
		put, err := f.raw.Put(ctx, f.prefix+"a", "other", clientv3.WithLease(f.store.SharedLeaseOf(2)))
		if err != nil {
			t.Fatal(err)
		}
		del, err := f.raw.Delete(ctx, f.prefix+"b")
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the store's watch sees the changes", func(context.Context) bool {
			return f.store.Seen() >= del.Header.Revision
		})

		_, err = f.store.KeepAlive(ctx, "a", a.Revision, 2*time.Second)
		if ce := conflict(t, "KeepAlive of a rewritten entry", err); !ce.Found || ce.Current.Revision != put.Header.Revision || string(ce.Current.Value) != "other" {
			t.Errorf("KeepAlive of a rewritten entry: conflict %+v, want current revision %d, value other", ce, put.Header.Revision)
		}
		if _, err := f.store.KeepAlive(ctx, "b", b.Revision, 2*time.Second); !errors.Is(err, backends.ErrNotFound) || backends.Classify(err) != backends.ClassLost {
			t.Errorf("KeepAlive of a deleted entry = %v, want lost (ErrNotFound)", err)
		}
		if _, err := f.store.KeepAlive(ctx, "c", c.Revision, 2*time.Second); err != nil {
			t.Errorf("KeepAlive of an untouched entry = %v, want nil", err)
		}
		if _, err := f.store.KeepAlive(ctx, "c", c.Revision, 3*time.Second); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("KeepAlive(ttl 3s) on the 2s shared lease = %v, want ErrInvalid", err)
		}
		// An entry of the shared lease the store does not know at that revision
		// (a's rewrite) takes the direct path, and is adopted.
		if got, err := f.store.KeepAlive(ctx, "a", put.Header.Revision, 2*time.Second); err != nil || got.Revision != put.Header.Revision || string(got.Value) != "other" {
			t.Errorf("KeepAlive of the rewrite = %+v, %v; want revision %d, value other", got, err, put.Header.Revision)
		}
	})
}

// TestSharedLeaseRevoked checks that when the shared lease is gone,
// keep-alives report the claims lost and the next write gets a new lease.
func TestSharedLeaseRevoked(t *testing.T) {
	f := newFixture(t, etcd.WithSharedLease(0))
	ctx := testContext(t)
	a := mustCreate(t, f.store, "a", "v", time.Second)
	old := f.store.SharedLeaseOf(1)
	if _, err := f.raw.Revoke(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.KeepAlive(ctx, "a", a.Revision, time.Second); backends.Classify(err) != backends.ClassLost {
		t.Errorf("KeepAlive after the shared lease was revoked = %v, want class lost", err)
	}
	b := mustCreate(t, f.store, "b", "v", time.Second)
	if now := f.store.SharedLeaseOf(1); now == old || now == clientv3.NoLease || f.leaseOf(t, "b") != now {
		t.Errorf("shared lease after revocation = %x (b on %x), want a new one, not %x", now, f.leaseOf(t, "b"), old)
	}
	if _, err := f.store.KeepAlive(ctx, "b", b.Revision, time.Second); err != nil {
		t.Errorf("KeepAlive on the new shared lease = %v", err)
	}
}

// TestSharedAbandonedEntryDeleted checks that an entry nobody keeps alive is
// deleted by the store after its TTL, although the shared lease it is on is
// kept alive for another entry.
func TestSharedAbandonedEntryDeleted(t *testing.T) {
	f := newFixture(t, etcd.WithSharedLease(100*time.Millisecond))
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	mustCreate(t, f.store, "abandoned", "v", time.Second)
	live := mustCreate(t, f.store, "live", "v", time.Second)
	lease := f.leaseOf(t, "live")

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	renewErr := make(chan error, 1)
	wg.Add(1)
	go func() { // the holder of "live", renewing every TTL/4
		defer wg.Done()
		tk := clock.New().Ticker(250 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			if _, err := f.store.KeepAlive(ctx, "live", live.Revision, time.Second); err != nil && ctx.Err() == nil {
				renewErr <- err
				return
			}
		}
	}()
	waitAbsent(t, f.store, "abandoned", 5*time.Second)
	select {
	case err := <-renewErr:
		t.Fatalf("renewing the live entry: %v", err)
	default:
	}
	if got := f.leaseOf(t, "live"); got != lease {
		t.Errorf("live entry's lease = %x, want %x still alive: the abandoned entry must have been deleted by the store, not by expiry", got, lease)
	}
}

func TestSharedCloseLetsLeaseExpire(t *testing.T) {
	f := newFixture(t)
	s := f.peer(t, etcd.WithSharedLease(0))
	e := mustCreate(t, s, "k", "v", time.Second)
	if _, err := s.KeepAlive(testContext(t), "k", e.Revision, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Get(testContext(t), "k"); err != nil {
		t.Fatalf("entry right after Close: %v, want present (Close deletes nothing)", err)
	}
	waitAbsent(t, f.store, "k", 5*time.Second)
}

// TestSharedUnknownWriteCollected checks that an entry a write with an
// unknown outcome may have left on the shared lease is deleted, unless a
// write of the store the registry knows took the key over.
func TestSharedUnknownWriteCollected(t *testing.T) {
	testUnknownWriteCollected(t, newFixture(t, etcd.WithSharedLease(50*time.Millisecond)))
}

// TestSharedUnknownWriteCollectedWithIndexReads checks the same as
// TestSharedUnknownWriteCollected with keys-only reads that carry no lease,
// as etcd from v3.7 answers them. The collector decides by the key's lease
// whether a write of its own may have left it: read keys-only, no entry was
// ever its own, and garbage on the shared lease stayed alive as long as the
// store kept the lease alive.
func TestSharedUnknownWriteCollectedWithIndexReads(t *testing.T) {
	f := &fixture{srv: etcdtest.Start(t), reqs: newCounter(), prefix: newPrefix(t)}
	cfg := clientv3.Config{Endpoints: f.srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: nopLogger,
		DialOptions: append(f.reqs.dialOptions(), indexReads())}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	f.cli, f.raw = cli, f.srv.Client(t)
	f.store = openStore(t, f.cli, f.prefix, etcd.WithSharedLease(50*time.Millisecond))
	testUnknownWriteCollected(t, f)
}

func testUnknownWriteCollected(t *testing.T, f *fixture) {
	ctx := testContext(t)
	anchor := mustCreate(t, f.store, "anchor", "v", 2*time.Second)
	lease := f.store.SharedLeaseOf(2)
	for _, k := range []string{"ghost", "taken"} {
		if _, err := f.raw.Put(ctx, f.prefix+k, "v", clientv3.WithLease(lease)); err != nil {
			t.Fatal(err)
		}
	}
	// "taken" is written over by the store before its unknown write is
	// marked: marked first, the collector (which runs as soon as a mark
	// exists) may delete it before the write, as it should.
	taken, err := f.store.Get(ctx, "taken")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.CompareAndSet(ctx, "taken", taken.Revision, []byte("mine"), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"ghost", "taken"} {
		f.store.WriteUnknown(k, 2)
	}
	waitAbsent(t, f.store, "ghost", time.Second)
	// Batches keep running for the anchor; "taken" is known and stays.
	for i := 0; i < 3; i++ {
		if _, err := f.store.KeepAlive(ctx, "anchor", anchor.Revision, 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := f.store.Get(ctx, "taken"); err != nil || string(got.Value) != "mine" {
		t.Errorf("taken = %+v, %v; want present with value mine", got, err)
	}
}

// TestSharedGarbageNotBeforeDeadline checks that on the store's clock, an
// entry nobody keeps alive is deleted once its TTL has passed since its last
// write or keep-alive, and not a moment before, although batches for other
// entries run meanwhile.
func TestSharedGarbageNotBeforeDeadline(t *testing.T) {
	clk := clocktest.New(time.Time{})
	f := newFixture(t, etcd.WithSharedLease(100*time.Millisecond), etcd.WithClock(clk))
	ctx := testContext(t)
	mustCreate(t, f.store, "abandoned", "v", 2*time.Second) // its holder's deadline: t0 + 2s
	kept := mustCreate(t, f.store, "kept", "v", 2*time.Second)
	present := func(key string) bool {
		resp, err := f.raw.Get(ctx, f.prefix+key)
		if err != nil {
			t.Fatalf("raw Get(%q): %v", key, err)
		}
		return len(resp.Kvs) == 1
	}

	// Batches run for "kept" at t0 + 0.9s and t0 + 1.8s (each within the
	// second of a 2s lease that the store keeps it alive in), and collect
	// garbage first.
	for _, at := range []time.Duration{900 * time.Millisecond, 1800 * time.Millisecond} {
		clk.Add(900 * time.Millisecond)
		if _, err := f.store.KeepAlive(ctx, "kept", kept.Revision, 2*time.Second); err != nil {
			t.Fatalf("KeepAlive(kept) at t0+%v: %v", at, err)
		}
		if !present("abandoned") {
			t.Fatalf("abandoned deleted at t0+%v, before its holder's deadline t0+2s", at)
		}
	}

	// The batcher then sleeps until the abandoned entry's deadline; past it,
	// it deletes the entry by itself. Its round at the deadline is one
	// batch interval after the last, and it may time that wake-up from a
	// clock read before the Add ended: a second step past it covers both.
	if err := clk.AdvanceWhenBlocked(ctx, 1, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := clk.AdvanceWhenBlocked(ctx, 1, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "abandoned deleted past its deadline", func(context.Context) bool { return !present("abandoned") })
	if !present("kept") {
		t.Errorf("kept (kept alive at t0+1.8s, so until t0+3.8s) deleted by t0+2.1s")
	}
}

// faultKV is the KV of a client whose next transactions time out without
// reaching etcd, as requests lost on the way would: their callers cannot
// tell whether they were applied.
type faultKV struct {
	clientv3.KV
	timeouts atomic.Int64 // how many of the next commits time out
}

func (f *faultKV) Txn(ctx context.Context) clientv3.Txn {
	return &faultTxn{Txn: f.KV.Txn(ctx), f: f}
}

type faultTxn struct {
	clientv3.Txn
	f *faultKV
}

func (t *faultTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *faultTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *faultTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *faultTxn) Commit() (*clientv3.TxnResponse, error) {
	for {
		n := t.f.timeouts.Load()
		if n <= 0 {
			return t.Txn.Commit()
		}
		if t.f.timeouts.CompareAndSwap(n, n-1) {
			return nil, context.DeadlineExceeded
		}
	}
}

// advance steps clk by step whenever a timer waits on it, until the
// returned stop is called or the clock has moved limit. It lets a store
// with a tiny batch interval run its batches on a fake clock that, in
// total, barely moves.
func advance(t *testing.T, clk *clocktest.Clock, step, limit time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for moved := time.Duration(0); moved < limit && ctx.Err() == nil; moved += step {
			if err := clk.AdvanceWhenBlocked(ctx, 1, step); err != nil {
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

// TestSharedTimedOutCreateSparesLiveHolder covers two candidates of one
// process sharing a store: one holds the claim, the other's create of it
// times out. The failed create's possible entry is garbage, but the key holds
// the holder's entry, at a revision the store wrote itself: the store must
// not delete it before the holder's deadline. It did: the unknown write's
// mark replaced the holder's registry entry, the collector found the key on
// the store's lease at a revision nobody claimed any more, and deleted the
// holder's claim within one batch.
func TestSharedTimedOutCreateSparesLiveHolder(t *testing.T) {
	clk := clocktest.New(time.Time{})
	t0 := clk.Now()
	srv := etcdtest.Start(t)
	cli := newClient(t, srv.Endpoints(), nil)
	kv := &faultKV{KV: cli.KV}
	cli.KV = kv
	prefix := newPrefix(t)
	s := openStore(t, cli, prefix, etcd.WithSharedLease(time.Nanosecond), etcd.WithClock(clk))
	raw := srv.Client(t)
	ctx := testContext(t)

	held := mustCreate(t, s, "leader", "a", 2*time.Second) // a's deadline: t0 + 2s
	anchor := mustCreate(t, s, "anchor", "v", 2*time.Second)
	kv.timeouts.Store(1)
	if _, err := s.CreateIfAbsent(ctx, "leader", []byte("b"), 2*time.Second); backends.Classify(err) != backends.ClassTransient {
		t.Fatalf("b's create with a timed-out transaction = %v, want a transient error", err)
	}

	// A batch collects garbage before it keeps alive: once the anchor's
	// keep-alive returns, a collection has run since the failed create.
	// The clock moves at most half a second, far from a's deadline.
	stop := advance(t, clk, time.Millisecond, 500*time.Millisecond)
	defer stop()
	if _, err := s.KeepAlive(ctx, "anchor", anchor.Revision, 2*time.Second); err != nil {
		t.Fatalf("KeepAlive(anchor): %v", err)
	}
	resp, err := raw.Get(ctx, prefix+"leader")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != held.Revision {
		t.Fatalf("the holder's entry (revision %d, deadline t0+2s) at t0+%v: %v, want it untouched", held.Revision, clk.Since(t0), resp.Kvs)
	}
	if _, err := s.KeepAlive(ctx, "leader", held.Revision, 2*time.Second); err != nil {
		t.Errorf("the holder's KeepAlive after the other candidate's failed create = %v, want nil", err)
	}
}

// deadlineCtx is a context whose deadline is on a fake clock: it reports
// the deadline and never ends by itself, as the elector's contexts on a
// fake clock do until that clock reaches it.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// TestSharedKeepAliveServedWithinCallersTime checks that a keep-alive
// arriving just after a batch is served within the time its caller gives it,
// not one batch interval after the last batch. Before, it waited the whole
// interval whatever its deadline: with the default interval and an elector's
// renew timeout (both 500 ms at a 500 ms renew period), a renewal arriving
// just after a batch timed out, and with two such timeouts in a row a leader
// of one of a hundred claims lost its term with no fault at all. Here the
// caller's deadline is the next instant, so the batch is due at once: the
// fake clock never moves, and only a batch that respects the deadline
// answers.
func TestSharedKeepAliveServedWithinCallersTime(t *testing.T) {
	clk := clocktest.New(time.Time{})
	f := newFixture(t, etcd.WithSharedLease(500*time.Millisecond), etcd.WithClock(clk))
	ctx := testContext(t)
	a := mustCreate(t, f.store, "a", "v", 2*time.Second)
	b := mustCreate(t, f.store, "b", "v", 2*time.Second)
	if _, err := f.store.KeepAlive(ctx, "a", a.Revision, 2*time.Second); err != nil {
		t.Fatal(err) // the first batch runs at once
	}

	done := make(chan error, 1)
	go func() {
		_, err := f.store.KeepAlive(deadlineCtx{Context: ctx, deadline: clk.Now().Add(time.Nanosecond)}, "b", b.Revision, 2*time.Second)
		done <- err
	}()
	limit := clock.New().Timer(5 * time.Second)
	defer limit.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("KeepAlive(b) = %v, want nil", err)
		}
	case <-limit.C:
		t.Fatalf("KeepAlive(b), due at once, still waiting for the next batch interval")
	}
}

// TestSharedIdleLeaseIsNotKeptAliveNearExpiry checks that a store whose last
// claim ended lets its shared lease idle (nothing keeps it alive while the
// store holds nothing); when it wins a claim about one TTL later, that lease
// may be expiring at the server. etcd's lessor can answer a keep-alive that
// arrives then with success while the revocation it already decided goes on
// and deletes every key on the lease, the new claim included. The store must
// neither keep such a lease alive nor write on it, but grant a new one. Here
// the store's clock has moved a TTL less a tenth while etcd's has barely
// moved, so that the old lease is alive at the server and a keep-alive of it
// would succeed.
func TestSharedIdleLeaseIsNotKeptAliveNearExpiry(t *testing.T) {
	clk := clocktest.New(time.Time{})
	f := newFixture(t, etcd.WithSharedLease(0), etcd.WithClock(clk))
	old := idleSharedLease(t, f)

	clk.Add(1800 * time.Millisecond)
	f.reqs.reset()
	mustCreate(t, f.store, "b", "v", 2*time.Second)
	if n := f.reqs.keepAlivesOf(old); n != 0 {
		t.Errorf("create on a lease idle for 1.8s of its 2s: %d keep-alives of it (%s), want none", n, f.reqs)
	}
	if got := f.leaseOf(t, "b"); got == old || got == clientv3.NoLease {
		t.Errorf("create on a lease idle for 1.8s of its 2s: written on lease %x (the idle one is %x), want a new lease", got, old)
	}
	if got := f.reqs.of("LeaseGrant"); got != 1 {
		t.Errorf("create on a lease idle for 1.8s of its 2s: %d grants (%s), want 1", got, f.reqs)
	}
	if got := f.store.SharedLeaseOf(2); got == old {
		t.Errorf("shared lease after the create = %x, the idle one; want a new one", got)
	}
}

// idleSharedLease writes entry "a" of 2 s on f's store and deletes it,
// leaving the shared lease of 2 s with no entry on it; it returns the lease.
func idleSharedLease(t *testing.T, f *fixture) clientv3.LeaseID {
	t.Helper()
	a := mustCreate(t, f.store, "a", "v", 2*time.Second)
	old := f.store.SharedLeaseOf(2)
	if err := f.store.CompareAndDelete(testContext(t), "a", a.Revision); err != nil {
		t.Fatalf("CompareAndDelete(a): %v", err)
	}
	return old
}

// TestSharedIdleLeaseWithinGuardIsKeptAlive checks that a lease idle for less
// than its TTL less the guard (1 s of 2 s) is still kept alive and written
// on, at the cost of one keep-alive and no grant.
func TestSharedIdleLeaseWithinGuardIsKeptAlive(t *testing.T) {
	clk := clocktest.New(time.Time{})
	f := newFixture(t, etcd.WithSharedLease(0), etcd.WithClock(clk))
	old := idleSharedLease(t, f)

	clk.Add(900 * time.Millisecond)
	f.reqs.reset()
	mustCreate(t, f.store, "b", "v", 2*time.Second)
	if got := f.leaseOf(t, "b"); got != old {
		t.Errorf("create on a lease idle for 0.9s of its 2s: written on lease %x, want the shared lease %x", got, old)
	}
	if n, g := f.reqs.keepAlivesOf(old), f.reqs.of("LeaseGrant"); n != 1 || g != 0 {
		t.Errorf("create on a lease idle for 0.9s of its 2s: %d keep-alives, %d grants (%s); want 1 and 0", n, g, f.reqs)
	}
}

// TestSharedKeepAliveNotNearExpiry checks that a holder that renews late,
// when its shared lease may be close to its expiry at the server, loses its
// claim (class lost; its deadline passes before the lease can expire) instead
// of having the batch keep the lease alive into a revocation. The lease is
// abandoned: never kept alive again, and the next write grants a new one.
func TestSharedKeepAliveNotNearExpiry(t *testing.T) {
	clk := clocktest.New(time.Time{})
	f := newFixture(t, etcd.WithSharedLease(0), etcd.WithClock(clk))
	ctx := testContext(t)
	a := mustCreate(t, f.store, "a", "v", 2*time.Second)
	old := f.store.SharedLeaseOf(2)

	clk.Add(1100 * time.Millisecond) // the batch runs at t0 + 1.6s at the latest
	f.reqs.reset()
	stop := advance(t, clk, 100*time.Millisecond, time.Second)
	_, err := f.store.KeepAlive(ctx, "a", a.Revision, 2*time.Second)
	stop()
	if !tooLateLost(err) {
		t.Errorf("KeepAlive at t0+1.1s of an entry on a lease kept last at t0, TTL 2s: %v, want lost, saying neither absent nor changed", err)
	}
	if n := f.reqs.keepAlivesOf(old); n != 0 {
		t.Errorf("KeepAlive at t0+1.1s: %d keep-alives of the lease (%s), want none", n, f.reqs)
	}
	// The entry stays until the lease expires (or the store collects it
	// once its holder's deadline has passed); a retry is lost too.
	stop = advance(t, clk, 100*time.Millisecond, time.Second)
	_, err = f.store.KeepAlive(ctx, "a", a.Revision, 2*time.Second)
	stop()
	if backends.Classify(err) != backends.ClassLost {
		t.Errorf("second KeepAlive after the lease was abandoned: %v, want lost", err)
	}
	if n := f.reqs.keepAlivesOf(old); n != 0 {
		t.Errorf("second KeepAlive: %d keep-alives of the abandoned lease (%s), want none", n, f.reqs)
	}
	mustCreate(t, f.store, "b", "v", 2*time.Second)
	if got := f.leaseOf(t, "b"); got == old || got == clientv3.NoLease {
		t.Errorf("create after the lease was abandoned: written on %x (abandoned %x), want a new lease", got, old)
	}
}

// TestSharedKeepAliveServedBeforeGuard checks that a batch that would run
// only after the entry's lease has come too close to its expiry to be kept
// alive (one interval after the last batch) runs sooner, so that a holder
// renewing in time keeps its claim.
func TestSharedKeepAliveServedBeforeGuard(t *testing.T) {
	clk := clocktest.New(time.Time{})
	f := newFixture(t, etcd.WithSharedLease(500*time.Millisecond), etcd.WithClock(clk))
	ctx := testContext(t)
	a := mustCreate(t, f.store, "a", "v", 2*time.Second) // the lease is kept until t0 + 2s, fit until t0 + 1s
	b := mustCreate(t, f.store, "b", "v", 2*time.Second)
	renewOnce(t, f.store, a) // a batch at t0
	// b is deleted behind the store's back; once its watch has seen that,
	// the store no longer vouches for b, and reads it before keeping its
	// lease alive.
	del, err := f.raw.Delete(ctx, f.prefix+"b")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the store's watch sees the delete", func(context.Context) bool {
		return f.store.Seen() >= del.Header.Revision
	})
	// A batch at t0 + 0.5s keeps nothing alive: its only entry is gone.
	clk.Add(500 * time.Millisecond)
	if _, err := f.store.KeepAlive(ctx, "b", b.Revision, 2*time.Second); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("KeepAlive(b) of a deleted entry: %v, want lost", err)
	}
	// The next batch would be due at t0 + 1s, when the lease is no longer
	// fit; a's renewal at t0 + 0.8s must be served before.
	clk.Add(300 * time.Millisecond)
	stop := advance(t, clk, 100*time.Millisecond, time.Second)
	_, err = f.store.KeepAlive(ctx, "a", a.Revision, 2*time.Second)
	stop()
	if err != nil {
		t.Errorf("KeepAlive(a) at t0+0.8s, lease kept at t0, last batch at t0+0.5s: %v, want nil", err)
	}
}

// indexReads makes a client see keys-only reads as etcd from v3.7 answers
// them: from its index, with the keys' revisions but without their leases
// (Lease 0). etcd v3.6, which these tests run, reads them from its store
// and sends the leases.
func indexReads() grpc.DialOption {
	strip := func(keysOnly bool, r *pb.RangeResponse) {
		if !keysOnly || r == nil {
			return
		}
		for _, kv := range r.Kvs {
			kv.Lease = 0
		}
	}
	return grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
			return err
		}
		switch rq := req.(type) {
		case *pb.RangeRequest:
			strip(rq.KeysOnly, reply.(*pb.RangeResponse))
		case *pb.TxnRequest:
			rs := reply.(*pb.TxnResponse)
			ops := rq.Failure
			if rs.Succeeded {
				ops = rq.Success
			}
			for i, op := range ops {
				if r := op.GetRequestRange(); r != nil && i < len(rs.Responses) {
					strip(r.KeysOnly, rs.Responses[i].GetResponseRange())
				}
			}
		}
		return nil
	})
}

// TestSharedKeepAliveWithIndexReads checks that a batch verifies its entries
// with a keys-only read, which etcd from v3.7 answers without the keys'
// leases. The batch took the lease to keep alive from that read: lease 0,
// which etcd does not have, so every KeepAlive on a shared lease was lost at
// the holder's first renewal (and its elector, told so, deleted its own claim
// and took it again, or a follower did: every term ended at its first
// renewal). The lease comes from the store's registry, which knows the lease
// it wrote the entry at that revision on.
func TestSharedKeepAliveWithIndexReads(t *testing.T) {
	srv := etcdtest.Start(t)
	cfg := clientv3.Config{Endpoints: srv.Endpoints(), DialTimeout: 5 * time.Second, Logger: nopLogger, DialOptions: []grpc.DialOption{indexReads()}}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	s := openStore(t, cli, newPrefix(t), etcd.WithSharedLease(0))
	ctx := testContext(t)
	a := mustCreate(t, s, "a", "v", 2*time.Second)
	for i := range 2 {
		e, err := s.KeepAlive(ctx, "a", a.Revision, 2*time.Second)
		if err != nil || e.Revision != a.Revision {
			t.Fatalf("KeepAlive %d of a live entry, with keys-only reads that carry no lease: %+v, %v; want revision %d", i, e, err, a.Revision)
		}
	}
}
