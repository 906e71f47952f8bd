// Package pgtest starts real PostgreSQL servers for tests: one server per
// test package (Shared), private servers for tests that kill, pause or
// restart theirs (Start), and a fresh database per test (NewDatabase).
//
// A server is the postgres binary of the machine, run as a child of the test
// process on 127.0.0.1 at a free port, with fsync off: it is fast and loses
// data on a power cut, which tests never see. initdb runs once per test
// process; every server starts from a copy of that data directory. As root,
// initdb and postgres refuse to run, so both run as nobody, on a directory
// made with os.MkdirTemp and given to nobody (t.TempDir's parent is not
// reachable by nobody). The server gets SIGKILL when the test process dies
// (Pdeathsig), so no server outlives its tests. The process handling is
// internal/testrig/pgproc's, which the fault campaign uses too.
//
// StartBouncer puts a PgBouncer in transaction mode in front of a server.
//
// Where no PostgreSQL binary exists the tests fail, naming what to install;
// they are never skipped.
package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tenure-go/tenure/internal/testrig/pgproc"
)

// readyWithin bounds how long a server may take to accept connections.
const readyWithin = 30 * time.Second

// Install is what the failure message tells the reader to do when no
// PostgreSQL server binary is found.
const Install = pgproc.Install

// Server is one running PostgreSQL server owned by the test process.
type Server struct{ p *pgproc.Server }

// Port is the TCP port the server listens on, on 127.0.0.1.
func (s *Server) Port() int { return s.p.Port() }

// Addr is "127.0.0.1:PORT".
func (s *Server) Addr() string { return s.p.Addr() }

// SocketDir is the directory that holds the server's unix socket,
// .s.PGSQL.PORT.
func (s *Server) SocketDir() string { return s.p.SocketDir() }

// DSN is the connection URL of database db as the superuser postgres.
func (s *Server) DSN(db string) string { return s.p.DSN(db) }

// DSNVia is DSN through another address, such as a proxy in front of the
// server.
func (s *Server) DSNVia(addr, db string) string { return s.p.DSNVia(addr, db) }

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error

	dbSeq atomic.Int64
)

func start() (*Server, error) {
	p, err := pgproc.Start()
	if err != nil {
		return nil, err
	}
	return &Server{p: p}, nil
}

// Start starts a private server for t, removed when t ends. Use it for a
// test that kills, pauses or restarts its server; other tests use Shared.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.p.Remove)
	return s
}

// Shared returns the test package's server, started on first use and
// stopped by the testing.M wrapper Main returns.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = start()
	}
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// Main wraps m so that the shared server and the initdb template are
// removed once the tests have run:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(pgtest.Main(m)) }
func Main(m *testing.M) interface{ Run() int } { return mainM{m} }

type mainM struct{ m *testing.M }

func (w mainM) Run() int {
	code := w.m.Run()
	sharedMu.Lock()
	if shared != nil {
		shared.p.Remove()
		shared = nil
	}
	sharedMu.Unlock()
	pgproc.RemoveTemplate()
	return code
}

// Kill sends SIGKILL to the server, as a crash would, and waits for it to
// exit. The data directory stays; Restart starts it again.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if err := s.p.Kill(); err != nil {
		t.Fatal(err)
	}
}

// Restart starts a stopped or killed server again, on the same port and
// data. After a kill, postgres recovers from its write-ahead log.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.p.Restart(); err != nil {
		t.Fatal(err)
	}
}

