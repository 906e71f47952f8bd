package slots_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
	"github.com/tenure-go/tenure/slots"
)

func newLocker(t *testing.T, s backends.Store) *backends.StoreLocker {
	t.Helper()
	l, err := backends.NewLocker(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// wantKindRefused checks that err refuses a claim kind on a key of the other
// kind: invalid input, so an elector reports it as fatal.
func wantKindRefused(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, backends.ErrInvalid) || backends.Classify(err) != backends.ClassFatal {
		t.Errorf("%s = %v, want ErrInvalid of class fatal", what, err)
	}
}

// TestClaimAndGroupDoNotShareAKey checks that a single claim on a key that is
// a slot group is refused, and so is a group on a key held as a single claim.
func TestClaimAndGroupDoNotShareAKey(t *testing.T) {
	eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
		ctx := bound(t)
		g, l := newGroup(t, s, 1), newLocker(t, s)

		if _, err := g.TryAcquire(ctx, "job", holder(t, "g"), time.Minute); err != nil {
			t.Fatal(err)
		}
		_, err := l.TryAcquire(ctx, "job", holder(t, "c"), time.Minute)
		wantKindRefused(t, "single claim on a group's key", err)
		// The group's size entry is never deleted: no retry can succeed.
		if !errors.Is(err, backends.ErrUsage) {
			t.Errorf("single claim on a group's key = %v, want a usage error (ErrUsage)", err)
		}
		if _, err := s.Get(ctx, "job"); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("the refused claim is still in the store: %v", err)
		}

		if _, err := l.TryAcquire(ctx, "task", holder(t, "c"), time.Minute); err != nil {
			t.Fatal(err)
		}
		_, err = g.TryAcquire(ctx, "task", holder(t, "g"), time.Minute)
		wantKindRefused(t, "slot group on a single claim's key", err)
		// The claim can end (a single claim's deployment being replaced by
		// a group's): fatal, retried with backoff, not a usage error.
		if errors.Is(err, backends.ErrUsage) {
			t.Errorf("slot group on a single claim's key = %v, want no usage error: the claim may end", err)
		}
		if got := slotEntries(t, s, "task"); len(got) != 0 {
			t.Errorf("slots of the refused group = %v, want none", got)
		}
	})
}

// TestClaimAndGroupStartingAtOnce interleaves a single claim and a slot
// group starting on one key at the worst moments: never do both lead.
func TestClaimAndGroupStartingAtOnce(t *testing.T) {
	// The claim is written and, before it reads the group's size entry, the
	// group starts: the group sees the claim and refuses; the claim then
	// sees the size entry and refuses too. Once the claim is gone the group
	// starts. (On a store without transactions: with one, the claim's
	// write and its check are one step, see "claim in one transaction".)
	t.Run("claim first", func(t *testing.T) {
		eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
			ctx := bound(t)
			f := faults.Wrap(faults.Hide(s, backends.CapTxn), clk)
			l, g := newLocker(t, f), newGroup(t, s, 1)
			gate := f.Pause(faults.OpGet, faults.BeforeCall, 1)
			done := make(chan error, 1)
			go func() {
				_, err := l.TryAcquire(ctx, "job", holder(t, "c"), time.Minute)
				done <- err
			}()
			call := nextCall(t, ctx, gate, done)
			if call.Key != slots.SizeKey("job") {
				t.Fatalf("the claim read %q, want the size entry", call.Key)
			}
			_, gerr := g.TryAcquire(ctx, "job", holder(t, "g"), time.Minute)
			wantKindRefused(t, "group starting while a claim is written", gerr)
			call.Release()
			wantKindRefused(t, "claim that finds a group started", <-done)
			if _, err := g.TryAcquire(ctx, "job", holder(t, "g"), time.Minute); err != nil {
				t.Errorf("group once the refused claim is gone: %v", err)
			}
		})
	})
	// On a store with transactions the claim is one transaction that also
	// requires the size entry absent. Held before it is sent, while the
	// group starts and takes a slot, it is refused as a usage error, and
	// nothing of it is written.
	t.Run("claim in one transaction", func(t *testing.T) {
		eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
			if backends.Require(s, backends.CapTxn) != nil {
				t.Skip("the store has no transactions")
			}
			ctx := bound(t)
			f := faults.Wrap(s, clk)
			l, g := newLocker(t, f), newGroup(t, s, 1)
			gate := f.Pause(faults.OpTxn, faults.BeforeCall, 1)
			done := make(chan error, 1)
			go func() {
				_, err := l.TryAcquire(ctx, "job", holder(t, "c"), time.Minute)
				done <- err
			}()
			call := nextCall(t, ctx, gate, done)
			if _, err := g.TryAcquire(ctx, "job", holder(t, "g"), time.Minute); err != nil {
				t.Fatalf("group starting while a claim is sent: %v", err)
			}
			call.Release()
			err := <-done
			wantKindRefused(t, "claim that finds a group started", err)
			if !errors.Is(err, backends.ErrUsage) {
				t.Errorf("claim that finds a group started = %v, want a usage error", err)
			}
			if _, err := s.Get(ctx, "job"); !errors.Is(err, backends.ErrNotFound) {
				t.Errorf("the refused claim is in the store: %v", err)
			}
			if got := f.Calls(faults.OpGet | faults.OpCreate | faults.OpCompareAndDelete); got != 0 {
				t.Errorf("the claim made %d calls besides its transaction, want none", got)
			}
		})
	})
	// The group has checked for a claim and, before it writes its slot, the
	// claim is taken: the claim sees the size entry and gives itself up; the
	// group leads.
	t.Run("group first", func(t *testing.T) {
		eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
			ctx := bound(t)
			f := faults.Wrap(s, clk)
			g, l := newGroup(t, f, 1), newLocker(t, s)
			if _, err := g.Size(ctx, "job"); err != nil {
				t.Fatal(err)
			}
			gate := f.Pause(faults.OpCreate|faults.OpTxn, faults.BeforeCall, 1)
			done := make(chan error, 1)
			go func() {
				_, err := g.TryAcquire(ctx, "job", holder(t, "g"), time.Minute)
				done <- err
			}()
			call, err := gate.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, cerr := l.TryAcquire(ctx, "job", holder(t, "c"), time.Minute)
			wantKindRefused(t, "claim taken while a group acquires", cerr)
			call.Release()
			if err := <-done; err != nil {
				t.Errorf("group acquiring while a claim was refused: %v", err)
			}
		})
	})
}

