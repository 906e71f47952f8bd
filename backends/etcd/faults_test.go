package etcd_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
)

// The fault tests run a real three-member etcd cluster, a process per
// member (etcdtest.Cluster: 10 ms ticks, 100 ms election timeout, so the shortest
// lease is 1 s), whose members' clients go through bridges the tests can
// blackhole, and whose members the tests can cut off from each other, stop
// and restart.

func newCluster(t *testing.T) *etcdtest.Cluster {
	t.Helper()
	return waitLeader(t, etcdtest.StartCluster(t, 3))
}

func waitLeader(t *testing.T, c *etcdtest.Cluster) *etcdtest.Cluster {
	t.Helper()
	if _, err := c.WaitLeader(testContext(t)); err != nil {
		t.Fatal(err)
	}
	return c
}

// clusters runs fn against a three-member cluster of etcd v3.6 server
// processes and one of etcd v3.7 server processes (etcdtest.ServerBinary: skipped locally
// without one, failed in CI): start starts one of that kind, with a leader.
func clusters(t *testing.T, fn func(t *testing.T, start func(*testing.T) *etcdtest.Cluster)) {
	t.Run("etcd=v3.6", func(t *testing.T) { fn(t, newCluster) })
	t.Run("etcd=v3.7", func(t *testing.T) {
		bin := etcdtest.ServerBinary(t)
		fn(t, func(t *testing.T) *etcdtest.Cluster { return waitLeader(t, etcdtest.StartProcessCluster(t, bin, 3)) })
	})
}

// leaseModes runs fn once per lease mode: a lease per entry, and one
// shared lease per store (with a short batch interval, as the 1 s leases of
// the cluster need).
func leaseModes(t *testing.T, fn func(t *testing.T, opts ...etcd.Option)) {
	t.Run("lease=per-entry", func(t *testing.T) { fn(t) })
	t.Run("lease=shared", func(t *testing.T) { fn(t, etcd.WithSharedLease(100*time.Millisecond)) })
}

// memberStore opens a store whose client talks to member i only, through
// its bridge.
func memberStore(t *testing.T, c *etcdtest.Cluster, i int, prefix string, opts ...etcd.Option) *etcd.Store {
	t.Helper()
	return openStore(t, newClient(t, c.Endpoints(i), nil), prefix, opts...)
}

