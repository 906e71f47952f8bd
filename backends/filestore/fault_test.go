package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"golang.org/x/sys/unix"
)

// A fault child runs a list of checks and reports each on stdout as
// "ok <name>", "fail <name>: <why>" or, if the environment cannot host the
// test at all, "skip <why>".
type faultCheck struct {
	name string
	run  func() error
}

func runChecks(checks []faultCheck) error {
	for _, c := range checks {
		if err := c.run(); err != nil {
			fmt.Printf("fail %s: %v\n", c.name, err)
		} else {
			fmt.Printf("ok %s\n", c.name)
		}
	}
	return nil
}

// collectChecks reads a fault child's report to its end.
func collectChecks(t *testing.T, c *child) {
	t.Helper()
	ctx := ctxT(t)
	n := 0
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				if err := c.cmd.Wait(); err != nil {
					t.Fatalf("child failed: %v", err)
				}
				if n == 0 {
					t.Fatalf("child reported no checks")
				}
				return
			}
			switch {
			case strings.HasPrefix(l, "skip "):
				t.Skip(strings.TrimPrefix(l, "skip "))
			case strings.HasPrefix(l, "ok "):
				n++
				t.Log(l)
			default:
				n++
				t.Error(l)
			}
		case <-ctx.Done():
			t.Fatalf("child did not finish in time")
		}
	}
}

// wantClass checks that err wraps want (if not nil) and classifies as class.
func wantClass(err error, want error, class backends.Class) error {
	if err == nil {
		return errors.New("succeeded, want an error")
	}
	if want != nil && !errors.Is(err, want) {
		return fmt.Errorf("error %v does not wrap %v", err, want)
	}
	if got := backends.Classify(err); got != class {
		return fmt.Errorf("error %v classified %v, want %v", err, got, class)
	}
	return nil
}

// wantIntact checks that key still holds value at rev and that no temp file
// is left in dir.
func wantIntact(s *Store, key, value string, rev int64) error {
	e, err := s.Get(context.Background(), key)
	if err != nil || string(e.Value) != value || e.Revision != rev {
		return fmt.Errorf("%q = %q at rev %d, %v; want %q at rev %d", key, e.Value, e.Revision, err, value, rev)
	}
	names, err := s.readDirNames()
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasPrefix(n, tempPrefix) {
			return fmt.Errorf("temp file %s left behind", n)
		}
	}
	return nil
}

// TestDiskFull fills a 64 KiB tmpfs, mounted in a private mount namespace
// of a child process, and writes to a store on it: the writes fail with a
// transient error that matches ENOSPC, the old state is intact with no temp
// file left, and writes succeed again once space is freed.
func TestDiskFull(t *testing.T) {
	runInPrivateMounts(t, "nospace")
}

// runInPrivateMounts runs the child role in a mount namespace of its own,
// on a fresh directory it may mount over, and collects its checks. It skips
// the test where the kernel refuses such a process.
func runInPrivateMounts(t *testing.T, role string) {
	t.Helper()
	mnt := t.TempDir()
	attr := privateMounts()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := probeStart(exe, attr); err != nil {
		t.Skipf("cannot start a process in a private mount namespace: %v", err)
	}
	c := startChild(t, role, attr, envDir+"="+mnt)
	collectChecks(t, c)
}

// probeStart checks that the kernel lets a process start with attr.
func probeStart(exe string, attr *syscall.SysProcAttr) error {
	p, err := os.StartProcess(exe, []string{exe, "-test.run=^$"}, &os.ProcAttr{
		Env: childEnviron("probe"), Sys: attr,
	})
	if err != nil {
		return err
	}
	_, err = p.Wait()
	return err
}

func childProbe() error { return nil }

func childNoSpace() error {
	mnt := os.Getenv(envDir)
	if err := unix.Mount("tenure-test", mnt, "tmpfs", 0, "size=64k"); err != nil {
		fmt.Printf("skip mounting a tmpfs in a private mount namespace: %v\n", err)
		return nil
	}
	s, err := Open(context.Background(), filepath.Join(mnt, "store"), WithCreate())
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.CreateIfAbsent(ctx, "k", []byte("old"), 0); err != nil {
		return err
	}
	filler := filepath.Join(mnt, "filler")
	big := make([]byte, 8<<10)
	return runChecks([]faultCheck{
		{"fill the disk", func() error {
			f, err := os.Create(filler)
			if err != nil {
				return err
			}
			defer f.Close()
			for {
				if _, err := f.Write(big); err != nil {
					if errors.Is(err, unix.ENOSPC) {
						return nil
					}
					return err
				}
			}
		}},
		{"cas on a full disk", func() error {
			_, err := s.CompareAndSet(ctx, "k", 1, big, 0)
			if err := wantClass(err, unix.ENOSPC, backends.ClassTransient); err != nil {
				return err
			}
			return wantIntact(s, "k", "old", 1)
		}},
		{"create on a full disk", func() error {
			_, err := s.CreateIfAbsent(ctx, "new", big, 0)
			if err := wantClass(err, unix.ENOSPC, backends.ClassTransient); err != nil {
				return err
			}
			if _, err := s.Get(ctx, "new"); !errors.Is(err, backends.ErrNotFound) {
				return fmt.Errorf("get of the failed create: %v, want ErrNotFound", err)
			}
			return wantIntact(s, "k", "old", 1)
		}},
		{"writes resume once space is freed", func() error {
			if err := os.Remove(filler); err != nil {
				return err
			}
			e, err := s.CompareAndSet(ctx, "k", 1, big, 0)
			if err != nil || e.Revision != 2 {
				return fmt.Errorf("cas = rev %d, %v; want rev 2", e.Revision, err)
			}
			return nil
		}},
	})
}

