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
// count it expired, which is this backend's rule (see the package doc).
func TestConformance(t *testing.T) {
	c := startCluster(t)
	clk := clocktest.New(time.Time{})
	var open fleet
	newStore := func(t *testing.T, ns string) backends.Store {
		s := c.store(t, ns, clk, nil)
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
		},
		TTL: time.Second,
	})
}
