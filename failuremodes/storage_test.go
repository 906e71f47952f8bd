package failuremodes_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
	"github.com/tenure-go/tenure/slots"
)

// holdLockEnv names the lock file a child process of FM-19 locks.
const holdLockEnv = "TENURE_FM_HOLD_LOCK"

// holdLock is the child: it takes a write lock on the whole of path (every
// key's operation lock in a filestore), says so, and waits to be killed.
func holdLock(path string) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk); err != nil {
		fmt.Println("lock:", err)
		os.Exit(2)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin) // until killed
	os.Exit(0)
}

// lockedByOther reports whether some other open file description holds a
// lock on any byte of path.
func lockedByOther(t *testing.T, path string) bool {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk); err != nil {
		t.Fatal(err)
	}
	return lk.Type != unix.F_UNLCK
}

// TestFM19FileStoreCrashLeftovers checks FM-19, crash leftovers in a file
// store: a writer that died mid-write, or while holding an operation lock,
// must leave nothing that blocks or confuses the store.
//
// Trigger: a writer dies mid-write, leaving a temp file, or dies while
// holding the per-key operation lock.
//
// A naive elector: a lock-file (mkdir) scheme without stale recovery stays
// locked forever after its holder died; readers that list the directory see
// temp files as keys.
//
// Tenure: filestore's operation lock is an OFD lock the kernel drops when its
// holder dies, so a dead holder never blocks anyone; temp files are never
// read as entries and are removed once their lock is free; an elector over
// the directory campaigns and leads as usual.
func TestFM19FileStoreCrashLeftovers(t *testing.T) {
	t.Run("filestore: dead lock holder and orphan temp file", func(t *testing.T) {
		dir := t.TempDir()
		w := newWorldOn(t, func(clk *clocktest.Clock) backends.Store {
			s, err := filestore.Open(context.Background(), dir, filestore.WithClock("fm-boot", clk))
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
		lockPath := filepath.Join(dir, ".lock")

		// A process takes every operation lock and is killed holding them.
		child := exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), holdLockEnv+"="+lockPath)
		stdin, err := child.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		out, err := child.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if strings.TrimSpace(line) != "locked" {
			child.Process.Kill()
			child.Wait()
			t.Fatalf("child: %q", line)
		}
		if !lockedByOther(t, lockPath) {
			t.Fatal("the child's lock is not visible")
		}
		if err := child.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		child.Wait()
		if lockedByOther(t, lockPath) {
			t.Fatal("the kernel kept a dead process's lock")
		}

		// A writer died between writing its temp file and renaming it.
		temp := filepath.Join(dir, ".tmp-0000000000000007-00000000deadbeef")
		if err := os.WriteFile(temp, []byte("half a record"), 0o644); err != nil {
			t.Fatal(err)
		}
		all, err := w.store.List(w.ctx, "")
		if err != nil || len(all) != 0 {
			t.Fatalf("List with an orphan temp file = %+v, %v; want nothing", all, err)
		}
		if _, err := os.Stat(temp); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("orphan temp file after List: %v, want removed", err)
		}

		a := w.newNode("a").start()
		a.await(electortest.Elected, 1)
		b := w.newNode("b").start()
		b.await(electortest.Lost, 1)
		w.step(leaderTimers+followerTimers, renewPeriod)
		a.await(electortest.Renewed, 1)
		onlyLeader(t, w, "a", a, b)
	})
	t.Run("naive: a lock directory outlives its holder", func(t *testing.T) {
		dir := t.TempDir()
		lock := filepath.Join(dir, "claim.lock")
		tryLock := func() bool { return os.Mkdir(lock, 0o755) == nil }
		if !tryLock() {
			t.Fatal("first lock failed")
		}
		// Its holder dies here; nothing removes the directory.
		for i := range 10 {
			if tryLock() {
				t.Fatalf("attempt %d took the lock", i)
			}
		}
		t.Log("naive: the lock of a dead holder is never recovered (the failure mode)")
	})
}

