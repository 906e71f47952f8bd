package etcd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tenure-go/tenure/allocator"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/clocktest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestScanCostsTwoRequests checks that Scan, unlike List, sends no lease
// lookup per entry: entries on fifty leases of their own cost the range
// read and one listing of the leases; and that it lists what List lists,
// leaving out an entry whose lease was revoked behind the store's back.
func TestScanCostsTwoRequests(t *testing.T) {
	f := newFixture(t)
	ctx := testContext(t)
	const n = 50
	for i := range n {
		mustCreate(t, f.store, fmt.Sprintf("k/%02d", i), "v", 10*time.Second)
	}
	mustCreate(t, f.store, "k/plain", "v", 0)
	gone := mustCreate(t, f.peer(t), "k/revoked", "v", 10*time.Second)

	listed, err := f.store.List(ctx, "k/")
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != n+2 {
		t.Fatalf("List listed %d entries, want %d", len(listed), n+2)
	}
	f.reqs.reset()
	scanned, err := f.store.Scan(ctx, "k/")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.reqs.Load(); got != 2 {
		t.Errorf("Scan of %d entries on %d leases sent %d requests (%s), want 2: the range and LeaseLeases", n+2, n+1, got, f.reqs)
	}
	if len(scanned) != len(listed) {
		t.Fatalf("Scan listed %d entries, List %d", len(scanned), len(listed))
	}
	for i, e := range scanned {
		l := listed[i]
		if e.Key != l.Key || string(e.Value) != string(l.Value) || e.Revision != l.Revision || e.CreateRevision != l.CreateRevision {
			t.Errorf("Scan entry %d = %+v, List's %+v", i, e, l)
		}
		if (e.TTL > 0) != (l.TTL > 0) || e.TTL > l.TTL || e.Remaining != 0 {
			t.Errorf("Scan entry %q: TTL %v, Remaining %v; List: TTL %v; want a TTL no longer than List's, positive with it, and no remaining time",
				e.Key, e.TTL, e.Remaining, l.TTL)
		}
	}

	// The peer's lease revoked directly: etcd deletes its key with it.
	resp, err := f.raw.Get(ctx, f.prefix+"k/revoked")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get of %q: %v, %v", gone.Key, resp, err)
	}
	if _, err := f.raw.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	scanned, err = f.store.Scan(ctx, "k/")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range scanned {
		if e.Key == "k/revoked" {
			t.Errorf("Scan lists %q after its lease was revoked", e.Key)
		}
	}
	if len(scanned) != n+1 {
		t.Errorf("Scan after the revoke listed %d entries, want %d", len(scanned), n+1)
	}
}

// TestAllocatorGCCostsRequestsPerPass checks that a garbage collection pass
// of the allocator over etcd costs a few requests however many references
// it reads: two members referencing 150 keys each, every reference on a
// lease of its own, cost the collecting member its three range reads and
// one listing of the leases (only references have leases), not one lease
// lookup per reference (303 requests here, 2,003 for 1,000 keys).
func TestAllocatorGCCostsRequestsPerPass(t *testing.T) {
	srv := etcdtest.Start(t)
	prefix := newPrefix(t)
	const keys = 150
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	reqs := newCounter()
	var as []*allocator.Allocator
	for i, c := range []*counter{reqs, nil} {
		s := openStore(t, newClient(t, srv.Endpoints(), c), prefix)
		a, err := allocator.New(s, allocator.Config{
			Prefix: "ids/", Member: fmt.Sprintf("m%d", i), TTL: time.Hour, Grace: time.Minute,
			GCInterval: -1, Clock: clk,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Close(context.Background()) })
		as = append(as, a)
	}
	ctx := testContext(t)
	for k := range keys {
		for _, a := range as {
			if _, _, err := a.Allocate(ctx, fmt.Sprintf("key/%d", k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	reqs.reset()
	st, err := as[0].RunGC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.References != 2*keys || st.Indexed != keys || st.Deleted != 0 {
		t.Fatalf("RunGC = %+v, want %d references, %d indexed, none deleted", st, 2*keys, keys)
	}
	if got := reqs.Load(); got > 4 {
		t.Errorf("a pass over %d references on %d leases sent %d requests (%s), want at most 4: three range reads and a lease listing",
			st.References, st.References, got, reqs)
	}
	t.Logf("one pass over %d references, %d index and %d master entries: %d requests (%s)", st.References, st.Indexed, st.Masters, reqs.Load(), reqs)
}
