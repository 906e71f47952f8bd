package slots_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
	"github.com/tenure-go/tenure/slots"
)

// TestElectorsOverGroup runs four electors over a group of three slots: three
// lead, each in its own slot with its own token, and when one stops the
// fourth takes its slot.
func TestElectorsOverGroup(t *testing.T) {
	clk := clocktest.New(time.Time{})
	store := memstore.New(memstore.WithClock(clk))
	defer store.Close()
	g := newGroup(t, store, 3)

	var (
		els  []*elector.Elector
		recs []*electortest.Recorder
		srcs []electortest.Source
	)
	for i := range 4 {
		rec := electortest.NewRecorder(t, clk)
		rec.SetWork(func(context.Context, elector.Term) {}) // returns at once
		cfg := elector.Config{Key: "grp", Identity: fmt.Sprint("e", i), TTL: 10 * time.Second, Clock: clk, DisableJitter: true}
		rec.InstallCallbacks(&cfg)
		e, err := elector.New(g, cfg)
		if err != nil {
			t.Fatal(err)
		}
		els, recs, srcs = append(els, e), append(recs, rec), append(srcs, rec)
	}
	// elected counts the terms the electors were elected to.
	elected := func() int {
		n := 0
		for _, r := range recs {
			e, _ := r.Counts()
			n += e
		}
		return n
	}
	ctx := bound(t)
	for _, e := range els {
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, e := range els {
			_ = e.Stop(context.Background())
		}
	}()

	if err := electortest.Until(ctx, "three electors elected", func() bool { return elected() >= 3 }, srcs...); err != nil {
		t.Fatal(err)
	}
	used := map[int]bool{}
	for i, r := range recs {
		if n, _ := r.Counts(); n == 0 {
			continue
		}
		term := r.Nth(electortest.Elected, 1).Term
		if used[term.Slot] || term.Slot < 0 || term.Slot > 2 || term.Token <= 0 {
			t.Fatalf("e%d elected with slot %d token %d; slots in use %v", i, term.Slot, term.Token, used)
		}
		used[term.Slot] = true
	}
	leaders := 0
	var follower, leaving *elector.Elector
	for i, e := range els {
		if e.IsLeader() {
			leaders++
			if leaving == nil {
				leaving = e
			}
		} else if n, _ := recs[i].Counts(); n == 0 {
			follower = e
		}
	}
	if leaders != 3 || follower == nil {
		t.Fatalf("%d leaders, want 3 and one follower", leaders)
	}

	freed, _ := leaving.Term()
	if err := leaving.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := electortest.Until(ctx, "the follower elected", func() bool { return elected() >= 4 }, srcs...); err != nil {
		t.Fatal("the follower did not take the freed slot: ", err)
	}
	for i, e := range els {
		if e != follower {
			continue
		}
		if term := recs[i].Nth(electortest.Elected, 1).Term; term.Slot != freed.Slot {
			t.Errorf("e%d took slot %d, want the freed slot %d", i, term.Slot, freed.Slot)
		}
	}
	if !follower.IsLeader() {
		t.Error("the follower was elected but does not report IsLeader")
	}
}

// TestElectorReleasesSlotRetiredByResize checks that an elector whose slot a
// Resize retires is refused at its next renewal and steps down; the slot
// stays in the store while its OnElected still runs, and is released as soon
// as OnElected has returned, without waiting for it to expire.
func TestElectorReleasesSlotRetiredByResize(t *testing.T) {
	clk := clocktest.New(time.Time{})
	inner := memstore.New(memstore.WithClock(clk))
	defer inner.Close()
	f := faults.Wrap(inner, clk)
	g, admin := newGroup(t, f, 2), newGroup(t, inner, 2)
	holdSlot(t, inner, "grp", 0)

	const ttl = 10 * time.Second
	rec := electortest.NewRecorder(t, clk)
	stepping := make(chan struct{})
	finish := make(chan struct{})
	rec.SetWork(func(ctx context.Context, term elector.Term) {
		<-ctx.Done()
		close(stepping)
		<-finish
	})
	cfg := elector.Config{Key: "grp", Identity: "e", TTL: ttl, Clock: clk, DisableJitter: true}
	rec.InstallCallbacks(&cfg)
	e, err := elector.New(g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := bound(t)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = e.Stop(context.Background()) }()

	term := rec.WaitElected(t, ctx, 1)
	if term.Slot != 1 {
		t.Fatalf("elected in slot %d, want 1", term.Slot)
	}
	if err := admin.Resize(ctx, "grp", 1); err != nil {
		t.Fatal(err)
	}
	if err := clk.BlockUntil(ctx, 2); err != nil { // the deadline timer and the renew timer
		t.Fatal(err)
	}
	clk.Add(ttl / 3) // the default RenewPeriod: the renewal is refused
	select {
	case <-stepping:
	case <-ctx.Done():
		t.Fatal("the elector did not step down after its slot was retired")
	}
	if got := slotEntries(t, inner, "grp"); len(got) != 2 {
		t.Fatalf("slots while OnElected still runs = %v, want [0 1]", got)
	}

	gate := f.Pause(faults.OpCompareAndDelete, faults.AfterCall, 1)
	close(finish)
	call, err := gate.Next(ctx)
	if err != nil {
		t.Fatalf("the retired slot was not released after OnElected returned: %v", err)
	}
	if got := slotEntries(t, inner, "grp"); call.Key != slots.SlotKey("grp", 1) || len(got) != 1 {
		t.Errorf("released %q, slots left %v; want slot 1 released, [0] left", call.Key, got)
	}
	call.Release()
}
