package metrics_test

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/lifecycle"
	"github.com/tenure-go/tenure/metrics"
)

// TestJoin checks that every hook set in any Trace is called, in the order of
// the Traces; hooks none sets stay nil.
func TestJoin(t *testing.T) {
	var got []string
	a := elector.Trace{
		StateChanged: func(from, to lifecycle.State) { got = append(got, "a:"+from.String()+">"+to.String()) },
		Panicked:     func(where string) { got = append(got, "a:panic "+where) },
	}
	b := elector.Trace{
		StateChanged: func(from, to lifecycle.State) { got = append(got, "b:"+from.String()+">"+to.String()) },
		RenewFailed:  func(_ elector.Term, c backends.Class, _, _ time.Duration) { got = append(got, "b:renew "+c.String()) },
	}
	j := metrics.Join(a, elector.Trace{}, b)
	j.StateChanged(lifecycle.Follower, lifecycle.Acquiring)
	j.Panicked("loop")
	j.RenewFailed(elector.Term{}, backends.ClassTransient, 0, 0)
	want := []string{"a:follower>acquiring", "b:follower>acquiring", "a:panic loop", "b:renew transient"}
	if len(got) != len(want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("call %d = %q, want %q", i, got[i], want[i])
		}
	}
	if j.ElectionWon != nil || j.Renewed != nil || j.Demoted != nil || j.DuplicateIdentity != nil || j.ElectionLost != nil {
		t.Error("Join set hooks none of its Traces set")
	}
	if z := metrics.Join(); z.StateChanged != nil {
		t.Error("Join() set StateChanged")
	}
}
