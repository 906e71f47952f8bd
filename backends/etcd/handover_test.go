package etcd_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/elector"
)

// TestHandoverRoundTrips counts, request by request and in order, what a
// graceful handover costs on etcd: from the leader's release to the moment
// the follower, woken by its watch, learns it leads (its OnElected). The
// leader's release is one transaction. The follower's acquisition, whose
// watch saw the key deleted, so that it does not check the conditions
// alone before its lease request (as an attempt that may meet a held claim
// does, so that it costs no lease):
//
//   - with a lease per claim: the grant of the claim's lease, the
//     transaction;
//   - with a shared lease the follower's store has not kept alive lately
//     (it holds nothing of that TTL): the same, a grant or a keep-alive
//     before the transaction, so that no write goes on a lease that may be
//     close to its expiry;
//   - with a shared lease the follower's store kept alive less than half a
//     TTL ago (it holds other claims): the transaction at once, then one
//     keep-alive of the lease, so that the entry lives a TTL from after the
//     attempt began.
//
// Each is needed for safety; the package documentation says why.
func TestHandoverRoundTrips(t *testing.T) {
	srv := etcdtest.Start(t)
	const ttl = 4 * time.Second // a ready shared lease stays ready for TTL/2
	for _, tc := range []struct {
		name    string
		opts    []etcd.Option
		holding bool // the follower's store holds another entry of the TTL
		want    []string
	}{
		{"lease=per-entry", nil, false, []string{"LeaseGrant", "Txn"}},
		{"lease=shared/idle", []etcd.Option{etcd.WithSharedLease(0)}, false, []string{"LeaseGrant", "Txn"}},
		{"lease=shared/holding", []etcd.Option{etcd.WithSharedLease(0)}, true, []string{"Txn", "LeaseKeepAlive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := newPrefix(t)
			reqsA, reqsB := newCounter(), newCounter()
			storeA := openStore(t, newClient(t, srv.Endpoints(), reqsA), prefix, tc.opts...)
			storeB := openStore(t, newClient(t, srv.Endpoints(), reqsB), prefix, tc.opts...)
			won := make(chan string, 4)
			lost := make(chan struct{}, 4)
			start := func(s *etcd.Store, who string) *elector.Elector {
				t.Helper()
				locker, err := backends.NewLocker(s)
				if err != nil {
					t.Fatal(err)
				}
				el, err := elector.New(locker, elector.Config{
					Key:         "leader",
					Identity:    who,
					TTL:         ttl,
					RenewPeriod: time.Second,
					RetryPeriod: time.Second,
					OnElected: func(ctx context.Context, _ elector.Term) {
						won <- who
						<-ctx.Done()
					},
					Trace: elector.Trace{
						ElectionLost: func(backends.Class, time.Duration) { lost <- struct{}{} },
					},
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := el.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = el.Stop(context.Background()) })
				return el
			}
			ctx := testContext(t)
			await := func(what string, ch <-chan string) string {
				t.Helper()
				select {
				case who := <-ch:
					return who
				case <-ctx.Done():
					t.Fatalf("%s: not within the test's time", what)
					return ""
				}
			}
			a := start(storeA, "a")
			if who := await("a first leader", won); who != "a" {
				t.Fatalf("first leader %q, want a", who)
			}
			start(storeB, "b")
			select {
			case <-lost: // b's first attempt met a's claim; b waits on its watch
			case <-ctx.Done():
				t.Fatal("b's first attempt: not within the test's time")
			}
			if tc.holding {
				mustCreate(t, storeB, "other", "b", ttl)
			}

			reqsA.reset()
			reqsB.reset()
			if err := a.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if who := await("the next leader", won); who != "b" {
				t.Fatalf("next leader %q, want b", who)
			}
			// Watch messages are the streams' openings, not requests on
			// the path (the store's sentinel may open its watch late).
			if got := reqsA.sequence("Watch", "LeaseKeepAlive"); !slices.Equal(got, []string{"Txn"}) {
				t.Errorf("the leader's stop sent %v besides its renewals, want [Txn] (its release)", got)
			}
			if got := reqsB.sequence("Watch"); !slices.Equal(got, tc.want) {
				t.Errorf("from the release to leading, the follower sent %v, want %v", got, tc.want)
			}
		})
	}
}
