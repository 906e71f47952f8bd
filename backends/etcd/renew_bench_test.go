package etcd_test

import (
	"context"
	"testing"
)

// BenchmarkRenewal measures one renewal of a claim on a lease of its own,
// the elector's steady-state call: a KeepAlive of an entry the store wrote
// and vouches for, one keep-alive message on the store's stream. The time
// and allocations per op are the test process's, the client's (the server
// is a process of its own) plus the wait for the server's answer, one
// renewal at a time; comparing runs shows what the store's own work costs.
func BenchmarkRenewal(b *testing.B) {
	f := newFixture(b)
	e := mustCreate(b, f.store, "claim", "v", benchTTL)
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), benchRenew)
		got, err := f.store.KeepAlive(ctx, "claim", e.Revision, benchTTL)
		cancel()
		if err != nil || got.Revision != e.Revision {
			b.Fatalf("KeepAlive = %+v, %v", got, err)
		}
	}
}
