package etcd_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/clocktest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// createTxn is the transaction of a claim's create: key absent, then put
// with ttl.
func createTxn(key string, ttl time.Duration) ([]backends.Cond, []backends.Op) {
	return []backends.Cond{{Key: key}}, []backends.Op{{Kind: backends.OpPut, Key: key, Value: []byte("v"), TTL: ttl}}
}

// TestTxnOnReadySharedLeaseKeptAliveAfter checks that a transaction whose put
// goes on a shared lease the store kept alive less than half a TTL ago goes
// out at once, and the lease is kept alive after it succeeds, so that the
// entry lives a TTL from after the call began: a transaction and a
// keep-alive, in that order, and nothing else. Refused, it costs the
// transaction alone.
func TestTxnOnReadySharedLeaseKeptAliveAfter(t *testing.T) {
	f := newFixture(t, etcd.WithSharedLease(0))
	ctx := testContext(t)
	mustCreate(t, f.store, "a", "v", 2*time.Second) // the shared lease is ready
	lease := f.store.SharedLeaseOf(2)

	f.reqs.reset()
	conds, ops := createTxn("b", 2*time.Second)
	res, err := f.store.Txn(ctx, conds, ops)
	if err != nil {
		t.Fatalf("Txn(create b) = %v", err)
	}
	if got, want := f.reqs.sequence("Watch"), []string{"Txn", "LeaseKeepAlive"}; !slices.Equal(got, want) {
		t.Errorf("Txn(create b) on a ready shared lease sent %v, want %v", got, want)
	}
	if n := f.reqs.keepAlivesOf(lease); n != 1 {
		t.Errorf("Txn(create b): %d keep-alives of the shared lease %x, want 1", n, lease)
	}
	if got := f.leaseOf(t, "b"); got != lease {
		t.Errorf("b written on lease %x, want the shared lease %x", got, lease)
	}
	if e := res.Entries[0]; e.TTL != 2*time.Second {
		t.Errorf("Txn(create b) entry TTL %v, want 2s", e.TTL)
	}

	f.reqs.reset()
	if _, err := f.store.Txn(ctx, conds, ops); !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("Txn(create b) again = %v, want a conflict", err)
	}
	if got, want := f.reqs.sequence("Watch"), []string{"Txn"}; !slices.Equal(got, want) {
		t.Errorf("a refused Txn(create b) on a ready shared lease sent %v, want %v", got, want)
	}
}

// TestTxnNeedingALeaseChecksFirst checks that a transaction whose put needs a
// lease request first (a grant per entry, or a shared lease the store has not
// kept alive lately) checks its conditions alone before it, so that a refused
// attempt costs that one request and no lease.
func TestTxnNeedingALeaseChecksFirst(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []etcd.Option
	}{
		{"lease=per-entry", nil},
		{"lease=shared", []etcd.Option{etcd.WithSharedLease(0)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			f := newFixture(t, mode.opts...)
			ctx := testContext(t)
			conds, ops := createTxn("k", 2*time.Second)
			f.reqs.reset()
			if _, err := f.store.Txn(ctx, conds, ops); err != nil {
				t.Fatalf("Txn(create k) = %v", err)
			}
			if got, want := f.reqs.sequence("Watch"), []string{"Txn", "LeaseGrant", "Txn"}; !slices.Equal(got, want) {
				t.Errorf("Txn(create k) with no lease sent %v, want %v", got, want)
			}
			peerReqs := newCounter()
			peer := openStore(t, newClient(t, f.srv.Endpoints(), peerReqs), f.prefix, mode.opts...)
			peerReqs.reset()
			_, err := peer.Txn(ctx, conds, ops)
			if !errors.Is(err, backends.ErrConflict) {
				t.Fatalf("peer's Txn(create k) = %v, want a conflict", err)
			}
			if got, want := peerReqs.sequence("Watch"), []string{"Txn"}; !slices.Equal(got, want) {
				t.Errorf("the peer's refused Txn(create k) sent %v, want %v", got, want)
			}
		})
	}
}

// TestTxnSharedLeaseRevokedUnderIt checks that a shared lease the store
// thinks ready but etcd no longer has (revoked behind its back) makes etcd
// refuse the transaction, which wrote nothing; the store grants a new lease
// and the transaction succeeds on it.
func TestTxnSharedLeaseRevokedUnderIt(t *testing.T) {
	f := newFixture(t, etcd.WithSharedLease(0))
	ctx := testContext(t)
	mustCreate(t, f.store, "a", "v", 2*time.Second)
	old := f.store.SharedLeaseOf(2)
	if _, err := f.raw.Revoke(ctx, old); err != nil {
		t.Fatal(err)
	}
	f.reqs.reset()
	conds, ops := createTxn("b", 2*time.Second)
	res, err := f.store.Txn(ctx, conds, ops)
	if err != nil {
		t.Fatalf("Txn(create b) after the shared lease was revoked = %v", err)
	}
	if got, want := f.reqs.sequence("Watch"), []string{"Txn", "LeaseGrant", "Txn"}; !slices.Equal(got, want) {
		t.Errorf("Txn(create b) after the shared lease was revoked sent %v, want %v", got, want)
	}
	now := f.store.SharedLeaseOf(2)
	if now == old || now == clientv3.NoLease || f.leaseOf(t, "b") != now {
		t.Errorf("b on lease %x, shared lease %x; want a new lease, not %x", f.leaseOf(t, "b"), now, old)
	}
	if _, err := f.store.KeepAlive(ctx, "b", res.Entries[0].Revision, 2*time.Second); err != nil {
		t.Errorf("KeepAlive(b) on the new shared lease = %v", err)
	}
}

