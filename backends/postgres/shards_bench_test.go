package postgres_test

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres/pgtest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/shardstest"
)

// BenchmarkShardsCrash measures how long the shards of a member cut off
// from PostgreSQL (as a crashed process is) take to be owned again: four
// members of a group of 64 shards, each over its own Store, with a TTL of
// 2 s. It reports the median and the longest takeover of a shard, from the
// cut (takeover-ms, takeover-max-ms), beside the TTL (ttl-ms); see
// shardstest.BenchCrash.
func BenchmarkShardsCrash(b *testing.B) {
	srv := pgtest.Shared(b)
	dsn, tbl := srv.DSN(srv.NewDatabase(b)), newTable()
	timing := elector.Config{TTL: 2 * time.Second, RenewPeriod: 500 * time.Millisecond}
	shardstest.BenchCrash(b, 64, 4, timing, func(int) backends.Store { return open(b, dsn, tbl) })
}
