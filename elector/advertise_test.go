package elector_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

// TestAdvertiseRefusedAtNew checks that New refuses a value Advertise
// cannot carry, naming the field, with an error wrapping ErrInvalid.
func TestAdvertiseRefusedAtNew(t *testing.T) {
	clk := clocktest.New(t0)
	for _, v := range []string{strings.Repeat("a", backends.MaxAdvertisedBytes+1), "10.0.0.1:80\n", "\xff"} {
		cfg := baseConfig(clk, "a")
		cfg.Advertise = v
		_, err := elector.New(newFakeLocker(clk), cfg)
		if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "advertise") {
			t.Errorf("New with Advertise %q = %v, want an error naming advertise and wrapping ErrInvalid", v, err)
		}
	}
	cfg := baseConfig(clk, "a")
	cfg.Advertise = strings.Repeat("a", backends.MaxAdvertisedBytes)
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate with Advertise of %d bytes = %v, want nil", backends.MaxAdvertisedBytes, err)
	}
}

// TestAdvertisedValueReachesFollowers checks that the value a leader
// advertises is in its Term and Holder, and reaches a follower over the
// store: in Leader and in OnNewLeader.
func TestAdvertisedValueReachesFollowers(t *testing.T) {
	for _, kind := range lockerKinds {
		t.Run(kind, func(t *testing.T) {
			clk := clocktest.New(t0)
			ctx := barrier(t)
			l := newLocker(t, clk, kind)
			ra := electortest.NewRecorder(t, nil)
			cfgA := baseConfig(clk, "a")
			cfgA.Advertise = "10.1.2.3:9000"
			ra.InstallCallbacks(&cfgA)
			a := startElector(t, l, cfgA)
			ra.WaitElected(t, ctx, 1)
			if got := a.Holder().Advertised; got != cfgA.Advertise {
				t.Errorf("Holder().Advertised = %q, want %q", got, cfgA.Advertise)
			}
			if term, ok := a.Term(); !ok || term.Holder.Advertised != cfgA.Advertise {
				t.Errorf("Term() = %+v, %v; want the holder advertising %q", term, ok, cfgA.Advertise)
			}

			rb := electortest.NewRecorder(t, nil)
			cfgB := baseConfig(clk, "b")
			rb.InstallCallbacks(&cfgB)
			b := startElector(t, l, cfgB)
			eventually(t, ctx, "b sees a lead", func() bool {
				ld, ok := b.Leader()
				return ok && ld.Holder == a.Holder() && rb.Count(electortest.NewLeader) > 0
			}, rb)
			if ld, _ := b.Leader(); ld.Holder.Advertised != cfgA.Advertise {
				t.Errorf("follower's Leader() = %+v, want the leader advertising %q", ld, cfgA.Advertise)
			}
			if got := rb.Nth(electortest.NewLeader, 1).Other; got != a.Holder() {
				t.Errorf("follower's OnNewLeader holder = %+v, want %+v", got, a.Holder())
			}
		})
	}
}
