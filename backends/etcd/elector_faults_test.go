package etcd_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/elector"
)

// Elector-level fault tests: electors over this store, each on its own
// client to one member of a three-member cluster, with the shortest lease
// the cluster grants (1 s).

// term is one leadership as the test saw it, on one wall clock.
type term struct {
	who             string
	token           int64
	start, end      time.Time
	deadline        time.Time // the local deadline when the term ended
	endedByDeadline bool
}

// terms records the terms of several electors.
type terms struct {
	wall clock.Clock

	mu   sync.Mutex
	all  []term                   // guarded by mu; ended terms
	open map[string]term          // guarded by mu; running terms by elector
	won  chan string              // who was elected, in order
	done map[string]chan struct{} // guarded by mu; closed when that elector's current term ends
}

func newTerms() *terms {
	return &terms{wall: clock.New(), open: make(map[string]term), won: make(chan string, 64), done: make(map[string]chan struct{})}
}

// onElected is the OnElected of elector who: it records the term and holds
// it until the leadership context ends.
func (ts *terms) onElected(who string) func(context.Context, elector.Term) {
	return func(ctx context.Context, t elector.Term) {
		ts.mu.Lock()
		ts.open[who] = term{who: who, token: t.Token, start: ts.wall.Now()}
		ended := make(chan struct{})
		ts.done[who] = ended
		ts.mu.Unlock()
		ts.won <- who
		<-ctx.Done()
		now := ts.wall.Now()
		deadline, _ := ctx.Deadline()
		ts.mu.Lock()
		tm := ts.open[who]
		delete(ts.open, who)
		tm.end, tm.deadline = now, deadline
		tm.endedByDeadline = !now.Before(deadline)
		ts.all = append(ts.all, tm)
		ts.mu.Unlock()
		close(ended)
	}
}

// next waits for the next election.
func (ts *terms) next(t *testing.T, limit time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	select {
	case who := <-ts.won:
		return who
	case <-ctx.Done():
		t.Fatalf("no election within %v", limit)
		return ""
	}
}

// ended returns a channel closed when who's current term has ended.
func (ts *terms) ended(who string) <-chan struct{} {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.done[who]
}

// check fails t if two terms overlap or tokens do not strictly increase in
// the order the terms began.
func (ts *terms) check(t *testing.T) []term {
	t.Helper()
	ts.mu.Lock()
	all := slices.Clone(ts.all)
	for _, tm := range ts.open {
		tm.end = ts.wall.Now()
		all = append(all, tm)
	}
	ts.mu.Unlock()
	slices.SortFunc(all, func(a, b term) int { return a.start.Compare(b.start) })
	for i := 1; i < len(all); i++ {
		prev, cur := all[i-1], all[i]
		if cur.start.Before(prev.end) {
			t.Errorf("%s's term (token %d) began %v before %s's (token %d) ended: two leaders", cur.who, cur.token, prev.end.Sub(cur.start), prev.who, prev.token)
		}
		if cur.token <= prev.token {
			t.Errorf("%s's token %d after %s's %d: not increasing", cur.who, cur.token, prev.who, prev.token)
		}
	}
	return all
}

// startElector runs an elector named who over a store on member i.
func startElector(t *testing.T, c *etcdtest.Cluster, i int, prefix, who string, ts *terms, opts ...etcd.Option) *elector.Elector {
	t.Helper()
	s := memberStore(t, c, i, prefix, opts...)
	locker, err := backends.NewLocker(s)
	if err != nil {
		t.Fatal(err)
	}
	el, err := elector.New(locker, elector.Config{
		Key:       "leader",
		Identity:  who,
		TTL:       time.Second,
		OnElected: ts.onElected(who),
	})
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

// TestFaultElectorBlackholed: the leading elector's member stops answering
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
			ts := newTerms()
			a := startElector(t, c, h, prefix, "a", ts, opts...)
			if who := ts.next(t, 10*time.Second); who != "a" {
				t.Fatalf("first leader %q, want a", who)
			}
			startElector(t, c, o, prefix, "b", ts, opts...)

			c.Blackhole(h)
			aEnded := ts.ended("a")
			if who := ts.next(t, 10*time.Second); who != "b" {
				t.Fatalf("leader after the blackhole %q, want b", who)
			}
			select {
			case <-aEnded:
			case <-testContext(t).Done():
				t.Fatalf("a's term never ended")
			}
			if a.IsLeader() {
				t.Errorf("a still reports leading after b was elected")
			}
			all := ts.check(t)
			first := all[0]
			// The leadership context ends at the deadline at the latest (a
			// few milliseconds of timer scheduling aside).
			if late := first.end.Sub(first.deadline); late > 50*time.Millisecond {
				t.Errorf("a stopped acting %v after its local deadline", late)
			}
			c.Unblackhole(h)
		})
	})
}

// TestFaultElectorLeaderChanges: electors on all three members while the
// etcd leader is stopped and restarted, twice, and one elector's member is
// partitioned away. Whatever happens to who leads, terms never overlap and
// tokens strictly increase.
func TestFaultElectorLeaderChanges(t *testing.T) {
	clusters(t, func(t *testing.T, start func(*testing.T) *etcdtest.Cluster) {
		leaseModes(t, func(t *testing.T, opts ...etcd.Option) {
			c := start(t)
			prefix := newPrefix(t)
			ts := newTerms()
			els := make([]*elector.Elector, c.Size())
			for i := range els {
				els[i] = startElector(t, c, i, prefix, fmt.Sprintf("e%d", i), ts, opts...)
			}
			ts.next(t, 10*time.Second)
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
			all := ts.check(t)
			if len(all) == 0 {
				t.Fatalf("no terms recorded")
			}
			t.Logf("%d terms; tokens %v", len(all), tokensOf(all))
		})
	})
}

func tokensOf(ts []term) []int64 {
	var out []int64
	for _, t := range ts {
		out = append(out, t.token)
	}
	return out
}
