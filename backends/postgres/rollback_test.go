package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
)

// stopAfterLock is a pgx tracer that, on the batch with which a Txn begins
// its transaction, first has another store change the key the Txn's
// condition names (so the check under the locks refuses), and once that
// batch has been answered stops the server process serving the connection
// (SIGSTOP): the Txn's rollback then goes to a backend that never answers.
type stopAfterLock struct {
	change func() // run before the batch goes out

	mu      sync.Mutex
	armed   bool
	stopped int // pid stopped; 0: none
}

func (h *stopAfterLock) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (h *stopAfterLock) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

type lockBatch struct{}

func (h *stopAfterLock) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	h.mu.Lock()
	armed := h.armed
	h.mu.Unlock()
	if !armed || len(d.Batch.QueuedQueries) == 0 || !strings.HasPrefix(d.Batch.QueuedQueries[0].SQL, "BEGIN") {
		return ctx
	}
	h.change()
	return context.WithValue(ctx, lockBatch{}, true)
}

func (h *stopAfterLock) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (h *stopAfterLock) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, _ pgx.TraceBatchEndData) {
	if ctx.Value(lockBatch{}) == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = false
	pid := int(conn.PgConn().PID())
	if err := syscall.Kill(pid, syscall.SIGSTOP); err == nil {
		h.stopped = pid
	}
}

func (h *stopAfterLock) resume() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped != 0 {
		_ = syscall.Kill(h.stopped, syscall.SIGCONT)
		h.stopped = 0
	}
}

// TestTxnRollbackBounded covers a Txn whose condition the check under its
// locks refuses: it rolls back, and the backend stops answering at that
// moment. The Txn returns the refusal within its ctx's bound, and the
// connection is not handed out again: the next call works while that backend
// is still stopped.
func TestTxnRollbackBounded(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	ctx := testCtx(t)
	other := open(t, dsn, tbl)
	e, err := other.CreateIfAbsent(ctx, "k", []byte("v"), 0)
	if err != nil {
		t.Fatal(err)
	}

	h := &stopAfterLock{}
	h.change = func() {
		if _, err := other.CompareAndSet(ctx, "k", e.Revision, []byte("changed"), 0); err != nil {
			t.Errorf("changing the key under the Txn: %v", err)
		}
	}
	t.Cleanup(h.resume)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = h
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := postgres.New(ctx, pool, postgres.WithTable("public", tbl))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	t.Cleanup(h.resume) // before the pool closes, which waits for the stopped backend's connection

	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
	const bound = 2 * time.Second
	txnCtx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := s.Txn(txnCtx, []backends.Cond{{Key: "k", Revision: e.Revision}}, []backends.Op{{Kind: backends.OpPut, Key: "k", Value: []byte("txn")}})
		done <- err
	}()
	select {
	case err = <-done:
	case <-within(t, bound+20*time.Second).Done():
		h.resume() // let the hung rollback finish, or the test cannot end
		t.Fatalf("Txn still running %v after its ctx's %v bound ended: its rollback waits on the stopped backend", 20*time.Second, bound)
	}
	t.Logf("Txn returned after %v", time.Since(start))
	h.mu.Lock()
	stopped := h.stopped
	h.mu.Unlock()
	if stopped == 0 {
		t.Fatal("the backend was never stopped: the Txn did not take its locks")
	}
	if !errors.Is(err, backends.ErrConflict) {
		t.Errorf("Txn = %v, want the conflict its check under the locks found", err)
	}
	if _, err := s.Get(within(t, 10*time.Second), "k"); err != nil {
		t.Errorf("Get after the Txn, the backend still stopped: %v, want an answer on another connection", err)
	}
	t.Logf("Get returned after %v", time.Since(start))
}
