package etcd_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

// Elector-level fault tests: electors over this store, each on its own
// client to one member of a three-member cluster, with the shortest lease
// the cluster grants (1 s).

// startElector runs an elector named who over a store on member i.
func startElector(t *testing.T, c *etcdtest.Cluster, i int, prefix, who string, ts *electortest.Terms, opts ...etcd.Option) *elector.Elector {
	t.Helper()
	s := memberStore(t, c, i, prefix, opts...)
	locker, err := backends.NewLocker(s)
	if err != nil {
		t.Fatal(err)
	}
	cfg := elector.Config{
		Key:      "leader",
		Identity: who,
		TTL:      time.Second,
	}
	ts.Install(&cfg, who)
	el, err := elector.New(locker, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := el.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := el.Stop(ctx); err != nil {
			t.Errorf("stop %s: %v", who, err)
		}
	})
	return el
}

// TestFaultElectorBlackholed has the leading elector's member stop answering
// it. It stops acting by its own local deadline (its leadership context ends
// then, not later), the server expires its claim, the other elector takes
// over with a higher token, and the two terms never overlap.
func TestFaultElectorBlackholed(t *testing.T) {
	clusters(t, func(t *testing.T, start func(*testing.T) *etcdtest.Cluster) {
		leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
			c := start(t)
			prefix := newPrefix(t)
			h := nonLeader(t, c)
			o := nonLeader(t, c, h)
			ts := electortest.NewTerms(clock.New())
			a := startElector(t, c, h, prefix, "a", ts, opts...)
			if who := ts.Next(t, within(t, 10*time.Second)); who != "a" {
				t.Fatalf("first leader %q, want a", who)
			}
			startElector(t, c, o, prefix, "b", ts, opts...)

			c.Blackhole(h)
			if who := ts.Next(t, within(t, 10*time.Second)); who != "b" {
				t.Fatalf("leader after the blackhole %q, want b", who)
			}
			electortest.Await(t, testContext(t), "a's term ends", func() bool { return !slices.Contains(ts.Leading(), "a") }, ts)
			if a.IsLeader() {
				t.Errorf("a still reports leading after b was elected")
			}
			all := ts.Check(t)
			first := all[0]
			electortest.EndsByDeadline(t, []electortest.Term{first})
			c.Unblackhole(h)
		})
	})
}

// TestFaultElectorLeaderChanges runs electors on all three members while the
// etcd leader is stopped and restarted, twice, and one elector's member is
// partitioned away. Whatever happens to who leads, terms never overlap and
// tokens strictly increase.
func TestFaultElectorLeaderChanges(t *testing.T) {
	clusters(t, func(t *testing.T, start func(*testing.T) *etcdtest.Cluster) {
		leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
			c := start(t)
			prefix := newPrefix(t)
			ts := electortest.NewTerms(clock.New())
			els := make([]*elector.Elector, c.Size())
			for i := range els {
				els[i] = startElector(t, c, i, prefix, fmt.Sprintf("e%d", i), ts, opts...)
			}
			ts.Next(t, within(t, 10*time.Second))
			ctx := testContext(t)
			someoneLeads := func(except int) func(context.Context) bool {
				return func(context.Context) bool {
					for i, el := range els {
						if i != except && el.IsLeader() {
							return true
						}
					}
					return false
				}
			}
			for round := 0; round < 2; round++ {
				lead, err := c.WaitLeader(ctx)
				if err != nil {
					t.Fatal(err)
				}
				c.Stop(lead)
				if _, err := c.WaitLeader(ctx); err != nil {
					t.Fatal(err)
				}
				// An elector on a running member leads, through the change.
				waitFor(t, 10*time.Second, "a leader on a running member", someoneLeads(lead))
				c.Restart(t, lead)
				if _, err := c.WaitLeader(ctx); err != nil {
					t.Fatal(err)
				}
			}
			p := nonLeader(t, c)
			c.Partition(p)
			waitFor(t, 10*time.Second, "the partitioned member's elector does not lead", func(context.Context) bool { return !els[p].IsLeader() })
			waitFor(t, 10*time.Second, "a leader in the majority", someoneLeads(p))
			c.Heal(p)
			all := ts.Check(t)
			if len(all) == 0 {
				t.Fatalf("no terms recorded")
			}
			t.Logf("%d terms; tokens %v", len(all), tokensOf(all))
		})
	})
}

func tokensOf(all []electortest.Term) []int64 {
	var out []int64
	for _, tm := range all {
		out = append(out, tm.Token)
	}
	return out
}
