package etcd_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/elector"
)

// steadyFor is how long TestSteadyLeader holds its election. The default
// keeps it short enough for every run; `make steady` runs it for 30 s.
var steadyFor = flag.Duration("etcd.steady", 5*time.Second, "how long TestSteadyLeader runs its election")

// TestSteadyLeader runs three candidates, each with its own client and store
// (as three processes), on one etcd with etcd's default timings and fsync;
// TTL 2 s, renew and retry every 500 ms, followers on the watch. With no
// fault at all, the first leader keeps its term for the whole run, in both
// lease modes.
func TestSteadyLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real election for seconds")
	}
	srv := etcdtest.Start(t, etcdtest.DefaultTimings())
	for _, mode := range []struct {
		name string
		opts []etcd.Option
	}{
		{"lease=per-entry", nil},
		{"lease=shared", []etcd.Option{etcd.WithSharedLease(0)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			prefix := newPrefix(t)
			var mu sync.Mutex
			var elected []string // guarded by mu
			var demoted []string // guarded by mu
			els := make([]*elector.Elector, candidates)
			for i := range els {
				s := openStore(t, newClient(t, srv.Endpoints(), nil), prefix, mode.opts...)
				locker, err := backends.NewLocker(s)
				if err != nil {
					t.Fatal(err)
				}
				who := fmt.Sprintf("c%d", i)
				els[i], err = elector.New(locker, elector.Config{
					Key:         "leader",
					Identity:    who,
					TTL:         2 * time.Second,
					RenewPeriod: 500 * time.Millisecond,
					RetryPeriod: 500 * time.Millisecond,
					OnElected: func(ctx context.Context, term elector.Term) {
						mu.Lock()
						elected = append(elected, fmt.Sprintf("%s (token %d)", who, term.Token))
						mu.Unlock()
						<-ctx.Done() // the leader's work runs for its whole term
					},
					OnDemoted: func(term elector.Term, cause elector.Cause) {
						mu.Lock()
						demoted = append(demoted, fmt.Sprintf("%s (token %d): %v", who, term.Token, cause))
						mu.Unlock()
					},
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			for _, el := range els {
				if err := el.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, 10*time.Second, "a first leader", func(context.Context) bool {
				mu.Lock()
				defer mu.Unlock()
				return len(elected) > 0
			})
			end := clock.New().Timer(*steadyFor)
			<-end.C
			mu.Lock()
			gotElected, gotDemoted := append([]string(nil), elected...), append([]string(nil), demoted...)
			mu.Unlock()
			if len(gotElected) != 1 || len(gotDemoted) != 0 {
				t.Errorf("in %v without faults: elected %v, demoted %v; want one term, never demoted", *steadyFor, gotElected, gotDemoted)
			}
			for _, el := range els {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				if err := el.Stop(ctx); err != nil {
					t.Errorf("stop: %v", err)
				}
				cancel()
			}
		})
	}
}
