package elector_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

// TestTransferRefusals checks the transfers that end no term: by a
// follower (ErrNotLeader), over a Locker that cannot transfer
// (ErrUnsupported), to a target no identity can have (ErrInvalid); the
// leader leads on after each.
func TestTransferRefusals(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	store := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { store.Close() })
	sl, err := backends.NewLocker(store)
	if err != nil {
		t.Fatal(err)
	}
	cfgA, recA, _, _ := loggedConfig(t, clk, "a")
	a := startElector(t, sl, cfgA)
	recA.Await(t, ctx, electortest.Elected, 1)
	cfgB, _, oB, _ := loggedConfig(t, clk, "b")
	b := startElector(t, sl, cfgB)
	oB.Await(t, ctx, electortest.Lost, 1)

	if err := b.Transfer(ctx, "a"); !errors.Is(err, elector.ErrNotLeader) {
		t.Errorf("a follower's Transfer = %v, want ErrNotLeader", err)
	}
	if err := a.Transfer(ctx, strings.Repeat("x", backends.MaxKeyBytes+1)); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("Transfer to an overlong identity = %v, want ErrInvalid", err)
	}
	if !a.IsLeader() {
		t.Fatalf("a no longer leads after refused transfers")
	}

	// electortest.Wrap forwards only the Locker methods: no Transferer.
	cfgC, recC, _, _ := loggedConfig(t, clk, "c")
	cfgC.Key = "other"
	c := startElector(t, electortest.Wrap(sl), cfgC)
	recC.Await(t, ctx, electortest.Elected, 1)
	if err := c.Transfer(ctx, "a"); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("Transfer over a Locker that cannot transfer = %v, want ErrUnsupported", err)
	}
	if !c.IsLeader() {
		t.Errorf("c no longer leads after a transfer its Locker refused")
	}
}

// TestTransferBoundValidated checks that Validate refuses a negative
// TransferBound and one above backends.MaxTTL, and defaults it to TTL.
func TestTransferBoundValidated(t *testing.T) {
	for _, tt := range []struct {
		bound   string
		cfg     func(c *elector.Config)
		wantErr string
	}{
		{"negative", func(c *elector.Config) { c.TransferBound = -1 }, "transfer bound -1ns is negative"},
		{"above MaxTTL", func(c *elector.Config) { c.TransferBound = backends.MaxTTL + 1 }, "transfer bound"},
	} {
		cfg := baseConfig(clocktest.New(t0), "a")
		tt.cfg(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Validate with a %s transfer bound = %v, want an error containing %q", tt.bound, err, tt.wantErr)
		}
	}
	if err := baseConfig(clocktest.New(t0), "a").Validate(); err != nil {
		t.Errorf("Validate with the default transfer bound = %v", err)
	}
}

// TestRefusedCandidateFollowsTheTarget checks that a candidate refused by
// a transfer's reservation follows the claim once the target takes it:
// when the target then stops, the candidate takes the claim at once, the
// clock standing still (it used to wait out the reservation's remaining
// time, whatever its watch signalled).
func TestRefusedCandidateFollowsTheTarget(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	store := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { store.Close() })
	locker := func() *backends.StoreLocker {
		sl, err := backends.NewLocker(store)
		if err != nil {
			t.Fatal(err)
		}
		return sl
	}
	cfgA, recA, _, _ := loggedConfig(t, clk, "a")
	a := startElector(t, locker(), cfgA)
	recA.Await(t, ctx, electortest.Elected, 1)
	cfgC, recC, oC, _ := loggedConfig(t, clk, "c")
	startElector(t, locker(), cfgC)
	oC.Await(t, ctx, electortest.Lost, 1) // held by a

	// The target is not running yet: c's next attempt meets the
	// reservation.
	if err := a.Transfer(ctx, "b"); err != nil {
		t.Fatalf("Transfer to b: %v", err)
	}
	oC.Await(t, ctx, electortest.Lost, 2)
	cfgB, recB, _, _ := loggedConfig(t, clk, "b")
	b := startElector(t, locker(), cfgB)
	recB.Await(t, ctx, electortest.Elected, 1)
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	recC.Await(t, ctx, electortest.Elected, 1)
}
