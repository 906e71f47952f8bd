package elector

import (
	"fmt"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/slots"
)

// TestRenewAtBounds checks that renewAt keeps every renewal at most
// RenewPeriod after the send, and no earlier than both half of RenewPeriod
// and the jitter allow; on the grid when it moves one, and exactly at sent +
// RenewPeriod without jitter.
func TestRenewAtBounds(t *testing.T) {
	const period = 3 * time.Second
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, jitter := range []float64{0, 0.01, 0.15, 0.5, 0.9, 0.99} {
		t.Run(fmt.Sprint(jitter), func(t *testing.T) {
			e := &Elector{cfg: Config{RenewPeriod: period, Jitter: jitter}}
			if g := e.gridStep(); g > 0 {
				e.phase = 12345 % g
			}
			for i := range 2000 {
				sent := base.Add(time.Duration(i) * 7919 * time.Microsecond)
				at := e.renewAt(sent)
				if jitter == 0 {
					if !at.Equal(sent.Add(period)) {
						t.Fatalf("no jitter: renewal at %v after the send, want exactly %v", at.Sub(sent), period)
					}
					continue
				}
				lower := min(period/2, period-time.Duration(jitter*float64(period)))
				if jitter <= 0.5 {
					lower = max(period/2, period-time.Duration(1.5*jitter*float64(period)))
				}
				if d := at.Sub(sent); d > period || d < lower {
					t.Fatalf("sent %v: renewal %v after the send, want within [%v, %v]", sent, d, lower, period)
				}
				// Off the grid only when the grid had no instant in
				// [sent+period/2, sent+period] near the jittered time.
				if off := (at.UnixNano() - e.phase) % e.gridStep(); off != 0 && jitter <= 0.5 {
					t.Fatalf("sent %v: renewal %v after the send is %v off the grid", sent, at.Sub(sent), time.Duration(off))
				}
			}
		})
	}
}

// TestRenewAtOnTheGridDefaultJitter checks that with the default Jitter, a
// term whose renewals are on the grid renews every 0.9 × RenewPeriod: the
// only grid instant within its jittered window, which the Config.RenewPeriod
// doc promises.
func TestRenewAtOnTheGridDefaultJitter(t *testing.T) {
	const period = 3 * time.Second
	e := &Elector{cfg: Config{RenewPeriod: period, Jitter: defaultJitter}}
	g := e.gridStep()
	e.phase = 987654321 % g
	base := time.Unix(0, e.phase).Add(time.Hour) // an instant of the grid
	sent := base
	for i := range 1000 {
		next := e.renewAt(sent)
		if d := next.Sub(sent); d != period*9/10 {
			t.Fatalf("renewal %d on the grid: %v after the send, want %v", i, d, period*9/10)
		}
		sent = next
	}
}

// TestGridPhaseFollowsTheStore checks that the grid's phase follows the Store
// behind the Locker: StoreLockers and a slot group over one Store share it;
// another Store has its own.
func TestGridPhaseFollowsTheStore(t *testing.T) {
	s1, s2 := memstore.New(), memstore.New()
	defer s1.Close()
	defer s2.Close()
	l1, err := backends.NewLocker(s1)
	if err != nil {
		t.Fatal(err)
	}
	l1b, err := backends.NewLocker(s1)
	if err != nil {
		t.Fatal(err)
	}
	g1, err := slots.New(s1, slots.Config{Size: 2})
	if err != nil {
		t.Fatal(err)
	}
	l2, err := backends.NewLocker(s2)
	if err != nil {
		t.Fatal(err)
	}
	want := gridPhase(l1)
	for name, l := range map[string]backends.Locker{
		"another StoreLocker": l1b, "a slot group": g1,
	} {
		if got := gridPhase(l); got != want {
			t.Errorf("phase over the same store through %s = %d, want %d", name, got, want)
		}
	}
	if gridPhase(l2) == want {
		t.Errorf("phase over another store = %d, the same as the first's", want)
	}
}
