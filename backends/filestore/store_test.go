package filestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/clocktest"
)

// fakeClock is what the tests need of a fake clock.
type fakeClock interface {
	clock.Clock
	Add(d time.Duration)
}

func newFakeClock() fakeClock { return clocktest.New(time.Time{}) }

const testBoot = "boot-1"

// env is a store directory, a fake monotonic clock and a boot id, from which
// a test opens as many Store values as it likes.
type env struct {
	t    *testing.T
	dir  string
	clk  fakeClock
	boot string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return &env{t: t, dir: filepath.Join(t.TempDir(), "store"), clk: newFakeClock(), boot: testBoot}
}

func (e *env) open() *Store {
	e.t.Helper()
	s, err := Open(context.Background(), e.dir, WithClock(e.boot, e.clk), WithCreate())
	if err != nil {
		e.t.Fatalf("Open(%s): %v", e.dir, err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, s *Store, key, value string, ttl time.Duration) backends.Entry {
	t.Helper()
	e, err := s.CreateIfAbsent(ctxT(t), key, []byte(value), ttl)
	if err != nil {
		t.Fatalf("CreateIfAbsent(%q): %v", key, err)
	}
	return e
}

func wantConflict(t *testing.T, err error, found bool, cur int64, reason error) {
	t.Helper()
	var ce *backends.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *ConflictError", err)
	}
	if ce.Found != found || (found && ce.Current.Revision != cur) {
		t.Errorf("conflict = found %v, current rev %d; want found %v, rev %d", ce.Found, ce.Current.Revision, found, cur)
	}
	if reason != nil && !errors.Is(err, reason) {
		t.Errorf("conflict %v does not wrap %v", err, reason)
	}
	if got := backends.Classify(err); got != backends.ClassLost {
		t.Errorf("Classify(%v) = %v, want lost", err, got)
	}
}

func TestLifecycleOfAKey(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	ctx := ctxT(t)

	c1 := mustCreate(t, s, "k", "one", 0)
	if c1.Revision != 1 || c1.CreateRevision != 1 || string(c1.Value) != "one" {
		t.Fatalf("create = %+v, want rev 1, crev 1, value one", c1)
	}
	_, err := s.CreateIfAbsent(ctx, "k", []byte("two"), 0)
	wantConflict(t, err, true, 1, backends.ErrExists)

	u, err := s.CompareAndSet(ctx, "k", 1, []byte("two"), 0)
	if err != nil || u.Revision != 2 || u.CreateRevision != 1 {
		t.Fatalf("cas rev 1 = %+v, %v; want rev 2, crev 1", u, err)
	}
	_, err = s.CompareAndSet(ctx, "k", 1, []byte("three"), 0)
	wantConflict(t, err, true, 2, nil)
	_, err = s.CompareAndSet(ctx, "k", 0, []byte("three"), 0)
	wantConflict(t, err, true, 2, backends.ErrExists)
	wantConflict(t, s.CompareAndDelete(ctx, "k", 1), true, 2, nil)

	if err := s.CompareAndDelete(ctx, "k", 2); err != nil {
		t.Fatalf("delete rev 2: %v", err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("get after delete: %v, want ErrNotFound", err)
	}
	_, err = s.CompareAndSet(ctx, "k", 2, []byte("x"), 0)
	wantConflict(t, err, false, 0, backends.ErrNotFound)
	wantConflict(t, s.CompareAndDelete(ctx, "k", 2), false, 0, backends.ErrNotFound)
	_, err = s.KeepAlive(ctx, "k", 2, time.Second)
	wantConflict(t, err, false, 0, backends.ErrNotFound)

	c2, err := s.CompareAndSet(ctx, "k", 0, []byte("again"), 0)
	if err != nil || c2.Revision != 3 || c2.CreateRevision != 3 {
		t.Fatalf("re-create = %+v, %v; want rev 3, crev 3 (above the deleted rev 2)", c2, err)
	}
	got, err := s.Get(ctx, "k")
	if err != nil || got.Revision != 3 || string(got.Value) != "again" {
		t.Fatalf("get = %+v, %v", got, err)
	}
}

func TestValuesAreCopied(t *testing.T) {
	s := newEnv(t).open()
	v := []byte("abc")
	e, err := s.CreateIfAbsent(ctxT(t), "k", v, 0)
	if err != nil {
		t.Fatal(err)
	}
	v[0] = 'X'
	if string(e.Value) != "abc" {
		t.Errorf("returned value changed with the caller's slice: %q", e.Value)
	}
	got, _ := s.Get(ctxT(t), "k")
	if string(got.Value) != "abc" {
		t.Errorf("stored value = %q, want abc", got.Value)
	}
}

func TestExpiryOnTheJudgeClock(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	ctx := ctxT(t)
	c := mustCreate(t, s, "lease", "a", time.Second)
	if c.TTL != time.Second || c.Remaining != time.Second {
		t.Fatalf("create = ttl %v, remaining %v; want 1s, 1s", c.TTL, c.Remaining)
	}
	e.clk.Add(999 * time.Millisecond)
	if got, err := s.Get(ctx, "lease"); err != nil || got.Remaining != time.Millisecond {
		t.Fatalf("get at 999ms = %+v, %v; want live with 1ms left", got, err)
	}
	e.clk.Add(time.Millisecond)
	if _, err := s.Get(ctx, "lease"); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("get at 1s = %v, want ErrNotFound", err)
	}
	if l, _ := s.List(ctx, ""); len(l) != 0 {
		t.Fatalf("list after expiry = %v, want empty", l)
	}
	_, err := s.KeepAlive(ctx, "lease", 1, time.Second)
	wantConflict(t, err, false, 0, backends.ErrNotFound)
	_, err = s.CompareAndSet(ctx, "lease", 1, nil, 0)
	wantConflict(t, err, false, 0, backends.ErrNotFound)

	n := mustCreate(t, s, "lease", "b", time.Second)
	if n.Revision != 2 || n.CreateRevision != 2 {
		t.Fatalf("create over expired = rev %d crev %d, want 2, 2", n.Revision, n.CreateRevision)
	}
}

func TestKeepAlive(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	ctx := ctxT(t)
	mustCreate(t, s, "k", "v", time.Second)
	e.clk.Add(900 * time.Millisecond)
	k, err := s.KeepAlive(ctx, "k", 1, 2*time.Second)
	if err != nil || k.Revision != 1 || k.TTL != 2*time.Second || k.Remaining != 2*time.Second || string(k.Value) != "v" {
		t.Fatalf("keepalive = %+v, %v; want rev 1, ttl 2s, remaining 2s, value v", k, err)
	}
	e.clk.Add(1900 * time.Millisecond)
	if _, err := s.Get(ctx, "k"); err != nil {
		t.Fatalf("get 1.9s after a 2s keep-alive: %v", err)
	}
	_, err = s.KeepAlive(ctx, "k", 2, time.Second)
	wantConflict(t, err, true, 1, nil)
	for _, ttl := range []time.Duration{0, -time.Second} {
		if _, err := s.KeepAlive(ctx, "k", 1, ttl); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("keepalive ttl %v: %v, want ErrInvalid", ttl, err)
		}
	}
	if _, err := s.KeepAlive(ctx, "k", 0, time.Second); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("keepalive rev 0: %v, want ErrInvalid", err)
	}
}

