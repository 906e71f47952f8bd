package shards_test

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/internal/testrig/shardstest"
)

// BenchmarkRest measures four members holding 256 shards, settled, at rest:
// the CPU time they take together, and their store calls, per second.
func BenchmarkRest(b *testing.B) {
	b.Run("memstore", func(b *testing.B) {
		store := memstore.New()
		shardstest.BenchRest(b, 256, 4, liveTiming(), func(int) backends.Store { return store }, time.Second)
	})
	b.Run("filestore", func(b *testing.B) {
		shardstest.BenchRest(b, 256, 4, liveTiming(), filestores(b), time.Second)
	})
}