// nonLeader is the index of a member that is neither the etcd leader nor
// in not.
func nonLeader(t *testing.T, c *etcdtest.Cluster, not ...int) int {
	t.Helper()
	lead, err := c.WaitLeader(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < c.Size(); i++ {
		if i != lead && !slices.Contains(not, i) {
			return i
		}
	}
	t.Fatalf("no member other than the leader %d and %v", lead, not)
	return -1
}

// heldClaim is where the fault tests that cut a holder off start from: the
// holder holds "claim" with a 1 s lease through a store on member h, and
// other is a store on a second member, neither of the two the etcd leader.
type heldClaim struct {
	c      *etcdtest.Cluster
	wall   clock.Clock
	h      int
	holder *etcd.Store
	other  *etcd.Store
	sent   time.Time      // when the holder's create was sent
	e      backends.Entry // the holder's claim
}

func holdClaim(t *testing.T, c *etcdtest.Cluster, opts ...etcd.Option) *heldClaim {
	t.Helper()
	hc := &heldClaim{c: c, wall: clock.New()}
	prefix := newPrefix(t)
	hc.h = nonLeader(t, c)
	o := nonLeader(t, c, hc.h)
	hc.holder = memberStore(t, c, hc.h, prefix, opts...)
	hc.other = memberStore(t, c, o, prefix, opts...)
	hc.sent = hc.wall.Now()
	hc.e = mustCreate(t, hc.holder, "claim", "holder", time.Second)
	return hc
}

// deadline is the holder's deadline, without a safety margin.
func (hc *heldClaim) deadline() time.Time { return hc.sent.Add(hc.e.TTL) }

// takeOver polls CreateIfAbsent of the claim on the other store until it
// succeeds, and returns the entry and when (on wall) the successful call
// was answered. If none succeeds within limit, the test fails with the
// last attempt's error and what each member says of the cluster.
func (hc *heldClaim) takeOver(t *testing.T, ttl, limit time.Duration) (backends.Entry, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tk := clock.New().Ticker(pollEvery)
	defer tk.Stop()
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		e, err := hc.other.CreateIfAbsent(rctx, "claim", []byte("taker"), ttl)
		rcancel()
		if err == nil {
			return e, hc.wall.Now()
		}
		if !errors.Is(err, backends.ErrExists) && backends.Classify(err) != backends.ClassTransient {
			t.Fatalf("CreateIfAbsent while waiting to take over: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("take over claim: not within %v; the last attempt: %v\n%s", limit, err, hc.c.Describe())
		case <-tk.C:
		}
	}
}

// takeOverThenHeal has the other store take the claim over with ttl,
// checks that it did so no sooner than the holder's deadline and with a
// higher token, then calls heal to let the holder be heard again and waits
// until the holder learns it lost. It returns the taker's entry.
func (hc *heldClaim) takeOverThenHeal(t *testing.T, ttl time.Duration, heal func()) backends.Entry {
	t.Helper()
	// The bound is generous: a claim with a 1 s lease is taken over in
	// about 2 s, but a cluster on a loaded machine can take many seconds
	// to elect a leader and expire the lease.
	taken, at := hc.takeOver(t, ttl, 30*time.Second)
	if at.Before(hc.deadline()) {
		t.Errorf("taken over %v before the holder's deadline: overlap", hc.deadline().Sub(at))
	}
	if taken.CreateRevision <= hc.e.CreateRevision {
		t.Errorf("token after takeover %d, want > %d", taken.CreateRevision, hc.e.CreateRevision)
	}
	heal()
	waitFor(t, 30*time.Second, "holder hears it lost", func(ctx context.Context) bool {
		_, err := hc.holder.KeepAlive(ctx, "claim", hc.e.Revision, time.Second)
		return backends.Classify(err) == backends.ClassLost
	})
	return taken
}

// TestFaultBlackholedHolder has the holder's member stop answering it. Its
// requests fail as transient; the server expires its lease; another process
// takes the claim over no sooner than the holder's own deadline, with a
// higher token; and when the holder is heard again it learns it lost.
func TestFaultBlackholedHolder(t *testing.T) {
	clusters(t, func(t *testing.T, start func(*testing.T) *etcdtest.Cluster) {
		leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
			hc := holdClaim(t, start(t), opts...)
			hc.c.Blackhole(hc.h)
			rctx, cancel := context.WithTimeout(testContext(t), 300*time.Millisecond)
			_, err := hc.holder.KeepAlive(rctx, "claim", hc.e.Revision, time.Second)
			cancel()
			if err == nil || backends.Classify(err) != backends.ClassTransient {
				t.Errorf("KeepAlive through a blackholed member = %v, want a transient error", err)
			}
			hc.takeOverThenHeal(t, time.Second, func() { hc.c.Unblackhole(hc.h) })
		})
	})
}

