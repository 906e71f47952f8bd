package filestore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/backendtest"
)

// TestConformance runs the backend conformance suite. Every store of one
// run shares a fake monotonic clock and a boot id, so Elapse moves expiry
// for all of them; Reopen and Peer open further Store values over the same
// directory, as a restarted or a second process would.
func TestConformance(t *testing.T) {
	clk := newFakeClock()
	open := func(t *testing.T, dir string) backends.Store {
		t.Helper()
		s, err := Open(context.Background(), dir, WithClock(testBoot, clk), WithCreate())
		if err != nil {
			t.Fatalf("Open(%s): %v", dir, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	backendtest.Run(t, backendtest.Harness{
		New:    func(t *testing.T) backends.Store { return open(t, filepath.Join(t.TempDir(), "store")) },
		Elapse: clk.Add,
		Reopen: func(t *testing.T, s backends.Store) backends.Store {
			dir := s.(*Store).Dir()
			s.Close()
			return open(t, dir)
		},
		Peer: func(t *testing.T, s backends.Store) backends.Store { return open(t, s.(*Store).Dir()) },
	})
}
