package filestore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// childStall performs one write (envOp on key "k", which the parent created
// at revision 1 with a TTL) and stops the first time it reaches envStep: it
// announces "at <step>" and waits for a line on stdin before it goes on. It
// then reports the write's outcome:
//
//	done <revision> <ttl>    the write succeeded
//	conflict <revision>      the key's live revision was not 1
func childStall() error {
	target := step(os.Getenv(envStep))
	in := bufio.NewScanner(os.Stdin)
	stopped := false
	stepHook = func(at step) {
		if at != target || stopped {
			return
		}
		stopped = true
		fmt.Printf("at %s\n", at)
		in.Scan()
	}
	s, err := Open(context.Background(), os.Getenv(envDir), WithCreate())
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	var e backends.Entry
	switch op := os.Getenv(envOp); op {
	case "cas":
		e, err = s.CompareAndSet(ctx, "k", 1, []byte("child"), time.Hour)
	case "keepalive":
		e, err = s.KeepAlive(ctx, "k", 1, 3*time.Hour)
	default:
		err = fmt.Errorf("unknown op %q", op)
	}
	var ce *backends.ConflictError
	switch {
	case err == nil:
		fmt.Printf("done %d %v\n", e.Revision, e.TTL)
	case errors.As(err, &ce):
		fmt.Printf("conflict %d\n", ce.Current.Revision)
	default:
		return err
	}
	return nil
}

// TestStoppedWriterDoesNotBlockKey stops a writing process with SIGSTOP in
// the slow part of its write (before and after its temp file's fsync): the
// key's lock is free meanwhile, and another writer of the same key goes
// through at once. When the stopped writer continues, it finds the key's
// file changed since its decision and decides again on the new state: a
// compare-and-set on the old revision loses, a keep-alive of the same
// revision is written over the other's, and no temp file is left. A List
// in between, which cleans temp files, leaves the stopped writer's alone. Before
// writes prepared their temp file outside the lock, the stopped writer held
// the key's lock until it continued, and the other writer waited for it.
func TestStoppedWriterDoesNotBlockKey(t *testing.T) {
	cases := []struct {
		op    string
		other func(ctx context.Context, s *Store) (backends.Entry, error)
		want  string // the stopped writer's outcome
		rev   int64  // the key's revision at the end
	}{
		{"cas", func(ctx context.Context, s *Store) (backends.Entry, error) {
			return s.CompareAndSet(ctx, "k", 1, []byte("parent"), time.Hour)
		}, "conflict 2", 2},
		{"keepalive", func(ctx context.Context, s *Store) (backends.Entry, error) {
			return s.KeepAlive(ctx, "k", 1, 2*time.Hour)
		}, "done 1 3h0m0s", 1},
	}
	for _, c := range cases {
		for _, st := range []step{stepAfterTempWrite, stepAfterTempSync} {
			t.Run(c.op+"/"+string(st), func(t *testing.T) {
				ctx := ctxT(t)
				dir := t.TempDir()
				s, err := Open(context.Background(), dir, WithCreate())
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				mustCreate(t, s, "k", "old", time.Hour)

				ch := startChild(t, "stall", nil, envDir+"="+dir, envOp+"="+c.op, envStep+"="+string(st))
				if got, want := ch.recv(ctx), "at "+string(st); got != want {
					t.Fatalf("child said %q, want %q", got, want)
				}
				if err := ch.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				l, err := s.tryLockAt(lockOffset("k"))
				if err != nil {
					t.Fatal(err)
				}
				if l == nil {
					t.Errorf("the key's lock is held by a writer stopped at %s", st)
				} else {
					l.unlock()
				}
				// With the lock held by the stopped child, this write
				// would wait for the test's deadline.
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if _, err := c.other(wctx, s); err != nil {
					t.Fatalf("write while the other writer is stopped at %s: %v", st, err)
				}
				// A List cleans temp files; the stopped writer's prepared
				// one must survive it, or its rename would fail.
				if _, err := s.List(ctx, ""); err != nil {
					t.Fatal(err)
				}
				if temps := tempFiles(t, dir); len(temps) != 1 {
					t.Errorf("temp files while the writer is stopped at %s: %q, want its own", st, temps)
				}
				if err := ch.cmd.Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
				ch.send("go")
				if got := ch.recv(ctx); got != c.want {
					t.Errorf("stopped writer's outcome = %q, want %q", got, c.want)
				}
				if err := ch.cmd.Wait(); err != nil {
					t.Fatalf("child: %v", err)
				}
				e, err := s.Get(ctx, "k")
				if err != nil || e.Revision != c.rev {
					t.Errorf("get = %+v, %v; want revision %d", e, err, c.rev)
				}
				if temps := tempFiles(t, dir); len(temps) != 0 {
					t.Errorf("temp files left: %q", temps)
				}
			})
		}
	}
}