// nextCall returns the next call held at gate, failing the test if the
// operation under test returns without making one.
func nextCall(t *testing.T, ctx context.Context, gate *faults.Gate, done <-chan error) *faults.Call {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan *faults.Call, 1)
	go func() {
		c, _ := gate.Next(ctx)
		got <- c
	}()
	select {
	case c := <-got:
		if c == nil {
			t.Fatal("no call reached the gate")
		}
		return c
	case err := <-done:
		cancel()
		<-got
		t.Fatalf("returned (%v) without the call the gate waits for", err)
	}
	return nil
}

// TestLockerHoldersOfAGroup checks that the generic Locker's Holders on a
// group's key lists the group's holders, by slot.
func TestLockerHoldersOfAGroup(t *testing.T) {
	eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
		ctx := bound(t)
		g := newGroup(t, s, 3)
		var want []backends.Claim
		for _, id := range []string{"a", "b"} {
			l, err := g.TryAcquire(ctx, "grp", holder(t, id), time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, l)
		}
		if want[0].Slot > want[1].Slot {
			want[0], want[1] = want[1], want[0]
		}
		got, err := newLocker(t, s).Holders(ctx, "grp")
		if err != nil || len(got) != 2 {
			t.Fatalf("Locker.Holders of a group = %+v, %v; want its 2 holders", got, err)
		}
		for i := range got {
			if got[i].Holder != want[i].Holder || got[i].Slot != want[i].Slot || got[i].Token != want[i].Token {
				t.Errorf("holder %d = %s slot %d token %d, want %s slot %d token %d",
					i, got[i].Holder, got[i].Slot, got[i].Token, want[i].Holder, want[i].Slot, want[i].Token)
			}
		}
	})
}

// TestLockerWatchesAGroup checks that the generic Locker's WatchClaim on a
// group's key signals a change to the group's slots, as its Holders lists
// them.
func TestLockerWatchesAGroup(t *testing.T) {
	eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
		// The timeout only bounds a failing run; a passing one is signalled.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		g := newGroup(t, s, 2)
		l, err := g.TryAcquire(ctx, "grp", holder(t, "a"), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := newLocker(t, s).WatchClaim(ctx, "grp")
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		wantSignal(t, ctx, cancel, ch, "the Locker's watch on a group's key, of a released slot")
	})
}

// TestSizeMismatchIsLogged checks that a process configured with another size
// than the group's stored one is told, once per stored size, with both
// numbers.
func TestSizeMismatchIsLogged(t *testing.T) {
	eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
		ctx := bound(t)
		admin := newGroup(t, s, 3)
		if _, err := admin.Size(ctx, "grp"); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		g, err := slots.New(s, slots.Config{Size: 5, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
		if err != nil {
			t.Fatal(err)
		}
		warnings := func() []string {
			var out []string
			for line := range strings.Lines(buf.String()) {
				if strings.Contains(line, "level=WARN") {
					out = append(out, line)
				}
			}
			return out
		}

		for range 2 {
			if _, err := g.TryAcquire(ctx, "grp", holder(t, "a"), time.Minute); err != nil && !errors.Is(err, backends.ErrHeld) {
				t.Fatal(err)
			}
		}
		w := warnings()
		if len(w) != 1 || !strings.Contains(w[0], "configured=5") || !strings.Contains(w[0], "stored=3") ||
			!strings.Contains(w[0], "size 3 in the store, not the configured 5") {
			t.Fatalf("warnings after joining a group of 3 configured with 5: %q; want one naming both", w)
		}
		if err := admin.Resize(ctx, "grp", 4); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Size(ctx, "grp"); err != nil {
			t.Fatal(err)
		}
		if w := warnings(); len(w) != 2 || !strings.Contains(w[1], "stored=4") {
			t.Fatalf("warnings after a resize to 4: %q; want a second naming 4", w)
		}
		if err := admin.Resize(ctx, "grp", 5); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Size(ctx, "grp"); err != nil {
			t.Fatal(err)
		}
		if w := warnings(); len(w) != 2 {
			t.Errorf("warnings once the stored size matches: %q; want no new one", w)
		}
	})
}
