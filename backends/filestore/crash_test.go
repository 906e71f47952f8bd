package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// childCrash performs one write (envOp on key "k") and stops at envStep:
// it announces "at <step>" and blocks until its stdin closes. The parent
// kills it there.
func childCrash() error {
	target := step(os.Getenv(envStep))
	stepHook = func(at step) {
		if at != target {
			return
		}
		fmt.Printf("at %s\n", at)
		io.Copy(io.Discard, os.Stdin) // blocks until the parent goes away
		os.Exit(3)
	}
	s, err := Open(context.Background(), os.Getenv(envDir), WithCreate())
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	switch op := os.Getenv(envOp); op {
	case "create":
		_, err = s.CreateIfAbsent(ctx, "k", []byte("new"), 0)
	case "cas":
		_, err = s.CompareAndSet(ctx, "k", 1, []byte("new"), 0)
	case "delete":
		err = s.CompareAndDelete(ctx, "k", 1)
	case "keepalive":
		_, err = s.KeepAlive(ctx, "k", 1, 2*time.Hour)
	default:
		err = fmt.Errorf("unknown op %q", op)
	}
	if err != nil {
		return err
	}
	fmt.Println("done")
	return nil
}

var writeSteps = []step{stepBeforeTempWrite, stepAfterTempWrite, stepAfterTempSync, stepBeforeRename, stepAfterRename, stepBeforeDirSync}

// TestKilledAtEveryStep kills a writing process at each step of a write, for
// each kind of write. While it is stopped its key's lock is held only if it
// stopped between the check and the rename (before-rename, after-rename),
// and a peer opening the store leaves its temp file alone; once it is dead
// the lock is free, the store reopens to the old state (killed before
// the rename) or the new one (after), never a partial file or a lower
// revision, no temp file is left, and the next write continues above.
func TestKilledAtEveryStep(t *testing.T) {
	type state struct {
		present   bool
		rev, crev int64
		value     string
		ttl       time.Duration
	}
	ops := []struct {
		op       string
		setup    func(t *testing.T, s *Store)
		old, new state
	}{
		{"create", func(t *testing.T, s *Store) {
			e := mustCreate(t, s, "k", "old", 0)
			if err := s.CompareAndDelete(ctxT(t), "k", e.Revision); err != nil {
				t.Fatal(err)
			}
		}, state{}, state{true, 2, 2, "new", 0}},
		{"cas", func(t *testing.T, s *Store) { mustCreate(t, s, "k", "old", 0) },
			state{true, 1, 1, "old", 0}, state{true, 2, 1, "new", 0}},
		{"delete", func(t *testing.T, s *Store) { mustCreate(t, s, "k", "old", 0) },
			state{true, 1, 1, "old", 0}, state{}},
		{"keepalive", func(t *testing.T, s *Store) { mustCreate(t, s, "k", "old", time.Hour) },
			state{true, 1, 1, "old", time.Hour}, state{true, 1, 1, "old", 2 * time.Hour}},
	}
	for _, o := range ops {
		for i, st := range writeSteps {
			t.Run(o.op+"/"+string(st), func(t *testing.T) {
				dir := t.TempDir()
				s, err := Open(context.Background(), dir, WithCreate())
				if err != nil {
					t.Fatal(err)
				}
				o.setup(t, s)
				s.Close()

				ctx := ctxT(t)
				c := startChild(t, "crash", nil, envDir+"="+dir, envOp+"="+o.op, envStep+"="+string(st))
				if got, want := c.recv(ctx), "at "+string(st); got != want {
					t.Fatalf("child said %q, want %q", got, want)
				}
				s2, err := Open(context.Background(), dir, WithCreate()) // a peer opening meanwhile must not touch the live writer's temp file
				if err != nil {
					t.Fatal(err)
				}
				l, err := s2.tryLockAt(lockOffset("k"))
				if err != nil {
					t.Fatal(err)
				}
				if wantLocked := st == stepBeforeRename || st == stepAfterRename; (l == nil) != wantLocked {
					t.Errorf("key lock held while the writer is stopped at %s: %v, want %v", st, l == nil, wantLocked)
				}
				if l != nil {
					l.unlock()
				}
				temps := tempFiles(t, dir)
				if wantTemp := i >= 1 && i <= 3; (len(temps) == 1) != wantTemp {
					t.Errorf("temp files while stopped at %s: %q, want one: %v", st, temps, wantTemp)
				}
				s2.Close()

				c.kill()

				s3, err := Open(context.Background(), dir, WithCreate())
				if err != nil {
					t.Fatal(err)
				}
				defer s3.Close()
				if temps := tempFiles(t, dir); len(temps) != 0 {
					t.Errorf("temp files left after reopening: %q", temps)
				}
				want := o.old
				if i >= 4 {
					want = o.new
				}
				got, err := s3.Get(ctx, "k")
				switch {
				case !want.present && !errors.Is(err, backends.ErrNotFound):
					t.Fatalf("get after kill at %s = %+v, %v; want absent", st, got, err)
				case want.present && (err != nil || got.Revision != want.rev || got.CreateRevision != want.crev ||
					string(got.Value) != want.value || got.TTL != want.ttl):
					t.Fatalf("get after kill at %s = %+v, %v; want %+v", st, got, err, want)
				}
				// The next write goes through at once (no lock left behind)
				// and continues above every revision so far.
				floor := max(want.rev, o.old.rev, 1)
				next, err := s3.CompareAndSet(ctx, "k", want.rev, []byte("after"), 0)
				if err != nil || next.Revision != floor+1 {
					t.Fatalf("write after kill at %s = %+v, %v; want rev %d", st, next, err, floor+1)
				}
			})
		}
	}
}
