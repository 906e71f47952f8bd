package pgtest_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/tenure-go/tenure/backends/postgres/pgtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }

// TestDatabase checks that the shared server answers in a fresh database,
// and that a killed private server comes back with its data.
func TestDatabase(t *testing.T) {
	srv := pgtest.Shared(t)
	db := srv.NewDatabase(t)
	c, err := pgx.Connect(t.Context(), srv.DSN(db))
	if err != nil {
		t.Fatalf("connect %s: %v", db, err)
	}
	defer c.Close(t.Context())
	var got string
	if err := c.QueryRow(t.Context(), "SELECT current_database()").Scan(&got); err != nil || got != db {
		t.Fatalf("current_database() = %q, %v; want %q", got, err, db)
	}
}

func TestKillRestart(t *testing.T) {
	srv := pgtest.Start(t)
	c, err := pgx.Connect(t.Context(), srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(t.Context(), "CREATE TABLE k (v int); INSERT INTO k VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	c.Close(t.Context())
	srv.Kill(t)
	srv.Restart(t)
	c, err = pgx.Connect(t.Context(), srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	var v int
	if err := c.QueryRow(t.Context(), "SELECT v FROM k").Scan(&v); err != nil || v != 7 {
		t.Fatalf("after kill and restart: v = %d, %v; want 7", v, err)
	}
}
