package etcd_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/elector"
)

// TestCandidacyRidesTheSharedLease checks that on a shared lease a
// leader's candidacy entry costs no keep-alive per renewal period: over
// the same renewals, a leader with Config.Candidacy sends as many lease
// keep-alives as one without, one per renewal, since a leader leaves its
// own candidacy unrenewed. What Candidacy does cost the leader is its
// listing of the candidacies after each renewal (a Range, and on etcd a
// LeaseTimeToLive for the entries' remaining time), which the test logs.
func TestCandidacyRidesTheSharedLease(t *testing.T) {
	srv := etcdtest.Start(t)
	const renewals = 5
	for _, candidacy := range []bool{false, true} {
		name := "candidacy=off"
		if candidacy {
			name = "candidacy=on"
		}
		t.Run(name, func(t *testing.T) {
			reqs := newCounter()
			s := openStore(t, newClient(t, srv.Endpoints(), reqs), newPrefix(t), etcd.WithSharedLease(0))
			locker, err := backends.NewLocker(s)
			if err != nil {
				t.Fatal(err)
			}
			var renewed atomic.Int64
			changed := make(chan struct{}, 64)
			el, err := elector.New(locker, elector.Config{
				Key: "leader", Identity: "a",
				TTL: 4 * time.Second, RenewPeriod: time.Second, RetryPeriod: time.Second,
				Candidacy: candidacy, Priority: 1,
				Trace: elector.Trace{Renewed: func(elector.Term, time.Duration, time.Duration) {
					renewed.Add(1)
					changed <- struct{}{}
				}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := el.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = el.Stop(context.Background()) })
			ctx := testContext(t)
			awaitRenewals := func(n int64) {
				t.Helper()
				for renewed.Load() < n {
					select {
					case <-changed:
					case <-ctx.Done():
						t.Fatalf("%d renewals: not within the test's time (%d)", n, renewed.Load())
					}
				}
			}
			// From the second renewal on, the candidacy's renewal timed
			// before the term began is behind us.
			awaitRenewals(2)
			reqs.reset()
			awaitRenewals(2 + renewals)
			kept := reqs.of("LeaseKeepAlive")
			t.Logf("%d renewals: %s; %v", renewals, reqs, reqs.sequence("Watch"))
			if kept > renewals {
				t.Errorf("%d lease keep-alives over %d renewals, want one per renewal: a leader sends nothing for its candidacy", kept, renewals)
			}
		})
	}
}
