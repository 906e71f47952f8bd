package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
)

// TestBackwardsRowUnavailable checks that a row seen going backwards (a beat
// or revision below what the store saw, as after a failover that lost
// acknowledged writes, made here by a raw connection rewriting the row) is
// answered ErrUnavailable, not judged; and every sighting the store had
// starts again, so a claim whose lost keep-alive this store never saw is not
// taken a TTL after its older sighting.
func TestBackwardsRowUnavailable(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	holder := open(t, dsn, tbl)
	clk := clock.NewMock()
	follower := open(t, dsn, tbl, postgres.WithClock(clk))
	ctx := within(t, faultLimit)
	raw, err := pgxConnect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close(context.Background())
	const ttl = 10 * time.Second
	a, err := holder.CreateIfAbsent(ctx, "a", []byte("x"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	b, err := holder.CreateIfAbsent(ctx, "b", []byte("x"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if _, err := follower.Get(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	// Both claims renewed; the follower sees a's renewal, not b's.
	if _, err := holder.KeepAlive(ctx, "a", a.Revision, ttl); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.KeepAlive(ctx, "b", b.Revision, ttl); err != nil {
		t.Fatal(err)
	}
	if _, err := follower.Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl - time.Second)
	// Both renewals lost.
	if _, err := raw.Exec(ctx, `UPDATE `+tbl+` SET beat = beat - 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := follower.Get(ctx, "a"); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("Get of a row whose beat went back: %v, want ErrUnavailable", err)
	}
	clk.Add(2 * time.Second) // past b's first sighting + TTL
	if _, err := follower.Get(ctx, "b"); err != nil {
		t.Fatalf("Get(b) a TTL after its first sighting, once a row went back: %v, want it live (its sighting started again)", err)
	}
	if _, err := follower.CreateIfAbsent(ctx, "b", []byte("y"), ttl); !errors.Is(err, backends.ErrExists) {
		t.Fatalf("CreateIfAbsent(b): %v, want ErrExists", err)
	}
	// A revision below the one seen.
	if _, err := raw.Exec(ctx, `UPDATE `+tbl+` SET rev = rev - 1 WHERE key = 'a'`); err != nil {
		t.Fatal(err)
	}
	if _, err := follower.List(ctx, ""); !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("List with a row whose revision went back: %v, want ErrUnavailable", err)
	}
}
