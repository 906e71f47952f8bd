package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/backends/postgres/pgtest"
)

// TestReadersOnAsyncPrimary checks that holders, which only reads, works on a
// PostgreSQL primary with an asynchronous standby, which the store refuses to
// a command that writes: holders opens it read-only, with or without the
// create=true of run's URL, while release --force, which deletes, is still
// refused and told why.
func TestReadersOnAsyncPrimary(t *testing.T) {
	if testing.Short() {
		t.Skip("servers skipped in -short mode")
	}
	primary := pgtest.Start(t)
	db := primary.NewDatabase(t)
	primary.StartStandby(t)
	primary.WaitStandbys(t, 1, false)
	dsn := primary.DSN(db)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The table, made by a store that accepts the standby.
	w, err := postgres.Open(ctx, dsn, postgres.WithAsyncStandbys())
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	for _, url := range []string{dsn, dsn + "&create=true"} {
		if out := strings.TrimSpace(holders(t, "--store", url, "--key", "k", "--json")); out != "[]" {
			t.Errorf("holders --json on the primary with an asynchronous standby (%s) printed %q, want []", url, out)
		}
	}
	p := startTenure(t, "release", filepath.Join(t.TempDir(), "journal"), nil, "release", "--store", dsn, "--key", "k", "--holder", "h", "--force")
	if code := p.wait(30 * time.Second); code != exitStore {
		b, _ := os.ReadFile(p.log)
		t.Errorf("release --force on the primary with an asynchronous standby exited %d, want %d:\n%s", code, exitStore, b)
	}
	if !p.logged("synchronous_standby_names") {
		b, _ := os.ReadFile(p.log)
		t.Errorf("release --force: stderr does not name synchronous_standby_names:\n%s", b)
	}
}