// TestFaultPartitionedMember cuts the holder's member off from the rest of
// the cluster. Requiring a leader, its requests fail fast as unavailable; the
// majority expires the lease and another takes over.
func TestFaultPartitionedMember(t *testing.T) {
	clusters(t, func(t *testing.T, start func(*testing.T) *etcdtest.Cluster) {
		leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
			hc := holdClaim(t, start(t), opts...)
			ctx := testContext(t)
			hc.c.Partition(hc.h)

			// Transactions fail at once with "no leader"; reads and lease requests
			// are retried by the client until their deadline (with more endpoints it
			// would fail over). Both are transient.
			waitFor(t, 5*time.Second, "partitioned member refuses writes with ErrUnavailable", func(ctx context.Context) bool {
				rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				defer cancel()
				_, err := hc.holder.CreateIfAbsent(rctx, "probe", []byte("x"), 0)
				if err == nil {
					t.Fatalf("CreateIfAbsent on a partitioned member succeeded")
				}
				return errors.Is(err, backends.ErrUnavailable)
			})
			rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_, err := hc.holder.KeepAlive(rctx, "claim", hc.e.Revision, time.Second)
			cancel()
			// A renewal of the store's own entry is a keep-alive alone; once
			// its lease may be close to its expiry (half of a short lease
			// after the create's grant, at the earliest), the store refuses to
			// send it and reports the claim lost, in both lease modes, before
			// the member could refuse it.
			late := hc.wall.Since(hc.sent) >= hc.e.TTL/2
			if c := backends.Classify(err); c != backends.ClassTransient && (c != backends.ClassLost || !late) {
				t.Errorf("KeepAlive on a partitioned member = %v, want a transient error", err)
			}

			// The taker's claim must outlive the heal: the holder's create
			// below must meet a live claim however long the healed member takes.
			hc.takeOverThenHeal(t, 30*time.Second, func() { hc.c.Heal(hc.h) })
			if _, err := hc.holder.CreateIfAbsent(ctx, "claim", []byte("again"), time.Second); !errors.Is(err, backends.ErrExists) {
				t.Errorf("holder's create while the other holds = %v, want ErrExists", err)
			}
		})
	})
}

// TestFaultMemberRestart stops the holder's member and brings it back. While
// it is down the holder cannot renew, the claim expires and another takes it;
// after the restart the holder learns it lost, and tokens only grew.
func TestFaultMemberRestart(t *testing.T) {
	clusters(t, func(t *testing.T, start func(*testing.T) *etcdtest.Cluster) {
		leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
			hc := holdClaim(t, start(t), opts...)
			ctx := testContext(t)
			hc.c.Stop(hc.h)
			// The taker's claim must outlive the restart.
			taken := hc.takeOverThenHeal(t, 10*time.Second, func() {
				hc.c.Restart(t, hc.h)
				if _, err := hc.c.WaitLeader(ctx); err != nil {
					t.Fatal(err)
				}
			})
			if err := hc.other.CompareAndDelete(ctx, "claim", taken.Revision); err != nil {
				t.Fatalf("release: %v", err)
			}
			again := mustCreate(t, hc.holder, "claim", "holder", time.Second)
			if !(hc.e.CreateRevision < taken.CreateRevision && taken.CreateRevision < again.CreateRevision) {
				t.Errorf("tokens %d, %d, %d across the restart, want strictly increasing", hc.e.CreateRevision, taken.CreateRevision, again.CreateRevision)
			}
		})
	})
}

// TestFaultLeaderChange stops the etcd leader while a claim is held and
// renewed. The holder keeps its claim (a new leader extends leases, never
// shortens them), and tokens issued before, during and after the change
// strictly increase.
func TestFaultLeaderChange(t *testing.T) {
	clusters(t, func(t *testing.T, start func(*testing.T) *etcdtest.Cluster) {
		leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
			c := start(t)
			prefix := newPrefix(t)
			lead := c.Leader()
			h := nonLeader(t, c, lead)
			holder := memberStore(t, c, h, prefix, opts...)
			ctx := testContext(t)

			var tokens []int64
			claim := mustCreate(t, holder, "claim", "holder", 2*time.Second)
			tokens = append(tokens, claim.CreateRevision)
			before := mustCreate(t, holder, "other", "x", 0)
			tokens = append(tokens, before.CreateRevision)

			c.Stop(lead)
			if nl, err := c.WaitLeader(ctx); err != nil || nl == lead {
				t.Fatalf("new leader = %d, %v; want one other than %d", nl, err, lead)
			}
			// The claim survived the change: renewals succeed (after, at most, a few
			// transient errors while the cluster elects).
			waitFor(t, 5*time.Second, "renew after the leader change", func(ctx context.Context) bool {
				rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				defer cancel()
				got, err := holder.KeepAlive(rctx, "claim", claim.Revision, 2*time.Second)
				if err != nil && backends.Classify(err) != backends.ClassTransient {
					t.Fatalf("KeepAlive across the leader change = %v, want success or transient", err)
				}
				return err == nil && got.CreateRevision == claim.CreateRevision
			})
			if err := holder.CompareAndDelete(ctx, "claim", claim.Revision); err != nil {
				t.Fatalf("release after the change: %v", err)
			}
			after := mustCreate(t, holder, "claim", "holder", 2*time.Second)
			tokens = append(tokens, after.CreateRevision)

			c.Restart(t, lead)
			if _, err := c.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
			if err := holder.CompareAndDelete(ctx, "claim", after.Revision); err != nil {
				t.Fatalf("release after the old leader came back: %v", err)
			}
			last := mustCreate(t, holder, "claim", "holder", 2*time.Second)
			tokens = append(tokens, last.CreateRevision)
			for i := 1; i < len(tokens); i++ {
				if tokens[i] <= tokens[i-1] {
					t.Errorf("tokens %v: not strictly increasing at %d", tokens, i)
				}
			}
		})
	})
}