func TestRebootExpiresEveryLease(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	mustCreate(t, s, "lease", "a", time.Hour)
	mustCreate(t, s, "forever", "b", 0)
	s.Close()

	e.boot = "boot-2"
	s2 := e.open()
	ctx := ctxT(t)
	if _, err := s2.Get(ctx, "lease"); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("lease after reboot: %v, want ErrNotFound", err)
	}
	if _, err := s2.Get(ctx, "forever"); err != nil {
		t.Fatalf("entry without ttl after reboot: %v", err)
	}
	if c := mustCreate(t, s2, "lease", "c", time.Hour); c.CreateRevision != 2 {
		t.Fatalf("token after reboot = %d, want 2", c.CreateRevision)
	}
}

func TestRevisionsSurviveReopen(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	ctx := ctxT(t)
	mustCreate(t, s, "k", "v", 0)
	if _, err := s.CompareAndSet(ctx, "k", 1, []byte("w"), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.CompareAndDelete(ctx, "k", 2); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2 := e.open()
	if c := mustCreate(t, s2, "k", "x", 0); c.Revision != 3 {
		t.Fatalf("create after reopen = rev %d, want 3", c.Revision)
	}
}

func TestOddKeys(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	ctx := ctxT(t)
	keys := []string{
		"a/b/c", "../../escape", "..", ".", "/", "/abs", "with space", "ünïcödé", "日本語/キー",
		".lock", ".tmp-0000000000000000-0000000000000000", "k-00", "h-" + strings.Repeat("0", 64),
		strings.Repeat("long/", backends.MaxKeyBytes/5), strings.Repeat("é", backends.MaxKeyBytes/2),
	}
	for i, k := range keys {
		if _, err := s.CreateIfAbsent(ctx, k, []byte(fmt.Sprint(i)), 0); err != nil {
			t.Fatalf("create %q: %v", k, err)
		}
	}
	for i, k := range keys {
		got, err := s.Get(ctx, k)
		if err != nil || string(got.Value) != fmt.Sprint(i) || got.Key != k {
			t.Errorf("get %q = %+v, %v", k, got, err)
		}
	}
	all, err := s.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var gotKeys []string
	for _, en := range all {
		gotKeys = append(gotKeys, en.Key)
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	if !slices.Equal(gotKeys, want) {
		t.Errorf("list = %q, want %q", gotKeys, want)
	}
	// Nothing outside the directory, and nothing in it but key files and
	// the lock file.
	parent, _ := os.ReadDir(filepath.Dir(e.dir))
	if len(parent) != 1 {
		t.Errorf("parent directory holds %d entries, want only the store", len(parent))
	}
	names, _ := s.readDirNames()
	if len(names) != len(keys)+1 {
		t.Errorf("store directory holds %d names, want %d", len(names), len(keys)+1)
	}
	for _, bad := range []string{"", "a\x00b", strings.Repeat("x", backends.MaxKeyBytes+1), "\xff"} {
		if _, err := s.CreateIfAbsent(ctx, bad, nil, 0); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("create %q: %v, want ErrInvalid", bad, err)
		}
		if _, err := s.Get(ctx, bad); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("get %q: %v, want ErrInvalid", bad, err)
		}
	}
}

