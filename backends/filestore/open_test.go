package filestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