// TestReadOnlyFilesystem mounts a tmpfs in a private mount namespace of a
// child process, keeps a store and a claim on it, and remounts it
// read-only, as ext4 does after an I/O error (errors=remount-ro). Every
// write, and the renewal of the claim, fails with an error wrapping
// ErrPermission and EROFS, which is fatal: no retry can fix it. Reads go
// on working. Open refuses the store, and a new store, on the read-only
// filesystem. Once it is writable again, so is the store.
func TestReadOnlyFilesystem(t *testing.T) {
	runInPrivateMounts(t, "readonly")
}

// privateMounts starts a child in a mount namespace of its own, in which
// it may mount a tmpfs: as root directly, otherwise in a user namespace of
// its own.
func privateMounts() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	if os.Geteuid() != 0 {
		attr.Cloneflags = syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	return attr
}

func childReadOnly() error {
	mnt := os.Getenv(envDir)
	if err := unix.Mount("tenure-test", mnt, "tmpfs", 0, "size=1m"); err != nil {
		fmt.Printf("skip mounting a tmpfs in a private mount namespace: %v\n", err)
		return nil
	}
	remount := func(flags uintptr) error {
		return unix.Mount("", mnt, "", unix.MS_REMOUNT|flags, "")
	}
	dir := filepath.Join(mnt, "store")
	clk := newFakeClock()
	s, err := Open(context.Background(), dir, WithClock(testBoot, clk), WithCreate())
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.CreateIfAbsent(ctx, "k", []byte("old"), 0); err != nil {
		return err
	}
	locker, err := backends.NewLocker(s)
	if err != nil {
		return err
	}
	holder, err := backends.NewHolder("leader")
	if err != nil {
		return err
	}
	lease, err := locker.TryAcquire(ctx, "claim", holder, time.Hour)
	if err != nil {
		return err
	}
	readOnly := func(err error) error {
		if err := wantClass(err, backends.ErrPermission, backends.ClassFatal); err != nil {
			return err
		}
		if !errors.Is(err, unix.EROFS) {
			return fmt.Errorf("error %v does not wrap EROFS", err)
		}
		return nil
	}
	return runChecks([]faultCheck{
		{"remount read-only", func() error { return remount(unix.MS_RDONLY) }},
		{"writes are fatal", func() error {
			_, err := s.CompareAndSet(ctx, "k", 1, []byte("new"), 0)
			if err := readOnly(err); err != nil {
				return fmt.Errorf("cas: %w", err)
			}
			_, err = s.CreateIfAbsent(ctx, "new", nil, 0)
			if err := readOnly(err); err != nil {
				return fmt.Errorf("create: %w", err)
			}
			if err := readOnly(s.CompareAndDelete(ctx, "k", 1)); err != nil {
				return fmt.Errorf("delete: %w", err)
			}
			_, err = s.KeepAlive(ctx, "k", 1, time.Hour)
			if err := readOnly(err); err != nil {
				return fmt.Errorf("keepalive: %w", err)
			}
			return wantIntact(s, "k", "old", 1)
		}},
		{"a renewal is fatal", func() error {
			_, err := locker.Renew(ctx, lease)
			return readOnly(err)
		}},
		{"reads work", func() error {
			if l, err := s.List(ctx, ""); err != nil || len(l) != 2 {
				return fmt.Errorf("list = %d entries, %v; want 2", len(l), err)
			}
			return nil
		}},
		{"open the store: refused", func() error {
			ro, err := Open(context.Background(), dir, WithClock(testBoot, clk), WithCreate())
			if err == nil {
				ro.Close()
			}
			return readOnly(err)
		}},
		{"open a new store: refused", func() error {
			ro, err := Open(context.Background(), filepath.Join(mnt, "other"), WithClock(testBoot, clk), WithCreate())
			if err == nil {
				ro.Close()
			}
			return readOnly(err)
		}},
		{"writable again", func() error {
			if err := remount(0); err != nil {
				return err
			}
			if _, err := locker.Renew(ctx, lease); err != nil {
				return fmt.Errorf("renew: %w", err)
			}
			_, err := s.CompareAndSet(ctx, "k", 1, []byte("new"), 0)
			return err
		}},
	})
}