// TestTxnOnSharedLeaseTooLateToConfirm covers a transaction that put its
// entry on a shared lease that was ready when it began, but answered so late
// that the lease may now be close to its expiry at the server (the store's
// clock passed TTL − guard since the lease's last keep-alive). The keep-alive
// after the write must not be sent: etcd may answer it alive while a
// revocation already decided deletes the entry, and its holder would believe
// it had a full TTL. The transaction fails as unavailable (no holder gets the
// entry), no keep-alive goes out, and the lease is abandoned.
func TestTxnOnSharedLeaseTooLateToConfirm(t *testing.T) {
	srv := etcdtest.Start(t)
	clk := clocktest.New(time.Time{})
	hc := &hookClient{}
	prefix := newPrefix(t)
	store := openStore(t, hc.client(t, srv.Endpoints()), prefix, etcd.WithSharedLease(0), etcd.WithClock(clk))
	ctx := testContext(t)
	mustCreate(t, store, "a", "v", 2*time.Second) // the shared lease is ready
	lease := store.SharedLeaseOf(2)

	var sentAfter atomic.Int64
	hc.onAfter(func(_ string, req any) bool {
		if !putsKey(req, prefix+"b") {
			return false
		}
		clk.Add(1100 * time.Millisecond) // past keptAt + 2s − guard (1s)
		hc.onSend(func(string, any) bool { sentAfter.Add(1); return false })
		return true
	})
	conds, ops := createTxn("b", 2*time.Second)
	_, err := store.Txn(ctx, conds, ops)
	if !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("Txn(create b) answered past its lease's guard = %v, want ErrUnavailable", err)
	}
	hc.onSend(nil)
	if n := sentAfter.Load(); n != 0 {
		t.Errorf("%d keep-alives sent after the late transaction, want none", n)
	}
	if got := store.SharedLeaseOf(2); got == lease {
		t.Errorf("shared lease after the late transaction = %x, the one close to expiry; want it abandoned", got)
	}
}

// TestTxnOnFreedKeyGrantsAtOnce checks that a create of a key this store's
// watch saw deleted (a follower woken by a release) sends its lease request
// without checking first. If the hint is stale (here the watch ended before
// it saw the key written again), the refused attempt costs its lease and the
// revoke once; the next attempt checks first again.
func TestTxnOnFreedKeyGrantsAtOnce(t *testing.T) {
	f := newFixture(t)
	ctx := testContext(t)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	events, err := f.store.Watch(wctx, "")
	if err != nil {
		t.Fatal(err)
	}
	raw := f.peer(t)
	released := func(key string) {
		t.Helper()
		e := mustCreate(t, raw, key, "peer", 2*time.Second)
		if err := raw.CompareAndDelete(ctx, key, e.Revision); err != nil {
			t.Fatal(err)
		}
		for ev := range events {
			if ev.Kind == backends.EventDelete && ev.Entry.Key == key {
				return
			}
		}
		t.Fatalf("the watch ended before it delivered the delete of %q", key)
	}

	released("k")
	f.reqs.reset()
	conds, ops := createTxn("k", 2*time.Second)
	if _, err := f.store.Txn(ctx, conds, ops); err != nil {
		t.Fatalf("Txn(create k) after its release = %v", err)
	}
	if got, want := f.reqs.sequence("Watch"), []string{"LeaseGrant", "Txn"}; !slices.Equal(got, want) {
		t.Errorf("Txn(create k) after the watch saw it released sent %v, want %v", got, want)
	}

	released("s")
	stopWatch()
	for range events { // the watch has ended: it sees no more
	}
	mustCreate(t, raw, "s", "peer", 2*time.Second)
	conds, ops = createTxn("s", 2*time.Second)
	for _, want := range [][]string{{"LeaseGrant", "Txn", "LeaseRevoke"}, {"Txn"}} {
		f.reqs.reset()
		if _, err := f.store.Txn(ctx, conds, ops); !errors.Is(err, backends.ErrConflict) {
			t.Fatalf("Txn(create s) held by a peer = %v, want a conflict", err)
		}
		if got := f.reqs.sequence("Watch"); !slices.Equal(got, want) {
			t.Errorf("Txn(create s) held by a peer, on a stale hint, sent %v, want %v", got, want)
		}
	}
}
