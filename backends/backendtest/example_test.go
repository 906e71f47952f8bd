package backendtest_test

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/backendtest"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
)

// A store's package runs the suite from one of its tests, with a Harness
// that opens fresh stores and, where expiry is judged on an injected
// clock, moves that clock. (Not run: Run needs the *testing.T of a test,
// which an Example does not have; the body below is such a test.)
func ExampleRun() {
	_ = func(t *testing.T) { // func TestConformance(t *testing.T)
		clk := clocktest.New(time.Time{})
		backendtest.Run(t, backendtest.Harness{
			New: func(t *testing.T) backends.Store {
				s := memstore.New(memstore.WithClock(clk))
				t.Cleanup(func() { s.Close() })
				return s
			},
			Elapse: clk.Add,
		})
	}
}