// TestPermissionDenied takes away the write permission on the store
// directory, on the lock file and on a key's file: every write fails with an
// error wrapping ErrPermission (fatal), reads of an unreadable key's file
// fail the same way (never "absent"), and the old state is intact. Open
// refuses a directory or lock file it cannot write, fresh or not, with the
// same error. Root is not subject to permissions, so as root the checks run
// in a child process with the credentials of nobody.
func TestPermissionDenied(t *testing.T) {
	base := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var attr *syscall.SysProcAttr
	if os.Geteuid() == 0 {
		const nobody = 65534
		// The child must reach the binary and the directory as nobody.
		bin := filepath.Join(base, "bin")
		data := filepath.Join(base, "data")
		for _, d := range []string{filepath.Dir(base), base, bin} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Mkdir(data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(data, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		exe = copyExecutable(t, exe, filepath.Join(bin, "filestore.test"))
		base = data
		attr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	c := startChildExe(t, exe, "permission", attr, envDir+"="+base)
	collectChecks(t, c)
}

func copyExecutable(t *testing.T, from, to string) string {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return to
}

func childPermission() error {
	if os.Geteuid() == 0 {
		fmt.Println("skip running as root, which permissions do not restrict")
		return nil
	}
	dir := filepath.Join(os.Getenv(envDir), "store")
	s, err := Open(context.Background(), dir, WithClock(testBoot, newFakeClock()), WithCreate())
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.CreateIfAbsent(ctx, "k", []byte("old"), 0); err != nil {
		return err
	}
	if _, err := s.CreateIfAbsent(ctx, "f", []byte("file"), time.Hour); err != nil {
		return err
	}
	denied := func(err error) error { return wantClass(err, backends.ErrPermission, backends.ClassFatal) }
	chmod := func(path string, mode os.FileMode, f func() error) error {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		if err := os.Chmod(path, mode); err != nil {
			return err
		}
		defer os.Chmod(path, fi.Mode().Perm())
		return f()
	}
	keyFile := filepath.Join(dir, fileName("f"))
	// open opens dir and returns the error; a store it opens is closed.
	open := func(dir string) error {
		o, err := Open(context.Background(), dir, WithClock(testBoot, newFakeClock()), WithCreate())
		if err == nil {
			o.Close()
		}
		return err
	}
	return runChecks([]faultCheck{
		{"writes to a read-only directory", func() error {
			return chmod(dir, 0o555, func() error {
				_, err := s.CompareAndSet(ctx, "k", 1, []byte("new"), 0)
				if err := denied(err); err != nil {
					return fmt.Errorf("cas: %w", err)
				}
				_, err = s.CreateIfAbsent(ctx, "new", nil, 0)
				if err := denied(err); err != nil {
					return fmt.Errorf("create: %w", err)
				}
				if err := denied(s.CompareAndDelete(ctx, "k", 1)); err != nil {
					return fmt.Errorf("delete: %w", err)
				}
				return wantIntact(s, "k", "old", 1)
			})
		}},
		{"reads of a read-only directory work", func() error {
			return chmod(dir, 0o555, func() error {
				if l, err := s.List(ctx, ""); err != nil || len(l) != 2 {
					return fmt.Errorf("list = %d entries, %v; want 2", len(l), err)
				}
				return nil
			})
		}},
		{"open a read-only directory: refused", func() error {
			return chmod(dir, 0o555, func() error { return denied(open(dir)) })
		}},
		{"open a fresh read-only directory: refused", func() error {
			fresh := filepath.Join(os.Getenv(envDir), "fresh")
			if err := os.Mkdir(fresh, 0o555); err != nil {
				return err
			}
			return denied(open(fresh))
		}},
		{"open a new store in a read-only directory: refused", func() error {
			return chmod(dir, 0o555, func() error { return denied(open(filepath.Join(dir, "sub"))) })
		}},
		{"open with a read-only lock file: refused", func() error {
			return chmod(filepath.Join(dir, lockName), 0o444, func() error { return denied(open(dir)) })
		}},
		{"writes with a read-only lock file", func() error {
			return chmod(filepath.Join(dir, lockName), 0o444, func() error {
				_, err := s.CompareAndSet(ctx, "k", 1, []byte("new"), 0)
				if err := denied(err); err != nil {
					return err
				}
				return wantIntact(s, "k", "old", 1)
			})
		}},
		{"reads of an unreadable key file", func() error {
			return chmod(keyFile, 0, func() error {
				_, err := s.Get(ctx, "f")
				if err := denied(err); err != nil {
					return fmt.Errorf("get: %w", err)
				}
				_, err = s.List(ctx, "")
				if err := denied(err); err != nil {
					return fmt.Errorf("list: %w", err)
				}
				_, err = s.KeepAlive(ctx, "f", 1, time.Hour)
				if err := denied(err); err != nil {
					return fmt.Errorf("keepalive: %w", err)
				}
				return nil
			})
		}},
		{"all is well with permissions back", func() error {
			if _, err := s.KeepAlive(ctx, "f", 1, time.Hour); err != nil {
				return err
			}
			_, err := s.CompareAndSet(ctx, "k", 1, []byte("new"), 0)
			return err
		}},
	})
}