// TestFaultWatchEndsWithoutLeader checks that the store's watch of its prefix
// requires a leader, so when the store's member is cut off from the rest of
// the cluster etcd ends it, and the store vouches for nothing until it is
// back. A key deleted meanwhile through another member is then caught by the
// renewal's read once the member is back, and an untouched entry gets the
// store's word back from that read once the watch is back. Before, the watch
// stayed open and silent on the cut-off member, and the store went on
// vouching for every entry for the whole partition: a renewal that reached
// the leader another way was one keep-alive, whatever happened to its key.
func TestFaultWatchEndsWithoutLeader(t *testing.T) {
	clusters(t, func(t *testing.T, start func(*testing.T) *etcdtest.Cluster) {
		leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
			c := start(t)
			prefix := newPrefix(t)
			h := nonLeader(t, c)
			o := nonLeader(t, c, h)
			s := memberStore(t, c, h, prefix, opts...)
			ctx := testContext(t)
			// Long enough to outlive the partition: the renewals after it must
			// meet the keys' leases alive, so that only the read can tell.
			const ttl = 10 * time.Second
			gone := mustCreate(t, s, "gone", "v", ttl)
			kept := mustCreate(t, s, "kept", "v", ttl)
			renewOnce(t, s, gone)
			if !s.Vouched("gone", gone.Revision) || !s.Vouched("kept", kept.Revision) {
				t.Fatal("the store does not vouch for the entries it wrote")
			}

			c.Partition(h)
			waitFor(t, 10*time.Second, "the store stops vouching once its member has no leader", func(context.Context) bool {
				return !s.Vouched("gone", gone.Revision) && !s.Vouched("kept", kept.Revision)
			})
			if _, err := c.Client(t, o).Delete(ctx, prefix+"gone"); err != nil {
				t.Fatalf("delete through member %d: %v", o, err)
			}
			c.Heal(h)
			if _, err := c.WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}

			renew := func(key string, rev int64) error {
				var err error
				waitFor(t, 10*time.Second, "a renewal the healed member answers", func(ctx context.Context) bool {
					rctx, cancel := context.WithTimeout(ctx, time.Second)
					defer cancel()
					_, err = s.KeepAlive(rctx, key, rev, ttl)
					return backends.Classify(err) != backends.ClassTransient
				})
				return err
			}
			if err := renew("gone", gone.Revision); !errors.Is(err, backends.ErrNotFound) || backends.Classify(err) != backends.ClassLost {
				t.Errorf("renewal of an entry deleted while the store's member had no leader = %v, want lost (ErrNotFound)", err)
			}
			waitFor(t, 10*time.Second, "the store's watch is established again", func(context.Context) bool { return s.Watching() })
			if err := renew("kept", kept.Revision); err != nil {
				t.Errorf("renewal of an untouched entry after the partition = %v, want success", err)
			}
			if !s.Vouched("kept", kept.Revision) {
				t.Error("the store does not vouch again for an entry a read found unchanged once its watch is back")
			}
		})
	})
}