// TestWriteGivesUpOnABusyKey changes the key's file between every decision
// of a keep-alive and its turn under the lock (another Store renews the same
// claim each time the first has prepared its write). The keep-alive decides
// again maxAttempts times, then fails with a transient error that wraps
// errContended; the other writes all landed, and no temp file is left.
func TestWriteGivesUpOnABusyKey(t *testing.T) {
	ctx := ctxT(t)
	dir := t.TempDir()
	s, err := Open(context.Background(), dir, WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := Open(context.Background(), dir, WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	e := mustCreate(t, s, "k", "old", time.Hour)

	renewals, inside := 0, false
	var renewErr error
	stepHook = func(at step) {
		if at != stepAfterTempSync || inside {
			return
		}
		inside = true
		defer func() { inside = false }()
		renewals++
		if _, err := other.KeepAlive(ctx, "k", e.Revision, time.Duration(renewals)*time.Minute); err != nil {
			renewErr = err
		}
	}
	defer func() { stepHook = nil }()

	_, err = s.KeepAlive(ctx, "k", e.Revision, 3*time.Hour)
	if renewErr != nil {
		t.Fatalf("the other store's keep-alive: %v", renewErr)
	}
	if !errors.Is(err, errContended) || backends.Classify(err) != backends.ClassTransient {
		t.Errorf("keep-alive on a key changed under every attempt = %v (class %v), want transient and errContended",
			err, backends.Classify(err))
	}
	if renewals != maxAttempts {
		t.Errorf("the keep-alive decided %d times, want %d", renewals, maxAttempts)
	}
	got, err := s.Get(ctx, "k")
	if err != nil || got.Revision != e.Revision || got.TTL != time.Duration(maxAttempts)*time.Minute {
		t.Errorf("get = %+v, %v; want revision %d with the last renewal's TTL %v", got, err, e.Revision, time.Duration(maxAttempts)*time.Minute)
	}
	if temps := tempFiles(t, dir); len(temps) != 0 {
		t.Errorf("temp files left: %q", temps)
	}
}

// TestWritesTakeTurnsAtTheDisk checks that a Store lets diskSlots of its
// writes do their disk work at once. While that many are held inside it,
// another write waits for a turn, and one whose context ends meanwhile gives
// up, having written nothing (without turns it would go on and write). Once
// the held writes go on, every write succeeds.
func TestWritesTakeTurnsAtTheDisk(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	defer s.Close()
	ctx := context.Background()
	held, release := make(chan struct{}, diskSlots), make(chan struct{})
	var arrived atomic.Int32
	stepHook = func(at step) {
		if at == stepAfterTempSync && arrived.Add(1) <= diskSlots {
			held <- struct{}{}
			<-release
		}
	}
	defer func() { stepHook = nil }()
	errs := fillTurns(ctx, s, held)

	late, cancel := context.WithCancel(ctx)
	defer cancel()
	_, err := s.update(late, "create", "late", func(cur state) (record, error) {
		cancel() // the write has decided; its context ends before its turn
		rev := cur.rec.Revision + 1
		return withTTL(record{Key: "late", Value: []byte("v"), Revision: rev, CreateRevision: rev}, time.Hour, s.judge.bootID, cur.now), nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a write whose context ended while every turn was taken = %v, want context.Canceled", err)
	}
	if got, err := s.Get(ctx, "late"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Get(late) = %+v, %v; want not found", got, err)
	}

	close(release)
	checkHeld(t, errs)
	mustCreate(t, s, "late", "v", time.Hour)
	if temps := tempFiles(t, e.dir); len(temps) != 0 {
		t.Errorf("temp files left: %q", temps)
	}
}

// TestRenamedWriteDoesNotWaitForTurns checks that a write whose rename is
// done (the new state is visible, and a new owner may be acting on it) makes
// it durable without waiting behind the writes that hold every turn at the
// disk for their temp files. Before the directory fsync was shared, it needed
// a turn of its own and waited until one of them finished.
func TestRenamedWriteDoesNotWaitForTurns(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	defer s.Close()
	ctx := ctxT(t)
	renamed, goOn := make(chan struct{}), make(chan struct{})
	held, release := make(chan struct{}, diskSlots), make(chan struct{})
	var phase atomic.Int32 // 0: the first write runs; 1: it has renamed
	stepHook = func(at step) {
		switch {
		case at == stepAfterRename && phase.CompareAndSwap(0, 1):
			close(renamed)
			<-goOn
		case at == stepAfterTempSync && phase.Load() == 1:
			held <- struct{}{}
			<-release
		}
	}
	defer func() { stepHook = nil }()

	first := make(chan error, 1)
	go func() {
		_, err := s.CreateIfAbsent(ctx, "first", []byte("v"), time.Hour)
		first <- err
	}()
	<-renamed
	errs := fillTurns(ctx, s, held)
	close(goOn)
	select {
	case err := <-first:
		if err != nil {
			t.Errorf("the renamed write: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the renamed write did not return while %d other writes held every turn", diskSlots)
	}
	close(release)
	checkHeld(t, errs)
}

// fillTurns starts diskSlots creates on s and returns once each has said,
// on held, that a step hook holds it inside its turn at the disk; the
// channel gives their outcomes once the hook lets them go.
func fillTurns(ctx context.Context, s *Store, held <-chan struct{}) <-chan error {
	errs := make(chan error, diskSlots)
	for i := range diskSlots {
		go func() {
			_, err := s.CreateIfAbsent(ctx, fmt.Sprintf("held%d", i), []byte("v"), time.Hour)
			errs <- err
		}()
	}
	for range diskSlots {
		<-held
	}
	return errs
}

// checkHeld fails t for each of the writes of fillTurns that failed.
func checkHeld(t *testing.T, errs <-chan error) {
	t.Helper()
	for range diskSlots {
		if err := <-errs; err != nil {
			t.Errorf("a held write: %v", err)
		}
	}
}

// TestDirSyncServesEveryWaiter drives the directory fsyncs of a write burst
// with a fake fsync: a write that comes while one runs waits for the next,
// which serves every write that came meanwhile; a failed fsync fails the
// writes it was for, and only those.
func TestDirSyncServesEveryWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var d dirSync
		var calls atomic.Int32
		answers := []chan error{make(chan error), make(chan error), make(chan error)}
		fsync := func() error { return <-answers[calls.Add(1)-1] }
		waits := map[string]chan error{}
		start := func(name string) {
			ch := make(chan error, 1)
			waits[name] = ch
			go func() { ch <- d.wait(fsync) }()
		}
		wantCalls := func(n int32) {
			t.Helper()
			synctest.Wait()
			if got := calls.Load(); got != n {
				t.Fatalf("%d fsyncs begun, want %d", got, n)
			}
		}
		failed := errors.New("fsync failed")

		start("a") // begins fsync 1
		wantCalls(1)
		start("b") // came after fsync 1 began: wait for fsync 2
		start("c")
		wantCalls(1)
		answers[0] <- failed
		if err := <-waits["a"]; !errors.Is(err, failed) {
			t.Errorf("a, whose fsync failed: %v, want its error", err)
		}
		wantCalls(2) // one fsync for b and c
		start("d")   // came while fsync 2 runs: waits for fsync 3
		wantCalls(2)
		answers[1] <- nil
		for _, w := range []string{"b", "c"} {
			if err := <-waits[w]; err != nil {
				t.Errorf("%s, whose fsync succeeded after an earlier one failed: %v", w, err)
			}
		}
		wantCalls(3)
		answers[2] <- failed
		if err := <-waits["d"]; !errors.Is(err, failed) {
			t.Errorf("d, whose fsync failed: %v, want its error", err)
		}
	})
}
