package backends_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// noTxnLockers returns a memstore without its Txn (faults.Hide), counted
// by store, a locker over store, and a leader's locker over the same
// memstore whose calls store does not count.
func noTxnLockers(t *testing.T) (store *faults.Store, counted, lead *backends.StoreLocker) {
	t.Helper()
	base := faults.Hide(memstore.New(), backends.CapTxn)
	store = faults.Wrap(base, nil)
	if backends.Require(store, backends.CapTxn) == nil {
		t.Fatal("the store without Txn declares it: its lockers would write by transactions, which writes does not count")
	}
	counted, err := backends.NewLocker(store)
	if err != nil {
		t.Fatal(err)
	}
	lead, err = backends.NewLocker(faults.Wrap(base, nil))
	if err != nil {
		t.Fatal(err)
	}
	return store, counted, lead
}

// writes counts the writes store has passed on.
func writes(store *faults.Store) int {
	return store.Calls(faults.OpCreate | faults.OpCompareAndSet | faults.OpCompareAndDelete)
}

// transferred has a leader on locker lead transfer "k" to "target" while
// watcher watches the claim, and returns once watcher's watch has signalled
// the change (the reservation is written before the claim is released, so
// the signal follows its event), with a func that ends the watch.
func transferred(t *testing.T, lead, watcher *backends.StoreLocker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := watcher.WatchClaim(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	h, _ := backends.NewHolder("leader")
	c, err := lead.TryAcquire(ctx, "k", h, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	<-ch // the acquisition's event
	if err := lead.Transfer(ctx, c, "target", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	<-ch
	return func() {
		cancel()
		for range ch { // until the watch's goroutine is done
		}
	}
}

// TestReservationRefusedWithoutWrites has a candidate that is not a
// transfer's target try the reserved claim, on a store without Txn, after
// its watch reported the reservation: it is refused with a
// *ReservedError, having written nothing (it used to create the claim and
// release it again).
func TestReservationRefusedWithoutWrites(t *testing.T) {
	store, other, lead := noTxnLockers(t)
	transferred(t, lead, other)
	before := writes(store)
	h, _ := backends.NewHolder("other")
	_, err := other.TryAcquire(context.Background(), "k", h, 10*time.Second)
	var re *backends.ReservedError
	if !errors.As(err, &re) || re.To != "target" {
		t.Fatalf("TryAcquire by a candidate the claim is not reserved for = %v, want a *ReservedError for target", err)
	}
	if n := writes(store) - before; n != 0 {
		t.Errorf("the refused acquisition made %d writes, want 0", n)
	}
	// The target still takes it.
	target, _ := backends.NewHolder("target")
	if _, err := other.TryAcquire(context.Background(), "k", target, 10*time.Second); err != nil {
		t.Errorf("TryAcquire by the target: %v", err)
	}
}

// TestReservedTargetTakesInOneTxn has a transfer's target take the claim
// on a store with Txn after its watch reported the reservation: one
// transaction takes the claim and ends the reservation (it used to take
// two, the first refused by the reservation it did not know of).
func TestReservedTargetTakesInOneTxn(t *testing.T) {
	ms := memstore.New()
	store := faults.Wrap(ms, nil)
	tl, err := backends.NewLocker(store)
	if err != nil {
		t.Fatal(err)
	}
	lead, err := backends.NewLocker(ms)
	if err != nil {
		t.Fatal(err)
	}
	transferred(t, lead, tl)
	before := store.Calls(faults.OpTxn)
	target, _ := backends.NewHolder("target")
	c, err := tl.TryAcquire(context.Background(), "k", target, 10*time.Second)
	if err != nil {
		t.Fatalf("TryAcquire by the target: %v", err)
	}
	if n := store.Calls(faults.OpTxn) - before; n != 1 {
		t.Errorf("the target's acquisition took %d transactions, want 1", n)
	}
	if _, err := store.Get(context.Background(), "k"); err != nil {
		t.Errorf("the claim after the take: %v", err)
	}
	// The reservation is gone: another candidate takes the claim once the
	// target releases it.
	if err := tl.Release(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	h, _ := backends.NewHolder("other")
	if _, err := tl.TryAcquire(context.Background(), "k", h, 10*time.Second); err != nil {
		t.Errorf("TryAcquire after the target released: %v", err)
	}
}

// TestStaleReservationHint has a candidate whose watch reported a
// reservation and then ended, and which tries once the reservation is
// gone (its target took the claim and released it): the acquisition goes
// on as without the hint.
func TestStaleReservationHint(t *testing.T) {
	for _, txn := range []bool{false, true} {
		var s backends.Store = faults.Wrap(faults.Hide(memstore.New(), backends.CapTxn), nil)
		if txn {
			s = memstore.New()
		}
		l, err := backends.NewLocker(s)
		if err != nil {
			t.Fatal(err)
		}
		other, err := backends.NewLocker(s)
		if err != nil {
			t.Fatal(err)
		}
		stop := transferred(t, other, l)
		stop()
		target, _ := backends.NewHolder("target")
		c, err := other.TryAcquire(context.Background(), "k", target, 10*time.Second)
		if err != nil {
			t.Fatalf("txn %t: TryAcquire by the target: %v", txn, err)
		}
		if err := other.Release(context.Background(), c); err != nil {
			t.Fatal(err)
		}
		h, _ := backends.NewHolder("late")
		if _, err := l.TryAcquire(context.Background(), "k", h, 10*time.Second); err != nil {
			t.Errorf("txn %t: TryAcquire with a stale hint: %v", txn, err)
		}
	}
}

// TestTargetKeepsReservationUntilRelease has a transfer's target take the
// claim on a store without Txn: its acquisition writes only the claim (it
// used to delete the reservation too, one more write before it led), and
// its release ends the reservation before the claim, so that the claim is
// open to all once released, and its own transfer replaces the
// reservation in one write.
func TestTargetKeepsReservationUntilRelease(t *testing.T) {
	for _, then := range []string{"release", "transfer"} {
		t.Run(then, func(t *testing.T) {
			store, tl, lead := noTxnLockers(t)
			transferred(t, lead, tl)
			ctx := context.Background()
			before := writes(store)
			target, _ := backends.NewHolder("target")
			c, err := tl.TryAcquire(ctx, "k", target, 10*time.Second)
			if err != nil {
				t.Fatalf("TryAcquire by the target: %v", err)
			}
			if n := writes(store) - before; n != 1 {
				t.Errorf("the target's acquisition made %d writes, want 1 (the claim's create)", n)
			}
			next, _ := backends.NewHolder("next")
			switch then {
			case "release":
				if err := tl.Release(ctx, c); err != nil {
					t.Fatal(err)
				}
			case "transfer":
				before = writes(store)
				if err := tl.Transfer(ctx, c, "next", 10*time.Second); err != nil {
					t.Fatal(err)
				}
				if n := writes(store) - before; n != 2 {
					t.Errorf("the target's transfer made %d writes, want 2 (the reservation, then the claim's delete)", n)
				}
			}
			if _, err := lead.TryAcquire(ctx, "k", next, 10*time.Second); err != nil {
				t.Errorf("TryAcquire after the target's %s: %v", then, err)
			}
		})
	}
}

// TestRefusalRemembersTheReservation has a candidate that no watch told
// of a reservation try the reserved claim twice on a store without Txn:
// the first attempt finds the reservation after its create (and releases
// the claim unused), the second reads it first and writes nothing (it
// used to create and release again).
func TestRefusalRemembersTheReservation(t *testing.T) {
	store, other, lead := noTxnLockers(t)
	ctx := context.Background()
	h, _ := backends.NewHolder("leader")
	c, err := lead.TryAcquire(ctx, "k", h, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := lead.Transfer(ctx, c, "target", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	o, _ := backends.NewHolder("other")
	for i, want := range []int{2, 0} {
		before := writes(store)
		_, err := other.TryAcquire(ctx, "k", o, 10*time.Second)
		var re *backends.ReservedError
		if !errors.As(err, &re) {
			t.Fatalf("attempt %d = %v, want a *ReservedError", i+1, err)
		}
		if n := writes(store) - before; n != want {
			t.Errorf("attempt %d made %d writes, want %d", i+1, n, want)
		}
	}
}