// TestFM20StaleClaimOfEarlierIncarnation checks FM-20, stale or expired claim
// of an earlier incarnation: a holder whose claim expired and was taken by a
// new incarnation with the same identity must not renew or release the new
// claim.
//
// Trigger: a holder pauses past its TTL; meanwhile its replacement, with the
// same configured id (a restarted pod), takes the claim; then the old one
// wakes and renews.
//
// A naive elector: "owner = me" holds for the old incarnation too: it renews
// the new one's claim and both lead.
//
// Tenure: an expired claim is absent to everyone. The new holder gets a
// higher token; the old holder's renewal is refused as lost (its nonce and
// token are not the claim's) and its release does not touch the new claim.
func TestFM20StaleClaimOfEarlierIncarnation(t *testing.T) {
	const id = "pod-0"
	same := withConfig(func(c *elector.Config) { c.Identity = id })
	t.Run("tenure: the old lease is refused", func(t *testing.T) {
		w := newWorld(t)
		paused, resume := make(chan struct{}), make(chan struct{})
		var once bool
		old := w.newNode("old", same, withFault(electortest.Renew, &electortest.Fault{Before: func() {
			if !once { // the loop goroutine is the only caller
				once = true
				close(paused)
				<-resume // the process is stopped
			}
		}})).start()
		defer func() {
			select {
			case <-resume:
			default:
				close(resume)
			}
		}()
		first := old.await(electortest.Elected, 1).Term
		w.step(leaderTimers, renewPeriod)
		recv(w, paused)
		w.clk.Add(time.Second / 2)
		fresh := w.newNode("new", same).start()
		fresh.await(electortest.Lost, 1)
		// old's deadline and request timer, fresh's wait: the claim expires
		// at 10s and fresh takes it at 10.001s.
		w.step(3, ttl+time.Millisecond-w.elapsed())
		second := fresh.await(electortest.Elected, 1).Term
		if second.Token <= first.Token {
			t.Fatalf("new incarnation's token %d, old's %d: want higher", second.Token, first.Token)
		}
		// old wakes up: its renewal (whose request timeout ran out during
		// the pause) fails, and its release, sent with its old lease, is
		// refused by the store.
		close(resume)
		old.await(electortest.RenewFail, 1)
		old.await(electortest.OnDemoted, 1)
		if n := old.rec.Count(electortest.Renewed); n != 0 {
			t.Errorf("the old incarnation renewed %d times after waking", n)
		}
		if n := old.f.Calls(faults.OpCompareAndDelete); n != 1 {
			t.Errorf("the old incarnation sent %d releases, want 1 (refused)", n)
		}
		if hs := w.holders(); len(hs) != 1 || hs[0].Holder != fresh.e.Holder() || hs[0].Token != second.Token {
			t.Errorf("holders = %+v, want the new incarnation's claim untouched", hs)
		}
		onlyLeader(t, w, "new", old, fresh)

		// The same, straight through a Locker with the old lease.
		l, err := backends.NewLocker(w.store)
		if err != nil {
			t.Fatal(err)
		}
		stale := backends.Claim{Key: key, Holder: old.e.Holder(), Token: first.Token, Revision: first.Token, TTL: ttl}
		if _, err := l.Renew(w.ctx, stale); backends.Classify(err) != backends.ClassLost {
			t.Errorf("Renew(old lease) = %v, want a lost-class error", err)
		}
		if err := l.Release(w.ctx, stale); !errors.Is(err, backends.ErrNotHolder) {
			t.Errorf("Release(old lease) = %v, want ErrNotHolder", err)
		}
		if hs := w.holders(); len(hs) != 1 || hs[0].Token != second.Token {
			t.Errorf("holders after the old lease's renew and release = %+v", hs)
		}
	})
	t.Run("naive: the old incarnation renews the new claim", func(t *testing.T) {
		w := newWorld(t)
		p := newPausing(&epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		defer func() {
			select {
			case <-p.resume:
			default:
				close(p.resume)
			}
		}()
		old := w.newNaive(id, p)
		old.Start(w.ctx)
		w.awaitRec("old", old.rec, electortest.Acquired, 1)
		w.clk.Add(renewPeriod)
		recv(w, p.paused)
		w.clk.Add(ttl) // 13s: old's claim expired at 10s
		fresh := w.newNaive(id, &epochLocker{store: w.naiveStore(), key: key, ttl: ttl, wall: w.clk})
		fresh.Start(w.ctx)
		w.awaitRec("new", fresh.rec, electortest.Acquired, 1)
		close(p.resume)
		w.awaitRec("old", old.rec, electortest.Renewed, 1)
		if got := leaders(old, fresh); len(got) != 2 {
			t.Fatalf("naive: leaders = %v, want the failure mode (both)", got)
		}
	})
}

// undeclared declares only what keep says of its inner store's
// capabilities.
type undeclared struct {
	backends.Store
	keep backends.Capability
}

func (u undeclared) Capabilities() backends.Capabilities {
	c := u.Store.Capabilities()
	c.Atomic &= u.keep
	return c
}

// TestFM27HiddenCapabilityFailsClosed checks FM-27, a wrapper that hides a
// capability: a store that does not enforce what a caller needs, or a wrapper
// that declares what it no longer passes through, must fail closed.
//
// Trigger: a store wrapper (logging, metrics) embeds backends.Store and so
// drops Watch or Txn while still declaring them; or a store that does not
// enforce what a caller needs.
//
// A naive elector: a type assertion finds no method and the caller silently
// falls back, or finds a method the store does not enforce.
//
// Tenure: backends.Require checks the declaration and the method; it fails
// closed with an error wrapping errors.ErrUnsupported, and so do NewLocker
// and WatchClaim. An elector over such a store does not watch; it times
// attempts to the observed expiry.
func TestFM27HiddenCapabilityFailsClosed(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.New(time.Time{})
	mem := memstore.New(memstore.WithClock(clk))
	defer mem.Close()
	fs, err := filestore.Open(context.Background(), t.TempDir(), filestore.WithClock("fm-boot", clk))
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	careless := faults.Hide(mem, backends.CapWatch|backends.CapTxn)

	// What a type assertion would conclude, and what the declaration says.
	if _, ok := careless.(backends.Watcher); ok || !careless.Capabilities().Has(backends.CapWatch) {
		t.Fatalf("the careless wrapper: Watcher %v, declares watch %v; want false, true", ok, careless.Capabilities().Has(backends.CapWatch))
	}
	tests := []struct {
		name string
		err  error
	}{
		{"Require(watch) of a wrapper hiding Watch", backends.Require(careless, backends.CapWatch)},
		{"Require(txn) of a wrapper hiding Txn", backends.Require(careless, backends.CapTxn)},
		{"Require(txn) of filestore", backends.Require(fs, backends.CapTxn)},
		{"NewLocker over a store not declaring keep-alive", func() error {
			_, err := backends.NewLocker(undeclared{Store: mem, keep: backends.CapCreateIfAbsent | backends.CapCompareAndDelete})
			return err
		}()},
		{"WatchClaim of a slot group over a wrapper hiding Watch", func() error {
			g, err := slots.New(careless, slots.Config{Size: 2})
			if err != nil {
				return fmt.Errorf("slots.New: %w", err)
			}
			_, err = g.WatchClaim(ctx, "k")
			return err
		}()},
		{"WatchClaim of a Locker over a wrapper hiding Watch", func() error {
			l, err := backends.NewLocker(careless)
			if err != nil {
				return fmt.Errorf("NewLocker: %w", err)
			}
			_, err = l.WatchClaim(ctx, "k")
			return err
		}()},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, errors.ErrUnsupported) {
			t.Errorf("%s = %v, want an error wrapping errors.ErrUnsupported", tt.name, tt.err)
		}
	}
	if err := backends.Require(mem, backends.CapClaims|backends.CapWatch|backends.CapTxn); err != nil {
		t.Errorf("Require of memstore itself: %v", err)
	}

	// An elector over the careless wrapper does not watch: a released claim
	// is taken at the follower's timed attempt. With the watch, at once.
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprintf("elector with watch %v", watch), func(t *testing.T) {
			w := newWorld(t)
			a := w.newNode("a").start()
			a.await(electortest.Elected, 1)
			var opts []nodeOption
			if watch {
				opts = append(opts, withWatch())
			}
			b := w.newNode("b", opts...).start()
			b.await(electortest.Lost, 1)
			if err := a.e.Stop(w.ctx); err != nil {
				t.Fatal(err)
			}
			if watch {
				b.await(electortest.Elected, 1) // no time passes
				return
			}
			w.settle(followerTimers)
			if n := b.rec.Count(electortest.Elected); n != 0 {
				t.Fatalf("b elected %d times without a watch and without time passing", n)
			}
			w.stepUntil(followerTimers, 100*time.Millisecond, func() bool { return b.rec.Count(electortest.Elected) > 0 })
		})
	}
}
