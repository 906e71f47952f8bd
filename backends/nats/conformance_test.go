package nats

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/backendtest"
	"github.com/tenure-go/tenure/backends/nats/natstest"
	"github.com/tenure-go/tenure/clocktest"
)

// conformance runs the suite against the servers at urls, each store on a
// bucket of its own with the given replicas. Expiry is judged on a fake
// clock shared by every store of the run; before the clock moves, every
// open store reads every key of its bucket, so that a peer has seen what it
// must count from (this backend judges expiry by local observation, see
// the package doc).
func conformance(t *testing.T, urls string, replicas int) {
	clk := clocktest.New(time.Time{})
	var open2 fleet
	newStore := func(t *testing.T, bucket string) backends.Store {
		s := open(t, urls, bucket, replicas, WithClock(clk))
		open2.add(s)
		return s
	}
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Store { return newStore(t, newBucketName()) },
		Peer: func(t *testing.T, st backends.Store) backends.Store {
			return newStore(t, st.(*Store).bucket)
		},
		// A process restart: the bucket stays, what the process saw is gone.
		Reopen: func(t *testing.T, st backends.Store) backends.Store {
			if err := st.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return newStore(t, st.(*Store).bucket)
		},
		Elapse: func(d time.Duration) {
			open2.observe(t)
			clk.Add(d)
		},
		TTL: time.Second,
	})
}

// TestConformance runs the conformance suite on one server, and on a
// three-server cluster with a bucket replicated on all three.
func TestConformance(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		srv := natstest.Start(t)
		conformance(t, srv.URL(), 1)
	})
	t.Run("cluster", func(t *testing.T) {
		c := natstest.StartCluster(t, 3)
		conformance(t, c.URLs(), 3)
	})
}

// TestConformanceRealTime runs the conformance suite on one server with
// expiry judged on the real clock, as in production. The suite waits for
// expiry by polling one store; every store follows its bucket through a
// watch, as an elector's followers do, so that a peer has seen each write
// when it was made (a store that first sees an entry late counts its TTL from
// then).
func TestConformanceRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out real TTLs")
	}
	srv := natstest.Start(t)
	newStore := func(t *testing.T, bucket string) backends.Store {
		s := open(t, srv.URL(), bucket, 1)
		follow(t, s)
		return s
	}
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Store { return newStore(t, newBucketName()) },
		Peer: func(t *testing.T, st backends.Store) backends.Store {
			return newStore(t, st.(*Store).bucket)
		},
		Reopen: func(t *testing.T, st backends.Store) backends.Store {
			if err := st.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return newStore(t, st.(*Store).bucket)
		},
		TTL: time.Second,
	})
}

// follow watches s's whole bucket until s closes, draining the events:
// the watch's sightings are what matters.
func follow(t *testing.T, s *Store) {
	t.Helper()
	events, err := s.Watch(context.Background(), "")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	go func() {
		for range events {
		}
	}()
}
