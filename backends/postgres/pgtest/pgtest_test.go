package pgtest_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
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

// TestKillRestart checks that a server killed while paused, with a client
// connected, is gone with all its processes when Kill returns, and Restart
// brings it back, at once, with its data.
func TestKillRestart(t *testing.T) {
	srv := pgtest.Start(t)
	c, err := pgx.Connect(t.Context(), srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.WithoutCancel(t.Context()))
	if _, err := c.Exec(t.Context(), "CREATE TABLE k (v int); INSERT INTO k VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	pids := srv.Pids() // the postmaster, c's backend and the server's own processes
	if len(pids) < 2 {
		t.Fatalf("server processes = %v, want the postmaster and its backends", pids)
	}
	srv.Pause(t)
	srv.Kill(t)
	for _, pid := range pids {
		if st := procState(pid); st != "" && st != "Z" {
			t.Errorf("process %d of the killed server is still running (state %s)", pid, st)
		}
	}
	srv.Restart(t)
	c2, err := pgx.Connect(t.Context(), srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(t.Context())
	var v int
	if err := c2.QueryRow(t.Context(), "SELECT v FROM k").Scan(&v); err != nil || v != 7 {
		t.Fatalf("after kill and restart: v = %d, %v; want 7", v, err)
	}
}

// TestPauseStopsEveryProcess checks that when Pause returns, the
// postmaster and every process it forked (a connected client's backend
// among them) are stopped, not only signalled.
func TestPauseStopsEveryProcess(t *testing.T) {
	srv := pgtest.Start(t)
	c, err := pgx.Connect(t.Context(), srv.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.WithoutCancel(t.Context()))
	for round := 0; round < 10; round++ {
		pids := srv.Pids()
		srv.Pause(t)
		for _, pid := range pids {
			if st := procState(pid); st != "" && st != "T" && st != "t" && st != "Z" {
				t.Errorf("round %d: process %d of the paused server is in state %s, want stopped (T)", round, pid, st)
			}
		}
		srv.Resume(t)
		if err := c.Ping(t.Context()); err != nil {
			t.Fatalf("round %d: ping after Resume: %v", round, err)
		}
	}
}

// procState is the state letter of process pid ("Z": exited, not yet
// reaped), or "" if there is no such process.
func procState(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