func TestListPrefix(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	ctx := ctxT(t)
	long := "g/" + strings.Repeat("x", 200)
	for _, k := range []string{"g/b", "g/a", "h/a", long, "g"} {
		mustCreate(t, s, k, k, 0)
	}
	mustCreate(t, s, "g/expiring", "", time.Second)
	d := mustCreate(t, s, "g/deleted", "", 0)
	if err := s.CompareAndDelete(ctx, "g/deleted", d.Revision); err != nil {
		t.Fatal(err)
	}
	e.clk.Add(time.Second)
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"g", "g/a", "g/b", long, "h/a"}},
		{"g/", []string{"g/a", "g/b", long}},
		{"g/x", []string{long}},
		{"h", []string{"h/a"}},
		{"zzz", nil},
	}
	for _, tt := range tests {
		l, err := s.List(ctx, tt.prefix)
		if err != nil {
			t.Fatalf("list %q: %v", tt.prefix, err)
		}
		var got []string
		for _, en := range l {
			got = append(got, en.Key)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("list %q = %q, want %q", tt.prefix, got, tt.want)
		}
	}
}

// TestCorruptStateFailsClosed puts bad files where keys' files belong: every
// operation on them is an error naming the file and wrapping ErrCorrupt,
// never "absent", and nothing is overwritten.
func TestCorruptStateFailsClosed(t *testing.T) {
	valid := encodeRecord(record{Key: "other", Value: []byte("v"), Revision: 1, CreateRevision: 1})
	tests := []struct {
		name    string
		content []byte
	}{
		{"empty", nil},
		{"truncated", valid[:len(valid)/2]},
		{"garbage", []byte("garbage\n")},
		{"flipped byte", append(append([]byte{}, valid[:30]...), append([]byte{valid[30] ^ 1}, valid[31:]...)...)},
		{"another key's file", valid},
		{"future version", []byte("tenure-filestore v9\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.open()
			ctx := ctxT(t)
			path := filepath.Join(e.dir, fileName("k"))
			if err := os.WriteFile(path, tt.content, 0o644); err != nil {
				t.Fatal(err)
			}
			check := func(op string, err error) {
				t.Helper()
				var cf *CorruptFileError
				if !errors.Is(err, backends.ErrCorrupt) || !errors.As(err, &cf) || cf.Path != path {
					t.Errorf("%s: err = %v, want a CorruptFileError for %s", op, err, path)
				}
				if !strings.Contains(fmt.Sprint(err), path) {
					t.Errorf("%s: error %q does not name the file", op, err)
				}
				if c := backends.Classify(err); c != backends.ClassFatal {
					t.Errorf("%s: class %v, want fatal", op, c)
				}
			}
			_, err := s.Get(ctx, "k")
			check("get", err)
			_, err = s.List(ctx, "")
			check("list", err)
			_, err = s.CreateIfAbsent(ctx, "k", nil, 0)
			check("create", err)
			_, err = s.CompareAndSet(ctx, "k", 1, nil, 0)
			check("cas", err)
			check("delete", s.CompareAndDelete(ctx, "k", 1))
			_, err = s.KeepAlive(ctx, "k", 1, time.Second)
			check("keepalive", err)
			_, err = s.Watch(ctx, "")
			check("watch", err)
			if got, _ := os.ReadFile(path); !bytes.Equal(got, tt.content) {
				t.Errorf("the bad file was changed")
			}
		})
	}
}

