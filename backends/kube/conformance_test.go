package kube

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/backendtest"
	"github.com/tenure-go/tenure/clocktest"
)

// TestConformance runs the backends conformance suite against a real API
// server. Expiry is judged on a fake clock shared by every store of the run.
// Each store follows its namespace through a watch, as an elector's
// followers do, and time moves only after every watch has seen every write:
// a peer that has not observed a version of an object for a TTL does not
// count it expired, which is this backend's rule (see the package doc). It
// runs once per renewal mode.
func TestConformance(t *testing.T) {
	c := startCluster(t)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			clk := clocktest.New(time.Time{})
			var open fleet
			newStore := func(t *testing.T, ns string) backends.Store {
				s := c.store(t, ns, clk, nil, m.opts...)
				follow(t, s)
				open.add(t, s)
				return s
			}
			backendtest.Run(t, backendtest.Harness{
				New: func(t *testing.T) backends.Store { return newStore(t, c.namespace(t)) },
				Peer: func(t *testing.T, st backends.Store) backends.Store {
					return newStore(t, st.(*Store).namespace)
				},
				// A process restart: the objects stay, what the process saw is gone.
				Reopen: func(t *testing.T, st backends.Store) backends.Store {
					if err := st.Close(); err != nil {
						t.Fatalf("Close: %v", err)
					}
					return newStore(t, st.(*Store).namespace)
				},
				Elapse: func(d time.Duration) {
					if err := c.syncWatches(t.Context(), open.all()); err != nil {
						t.Errorf("before moving the clock by %v: %v", d, err)
					}
					clk.Add(d)
					// In session mode the time that passed may have
					// made a store clear claims nobody kept alive;
					// every store then sees what it did.
					for _, s := range open.all() {
						if err := waitFor(t.Context(), s.settled); err != nil {
							t.Errorf("after moving the clock by %v: a store's batches did not settle: %v (%s)", d, err, s.own.debug())
						}
					}
					if err := c.syncWatches(t.Context(), open.all()); err != nil {
						t.Errorf("after moving the clock by %v: %v", d, err)
					}
				},
				TTL: time.Second,
			})
		})
	}
}

// modes are the two ways a store renews its claims; the conformance suite
// and the failure-mode tests run in both. Session mode starts each batch as
// soon as the one before it ended: the tests move a fake clock, which no
// batch timer could wait on.
var modes = []struct {
	name string
	opts []Option
}{
	{"mode=per-claim", nil},
	{"mode=session", []Option{WithSession(0)}},
}
