package filestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// TestOpenDoneContext checks that a ctx already done fails Open before it
// touches the directory: an existing empty directory stays empty, and a
// missing one is not made even with WithCreate.
func TestOpenDoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	empty := t.TempDir()
	missing := filepath.Join(t.TempDir(), "store")
	for _, tt := range []struct {
		dir  string
		opts []Option
	}{
		{empty, nil},
		{missing, []Option{WithCreate()}},
	} {
		s, err := Open(ctx, tt.dir, append(tt.opts, WithClock(testBoot, newFakeClock()))...)
		if err == nil {
			s.Close()
			t.Fatalf("Open(cancelled ctx, %s) opened a store", tt.dir)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Open(cancelled ctx, %s) = %v, want an error wrapping context.Canceled", tt.dir, err)
		}
	}
	if names, err := os.ReadDir(empty); err != nil || len(names) != 0 {
		t.Errorf("the empty directory after Open with a cancelled ctx holds %v (%v), want nothing", names, err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the missing directory after Open with a cancelled ctx: stat = %v, want it absent", err)
	}
}

// TestOpenBlockedDirectory checks that Open returns when its ctx expires
// while a filesystem call does not return. A FIFO named as a temp file
// stands in for a hung filesystem: cleaning it opens it for reading, which
// blocks until a writer comes. Before Open took a ctx, it blocked there for
// good.
func TestOpenBlockedDirectory(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	fifo := filepath.Join(dir, tempName(lockOffset("k"), 1))
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Once Open has given up, a reader and writer of our own lets the
	// blocked open of the FIFO return, so the call left behind ends.
	defer func() {
		fd, err := unix.Open(fifo, unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			if !errors.Is(err, unix.ENOENT) {
				t.Errorf("open the FIFO to release the blocked open: %v", err)
			}
			return
		}
		t.Cleanup(func() { unix.Close(fd) })
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		s, err := Open(ctx, dir, WithClock(testBoot, newFakeClock()))
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	// Without a bound, a failure would hang the package until its timeout.
	watchdog, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, backends.ErrUnavailable) {
			t.Errorf("Open with a ctx that expired while the directory blocked = %v, want an error wrapping ErrUnavailable and context.DeadlineExceeded", err)
		}
		if backends.Classify(err) != backends.ClassTransient {
			t.Errorf("Classify(%v) = %v, want transient", err, backends.Classify(err))
		}
	case <-watchdog.Done():
		t.Fatal("Open still blocked 10 s after its ctx expired")
	}
}

// TestOpenReadOnly checks that WithReadOnly writes nothing: an empty
// directory reads as an empty store and stays empty, one holding other
// files but no lock file is refused, a store's entries can be read but not
// written, and a dead writer's temp file is left in place.
func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	empty := t.TempDir()
	s, err := Open(ctx, empty, WithClock(testBoot, clk), WithReadOnly())
	if err != nil {
		t.Fatalf("Open(%s, WithReadOnly()) of an empty directory: %v", empty, err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("read-only Get in an empty directory = %v, want ErrNotFound", err)
	}
	if got, err := s.List(ctx, ""); err != nil || len(got) != 0 {
		t.Errorf("read-only List in an empty directory = %+v, %v; want nothing", got, err)
	}
	s.Close()
	if names, err := os.ReadDir(empty); err != nil || len(names) != 0 {
		t.Errorf("the empty directory after a read-only Open holds %v (%v), want nothing", names, err)
	}

	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "notes"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(ctx, other, WithClock(testBoot, clk), WithReadOnly()); err == nil {
		s.Close()
		t.Errorf("Open(%s, WithReadOnly()) of a directory that is no store opened a store", other)
	} else if !errors.Is(err, backends.ErrMissingResource) || backends.Classify(err) != backends.ClassFatal || !strings.Contains(err.Error(), "not a store") {
		t.Errorf("Open(%s, WithReadOnly()) of a directory that is no store = %v, want a fatal error saying it is not a store, wrapping ErrMissingResource", other, err)
	}
	if names, err := os.ReadDir(other); err != nil || len(names) != 1 {
		t.Errorf("the directory that is no store after a read-only Open holds %v (%v), want its one file", names, err)
	}
	if _, err := Open(ctx, empty, WithClock(testBoot, clk), WithReadOnly(), WithCreate()); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("Open with WithReadOnly and WithCreate = %v, want ErrInvalid", err)
	}

	dir := t.TempDir()
	w, err := Open(ctx, dir, WithClock(testBoot, clk))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	e := mustCreate(t, w, "k", "v", time.Minute)
	orphan := filepath.Join(dir, tempName(lockOffset("k"), 1))
	if err := os.WriteFile(orphan, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, dir, WithClock(testBoot, clk), WithReadOnly())
	if err != nil {
		t.Fatalf("Open(%s, WithReadOnly()) of a store: %v", dir, err)
	}
	defer r.Close()
	if got, err := r.Get(ctx, "k"); err != nil || got.Revision != e.Revision {
		t.Errorf("read-only Get = %+v, %v; want revision %d", got, err, e.Revision)
	}
	if got, err := r.List(ctx, ""); err != nil || len(got) != 1 {
		t.Errorf("read-only List = %+v, %v; want the one entry", got, err)
	}
	if _, err := r.CreateIfAbsent(ctx, "other", []byte("v"), 0); !errors.Is(err, backends.ErrPermission) {
		t.Errorf("read-only CreateIfAbsent = %v, want ErrPermission", err)
	}
	if _, err := r.KeepAlive(ctx, "k", e.Revision, time.Minute); !errors.Is(err, backends.ErrPermission) {
		t.Errorf("read-only KeepAlive = %v, want ErrPermission", err)
	}
	if err := r.CompareAndDelete(ctx, "k", e.Revision); !errors.Is(err, backends.ErrPermission) {
		t.Errorf("read-only CompareAndDelete = %v, want ErrPermission", err)
	}
	if _, err := os.Stat(orphan); err != nil {
		t.Errorf("a dead writer's temp file after read-only Open and List: %v, want it left", err)
	}
}