func TestMalformedKeyFileName(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	path := filepath.Join(e.dir, "k-ZZ")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := s.List(ctxT(t), "")
	var cf *CorruptFileError
	if !errors.As(err, &cf) || cf.Path != path || !errors.Is(err, backends.ErrCorrupt) {
		t.Fatalf("list with %s present: %v, want a CorruptFileError for it", path, err)
	}
}

func TestUnknownFilesAreIgnored(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	mustCreate(t, s, "k", "v", 0)
	os.WriteFile(filepath.Join(e.dir, "README"), []byte("notes"), 0o644)
	l, err := s.List(ctxT(t), "")
	if err != nil || len(l) != 1 {
		t.Fatalf("list = %v, %v; want the one key", l, err)
	}
}

// TestOrphanTempFiles checks that temp files of dead writers are removed by
// Open and by List, and that a temp file whose key lock is held is not.
func TestOrphanTempFiles(t *testing.T) {
	e := newEnv(t)
	s := e.open()
	orphan := filepath.Join(e.dir, tempName(lockOffset("a"), 1))
	busy := filepath.Join(e.dir, tempName(lockOffset("b"), 2))
	for _, p := range []string{orphan, busy} {
		if err := os.WriteFile(p, []byte("half a wri"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	held, err := s.lock(ctxT(t), lockOffset("b"))
	if err != nil {
		t.Fatal(err)
	}
	e.open()
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open left the orphan %s: %v", orphan, err)
	}
	if _, err := os.Stat(busy); err != nil {
		t.Errorf("Open removed %s while its key lock was held: %v", busy, err)
	}
	if _, err := s.List(ctxT(t), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(busy); err != nil {
		t.Errorf("List removed %s while its key lock was held: %v", busy, err)
	}
	held.unlock()
	if _, err := s.List(ctxT(t), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(busy); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("List left the orphan %s after its lock was freed: %v", busy, err)
	}
}

// TestLockWait holds a key's lock through another descriptor: a write
// polls for it on the store's wall clock (here a fake one), goes through
// once it is free, and gives up when its context ends.
func TestLockWait(t *testing.T) {
	tests := []struct {
		name    string
		cancel  bool
		wantErr error
	}{
		{"lock freed", false, nil},
		{"context cancelled", true, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newEnv(t).open()
			wall := clocktest.New(time.Time{})
			s.wall = wall
			held, err := s.lock(ctxT(t), lockOffset("k"))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(ctxT(t))
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := s.CreateIfAbsent(ctx, "k", nil, 0)
				done <- err
			}()
			// One armed timer: the writer found the lock taken and waits.
			if err := wall.BlockUntil(ctxT(t), 1); err != nil {
				t.Fatal(err)
			}
			if tt.cancel {
				cancel()
			} else {
				held.unlock()
				wall.Add(lockPollMin)
			}
			if err := <-done; !errors.Is(err, tt.wantErr) || (err != nil) != (tt.wantErr != nil) {
				t.Fatalf("create = %v, want %v", err, tt.wantErr)
			}
			held.unlock()
			_, err = s.Get(ctxT(t), "k")
			if wrote := err == nil; wrote != (tt.wantErr == nil) {
				t.Fatalf("get after the create: %v; want written: %v", err, tt.wantErr == nil)
			}
		})
	}
}

// TestConcurrentIncrements has goroutines of two Store values over one
// directory increment a counter with CompareAndSet: no update is lost.
func TestConcurrentIncrements(t *testing.T) {
	e := newEnv(t)
	stores := []*Store{e.open(), e.open()}
	ctx := ctxT(t)
	mustCreate(t, stores[0], "n", "0", 0)
	const workers, each = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%2]
			for done := 0; done < each; {
				cur, err := s.Get(ctx, "n")
				if err != nil {
					errs <- err
					return
				}
				var n int
				fmt.Sscan(string(cur.Value), &n)
				_, err = s.CompareAndSet(ctx, "n", cur.Revision, []byte(fmt.Sprint(n+1)), 0)
				if errors.Is(err, backends.ErrConflict) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				done++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := stores[1].Get(ctx, "n")
	if err != nil || string(got.Value) != fmt.Sprint(workers*each) || got.Revision != workers*each+1 {
		t.Fatalf("counter = %q at rev %d, %v; want %d at rev %d", got.Value, got.Revision, err, workers*each, workers*each+1)
	}
}

func TestCapabilities(t *testing.T) {
	s := newEnv(t).open()
	if err := backends.Require(s, backends.CapClaims|backends.CapCompareAndSet|backends.CapWatch); err != nil {
		t.Errorf("Require(claims, cas, watch) = %v", err)
	}
	if err := backends.Require(s, backends.CapTxn); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("Require(txn) = %v, want ErrUnsupported", err)
	}
	if _, ok := any(s).(backends.Txner); ok {
		t.Errorf("Store has a Txn method it does not declare")
	}
	if got := s.Capabilities().Scope; got != backends.ScopeHost {
		t.Errorf("Scope = %v, want host", got)
	}
}

