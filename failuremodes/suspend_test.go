package failuremodes_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

// TestFM31HostSuspend checks FM-31, a host suspended for longer than the
// lease. A suspend stops CLOCK_MONOTONIC, the clock of every holder's
// deadline; what matters is whether the store's judge of expiry stops with
// it. Each case runs an elector over a filestore whose judge clock and the
// electors' clock either stand still through the suspend (CLOCK_MONOTONIC) or
// run on through it (CLOCK_BOOTTIME, or holders that count a suspend too). a
// leads when the host is suspended; b starts right after it resumes.
//
// Trigger: the host of a leader and of its store is suspended to memory or
// disk for longer than the TTL, then resumes. Go's monotonic clock,
// CLOCK_MONOTONIC, stands still while the host is suspended, so every
// holder's deadline is where it was.
//
// A naive elector: a store that judges expiry on a clock that counts the
// suspend (CLOCK_BOOTTIME) finds the claim expired on resume and lets a new
// candidate in while the old leader, whose deadline has not passed on its own
// clock, still reports IsLeader: two leaders until the old one's next
// renewal.
//
// Tenure: filestore judges expiry on CLOCK_MONOTONIC (with the boot id, as
// the clock restarts at boot), the clock of every holder's deadline on the
// host: a suspend stops the judge and the holders alike, and after it the
// leader renews on while the candidate is refused. A judge and holders that
// both count the suspend are safe too: the deadline passes with the expiry.
// Processes in time namespaces with different monotonic offsets do not share
// a clock; the filestore doc excludes them.
//
// On the real clocks, TestSuspendedHostKeepsTheHolder in backends/filestore
// checks the same with a child process in a time namespace whose
// CLOCK_BOOTTIME reads as after a suspend.
func TestFM31HostSuspend(t *testing.T) {
	const suspend = 2 * ttl
	tests := []struct {
		name        string
		judgeRuns   bool     // the store's judge counts the suspend
		holdersRun  bool     // the electors' clock counts the suspend
		wantLeaders []string // right after b's first campaign
	}{
		// The failure mode: the judge's clock ran on while a's stood
		// still. b is let in while a's deadline, on its own clock, has
		// not passed: both lead until a's next renewal.
		{"boottime judge: the store's clock runs on, the holders' stand still", true, false, []string{"a", "b"}},
		// filestore's judge: the holders' clock, stopped with them.
		{"tenure: judge and holders stand still together", false, false, []string{"a"}},
		// A judge and holders that both count the suspend: a's deadline
		// passed with its claim's expiry.
		{"tenure: judge and holders run on together", true, true, []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// host counts the suspend; the world's clock, standing for
			// CLOCK_MONOTONIC, does not.
			var host *wallClock
			pick := func(clk *clocktest.Clock, runs bool) clock.Clock {
				if runs {
					return host
				}
				return clk
			}
			w := newWorldOn(t, func(clk *clocktest.Clock) backends.Store {
				host = newWallClock(clk, 0)
				s, err := filestore.Open(context.Background(), t.TempDir(), filestore.WithClock("fm-boot", pick(clk, tt.judgeRuns)))
				if err != nil {
					t.Fatal(err)
				}
				return s
			})
			holders := withConfig(func(c *elector.Config) { c.Clock = pick(w.clk, tt.holdersRun) })
			a := w.newNode("a", holders).start()
			a.await(electortest.Elected, 1)
			w.step(leaderTimers, time.Second)

			host.stepBy(suspend) // the host sleeps, and resumes

			b := w.newNode("b", holders).start()
			ev, err := b.rec.WaitAny(w.ctx, []electortest.Kind{electortest.Elected, electortest.Lost}, 1)
			if err != nil {
				t.Fatalf("b's first campaign: %v", err)
			}
			if got := leaders(a, b); !slices.Equal(got, tt.wantLeaders) {
				t.Fatalf("after a %v suspend, b %s: leaders = %v, want %v", suspend, ev.Kind, got, tt.wantLeaders)
			}
			if len(tt.wantLeaders) > 1 {
				// The overlap lasts until a's renewal finds its claim
				// taken.
				w.step(2*leaderTimers, renewPeriod-time.Second)
				if ev := a.await(electortest.Demoted, 1); ev.Cause.Reason != elector.ReasonLost {
					t.Errorf("a's term ended with %v, want lost", ev.Cause)
				}
				t.Logf("both led from the resume to a's renewal %v later", renewPeriod-time.Second)
				return
			}
			want := tt.wantLeaders[0]
			if want == "a" {
				// a renews on, in its first term, and b waits, as if
				// nothing had happened.
				for range 3 * ttl / time.Second {
					w.step(leaderTimers+followerTimers, time.Second)
					onlyLeader(t, w, "a", a, b)
				}
				if n := a.rec.Count(electortest.Elected); n != 1 {
					t.Errorf("a was elected %d times, want once", n)
				}
				return
			}
			// a stopped leading the moment its clock passed its deadline;
			// its renewal then finds the claim taken.
			w.step(2*leaderTimers, renewPeriod-time.Second)
			if ev := a.await(electortest.Demoted, 1); ev.Cause.Reason != elector.ReasonLost && ev.Cause.Reason != elector.ReasonExpired {
				t.Errorf("a's term ended with %v, want lost or expired", ev.Cause)
			}
			onlyLeader(t, w, "b", a, b)
		})
	}
	t.Run("filestore judges on CLOCK_MONOTONIC", func(t *testing.T) {
		// The clock of Go's monotonic readings, which the electors'
		// default clock reads: the second case above is the host's.
		// backends/filestore's TestSuspendedHostKeepsTheHolder runs it on
		// the real clocks, with a child process whose CLOCK_BOOTTIME reads
		// as after a suspend.
		s, err := filestore.Open(context.Background(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if got, want := s.Capabilities().ExpiryJudge, "host boot id + CLOCK_MONOTONIC"; got != want {
			t.Errorf("filestore's ExpiryJudge = %q, want %q", got, want)
		}
	})
}
