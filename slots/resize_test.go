package slots_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
	"github.com/tenure-go/tenure/internal/wire"
	"github.com/tenure-go/tenure/slots"
)

// bound limits a test that would otherwise hang when it fails; a passing
// run never waits on it.
func bound(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// holdSlot writes slot i of group for a holder outside the test's groups.
func holdSlot(t *testing.T, s backends.Store, group string, i int) {
	t.Helper()
	h := holder(t, "other")
	if _, err := s.CreateIfAbsent(context.Background(), slots.SlotKey(group, i), wire.EncodeClaim(wire.Claim{ID: h.ID, Nonce: h.Nonce}), time.Hour); err != nil {
		t.Fatal(err)
	}
}

// slotEntries returns the indices of group's slot entries in the store.
func slotEntries(t *testing.T, s backends.Store, group string) []int {
	t.Helper()
	es, err := s.List(context.Background(), group+"/slot-")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range es {
		i, err := strconv.Atoi(strings.TrimPrefix(e.Key, group+"/slot-"))
		if err != nil {
			t.Fatalf("store key %q: %v", e.Key, err)
		}
		out = append(out, i)
	}
	return out
}

// TestAcquireRacingResize lets Resize(1) run between an acquisition's read
// of the size (3) and its write of slot 1 or 2: no slot at or above 1 may
// exist once both have returned, and the acquirer gets no lease. On a store
// with transactions the write is refused; on one without, the slot is
// written and given up again.
func TestAcquireRacingResize(t *testing.T) {
	eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
		ctx := bound(t)
		f := faults.Wrap(s, clk)
		g, admin := newGroup(t, f, 3), newGroup(t, s, 3)
		if _, err := admin.Size(ctx, "grp"); err != nil {
			t.Fatal(err)
		}
		holdSlot(t, s, "grp", 0) // so the acquirer writes slot 1 or 2

		gate := f.Pause(faults.OpCreate|faults.OpTxn, faults.BeforeCall, 1)
		type result struct {
			l   backends.Claim
			err error
		}
		done := make(chan result, 1)
		go func() {
			l, err := g.TryAcquire(ctx, "grp", holder(t, "a"), time.Minute)
			done <- result{l, err}
		}()
		call, err := gate.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if call.Key != slots.SlotKey("grp", 1) && call.Key != slots.SlotKey("grp", 2) {
			t.Fatalf("held write of %q, want slot 1 or 2", call.Key)
		}
		if err := admin.Resize(ctx, "grp", 1); err != nil {
			t.Fatal(err)
		}
		call.Release()
		r := <-done
		if !errors.Is(r.err, backends.ErrHeld) {
			t.Errorf("acquire racing Resize(1) = slot %d, %v; want ErrHeld", r.l.Slot, r.err)
		}
		if got := slotEntries(t, s, "grp"); len(got) != 1 || got[0] != 0 {
			t.Errorf("slots in the store after both returned = %v, want [0]", got)
		}
	})
}

// TestRenewRacingResize lets Resize(1) run between a renewal's start and its
// keep-alive of slot 1: the renewal must be refused, as lost.
func TestRenewRacingResize(t *testing.T) {
	eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
		ctx := bound(t)
		f := faults.Wrap(s, clk)
		g, admin := newGroup(t, f, 2), newGroup(t, s, 2)
		holdSlot(t, s, "grp", 0)
		l, err := g.TryAcquire(ctx, "grp", holder(t, "a"), time.Minute)
		if err != nil || l.Slot != 1 {
			t.Fatalf("acquire = %+v, %v; want slot 1", l, err)
		}

		gate := f.Pause(faults.OpKeepAlive, faults.BeforeCall, 1)
		done := make(chan error, 1)
		go func() {
			_, err := g.Renew(ctx, l)
			done <- err
		}()
		call, err := gate.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.Resize(ctx, "grp", 1); err != nil {
			t.Fatal(err)
		}
		call.Release()
		if err := <-done; !errors.Is(err, backends.ErrNotHolder) || backends.Classify(err) != backends.ClassLost {
			t.Errorf("renew of slot 1 racing Resize(1) = %v, want ErrNotHolder of class lost", err)
		}
	})
}

// TestRefusedSlotReleasedByNextAcquire checks that a renewal refused after a
// resize leaves the slot in place (its holder may still be acting on it), and
// the holder's next TryAcquire releases it at once instead of leaving it to
// expire.
func TestRefusedSlotReleasedByNextAcquire(t *testing.T) {
	eachStore(t, func(t *testing.T, clk *clocktest.Clock, s backends.Store) {
		ctx := bound(t)
		g := newGroup(t, s, 2)
		holdSlot(t, s, "grp", 0)
		h := holder(t, "a")
		l, err := g.TryAcquire(ctx, "grp", h, time.Minute)
		if err != nil || l.Slot != 1 {
			t.Fatalf("acquire = %+v, %v; want slot 1", l, err)
		}
		if err := g.Resize(ctx, "grp", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Renew(ctx, l); !errors.Is(err, backends.ErrNotHolder) {
			t.Fatalf("renew after Resize(1) = %v, want ErrNotHolder", err)
		}
		if got := slotEntries(t, s, "grp"); len(got) != 2 {
			t.Fatalf("slots right after the refused renewal = %v, want [0 1]: the holder has not stepped down yet", got)
		}
		if _, err := g.TryAcquire(ctx, "grp", h, time.Minute); !errors.Is(err, backends.ErrHeld) {
			t.Fatalf("acquire with slot 0 held = %v, want ErrHeld", err)
		}
		if got := slotEntries(t, s, "grp"); len(got) != 1 || got[0] != 0 {
			t.Errorf("slots after the holder's next acquisition = %v, want [0]: its retired slot released", got)
		}
	})
}