func TestClosed(t *testing.T) {
	s := newEnv(t).open()
	ctx := ctxT(t)
	mustCreate(t, s, "k", "v", 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, e1 := s.Get(ctx, "k")
	_, e2 := s.List(ctx, "")
	_, e3 := s.CreateIfAbsent(ctx, "x", nil, 0)
	_, e4 := s.CompareAndSet(ctx, "k", 1, nil, 0)
	e5 := s.CompareAndDelete(ctx, "k", 1)
	_, e6 := s.KeepAlive(ctx, "k", 1, time.Second)
	_, e7 := s.Watch(ctx, "")
	for i, err := range []error{e1, e2, e3, e4, e5, e6, e7} {
		if !errors.Is(err, backends.ErrClosed) {
			t.Errorf("op %d after Close: %v, want ErrClosed", i+1, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := Open(context.Background(), file, WithClock(testBoot, newFakeClock())); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("Open(a file) = %v, want ErrInvalid", err)
	}
	if _, err := Open(context.Background(), t.TempDir(), WithClock("", newFakeClock())); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("Open with an empty boot id = %v, want ErrInvalid", err)
	}
}

// TestOpenEmptyPath checks that an empty path is refused: it would put the
// store in whatever the working directory happens to be.
func TestOpenEmptyPath(t *testing.T) {
	t.Chdir(t.TempDir())
	s, err := Open(context.Background(), "", WithClock(testBoot, newFakeClock()))
	if err == nil {
		s.Close()
		t.Fatalf("Open(\"\") opened a store in %s, want an error", s.Dir())
	}
	if !errors.Is(err, backends.ErrInvalid) || backends.Classify(err) != backends.ClassFatal {
		t.Errorf("Open(\"\") = %v, want an error wrapping ErrInvalid (fatal)", err)
	}
}

// TestOpenRelativePath checks that a relative path is resolved once, at
// Open: Dir reports the absolute directory, and the store stays there when
// the working directory changes.
func TestOpenRelativePath(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	t.Chdir(first)
	s, err := Open(context.Background(), filepath.Join("claims", "store"), WithClock(testBoot, newFakeClock()), WithCreate())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want := filepath.Join(first, "claims", "store")
	if s.Dir() != want {
		t.Errorf("Dir() = %q, want %q", s.Dir(), want)
	}
	t.Chdir(second)
	mustCreate(t, s, "k", "v", 0)
	if _, err := os.Stat(filepath.Join(want, fileName("k"))); err != nil {
		t.Errorf("key file not in %s: %v", want, err)
	}
	if _, err := os.Stat(filepath.Join(second, "claims")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the new working directory has a store too: %v", err)
	}
}