// Pause stops the server with SIGSTOP: connections stay open and nothing is
// answered. Resume continues it.
func (s *Server) Pause(t testing.TB) { t.Helper(); s.signal(t, syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume(t testing.TB) { t.Helper(); s.signal(t, syscall.SIGCONT) }

func (s *Server) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := s.p.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// Pids returns the process ids of the server: the postmaster and the
// processes it has forked (backends, checkpointer, ...), for measuring the
// server's CPU time. Empty while the server is stopped.
func (s *Server) Pids() []int { return s.p.Pids() }

// CPU is the CPU time (user and system) the server's processes alive now
// have used. A backend that exits takes its share with it: measure over a
// window that the connections measured outlive.
func (s *Server) CPU() time.Duration {
	var ticks int64
	for _, pid := range s.Pids() {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // a backend that just exited
		}
		// pid (comm) state ppid ...: utime and stime are fields 14 and 15.
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}

// Statements counts the statements sent by the pools or connections it is
// the tracer of (pgx.ConnConfig.Tracer): each query, and each query of a
// batch (a pipeline), which a tracer sees only as its answer is read.
// Read it with Load, or Swap to read and reset.
type Statements struct{ atomic.Int64 }

// TraceQueryStart counts a query.
func (c *Statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.Add(1)
	return ctx
}

// TraceQueryEnd does nothing: a query was counted when it started.
func (c *Statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart does nothing: a batch's queries are counted one by one.
func (c *Statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery counts a query of a batch.
func (c *Statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	c.Add(1)
}

// TraceBatchEnd does nothing.
func (c *Statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// NewDatabase creates a fresh database on s for t and returns its name; it
// is dropped when t ends.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
		defer cancel()
		c, err := pgx.Connect(ctx, s.DSN("postgres"))
		if err != nil {
			return // the server is gone: its directory goes with it
		}
		defer c.Close(ctx)
		c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return name
}

// StartStandby starts a streaming standby of s (a base backup of s,
// pg_basebackup -R), removed when t ends. It accepts read-only
// connections when StartStandby returns; s.WaitStandbys waits until it
// streams, and Promote makes it a primary.
func (s *Server) StartStandby(t testing.TB) *Server {
	t.Helper()
	p, err := pgproc.StartStandby(s.p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Remove)
	return &Server{p: p}
}

// Promote makes a standby a primary and waits until it accepts writes.
func (s *Server) Promote(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	if err := s.p.Promote(ctx); err != nil {
		t.Fatal(err)
	}
}

// SetSynchronous makes s replicate synchronously to any standby
// (synchronous_standby_names = '*'), or asynchronously with on false.
// Made synchronous, s is made asynchronous again when t ends, before the
// standbys started earlier are removed, so that its cleanup does not wait
// for them.
func (s *Server) SetSynchronous(t testing.TB, on bool) {
	t.Helper()
	if on {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
			defer cancel()
			_ = s.p.SetSynchronous(ctx, false) // a killed server has nothing to wait for
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	if err := s.p.SetSynchronous(ctx, on); err != nil {
		t.Fatal(err)
	}
}

// WaitStandbys waits until n standbys stream from s (and, with sync, are
// synchronous), bounded by 30 s.
func (s *Server) WaitStandbys(t testing.TB, n int, sync bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	if err := s.p.WaitStandbys(ctx, n, sync); err != nil {
		t.Fatal(err)
	}
}

// Exec runs one statement on s's database postgres as the superuser.
func (s *Server) Exec(t testing.TB, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyWithin)
	defer cancel()
	if err := s.p.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
}

// Bouncer is a PgBouncer in transaction pooling mode in front of a
// Server: what many teams reach PostgreSQL through. Session state
// (LISTEN, SET, session advisory locks, named prepared statements) does
// not follow a client from one transaction to the next.
type Bouncer struct{ b *pgproc.Bouncer }

// StartBouncer starts a PgBouncer (the machine's pgbouncer, as nobody when
// run as root) in transaction mode in front of s, for all of s's
// databases, stopped when t ends. poolSize is the number of server
// connections it opens per database (0: PgBouncer's default, 20).
func (s *Server) StartBouncer(t testing.TB, poolSize int) *Bouncer {
	t.Helper()
	b, err := pgproc.StartBouncer(s.p, poolSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return &Bouncer{b: b}
}

// Addr is "127.0.0.1:PORT", where the bouncer listens.
func (b *Bouncer) Addr() string { return b.b.Addr() }

// DSN is the connection URL of database db through the bouncer, as the
// superuser postgres.
func (b *Bouncer) DSN(db string) string { return b.b.DSN(db) }

// Log is what the bouncer has logged so far.
func (b *Bouncer) Log() string { return b.b.Log() }
