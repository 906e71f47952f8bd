package shards_test

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/shardstest"
)

// liveTiming is the elector template of the real-clock tests.
func liveTiming() elector.Config {
	return elector.Config{TTL: 2 * time.Second, RenewPeriod: 500 * time.Millisecond}
}

// filestores returns a store factory over one directory: each member opens
// its own Store on it, as a process would.
func filestores(t testing.TB) func(int) backends.Store {
	dir := t.TempDir()
	return func(int) backends.Store {
		s, err := filestore.Open(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func TestFilestoreScenario(t *testing.T) {
	g := shardstest.New(t, 16, liveTiming(), filestores(t))
	shardstest.Scenario(t, g, time.Minute)
}
