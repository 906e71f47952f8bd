package batch

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestQueue(t *testing.T) {
	var q Queue[string]
	for _, c := range []struct {
		r    string
		due  time.Duration
		wake bool
	}{
		{"a", 5, true},  // the only call
		{"b", 7, false}, // not more urgent
		{"c", 3, true},  // more urgent
		{"d", 3, false}, // as urgent, no sooner
	} {
		wake, ok := q.Add(c.r, t0.Add(c.due))
		if !ok || wake != c.wake {
			t.Errorf("Add(%s, +%d) = wake %v, ok %v; want wake %v, ok", c.r, c.due, wake, ok, c.wake)
		}
	}
	if q.Len() != 4 || q.First() != "a" || !q.Due().Equal(t0.Add(3)) {
		t.Errorf("Len %d, First %q, Due %v; want 4, a, +3ns", q.Len(), q.First(), q.Due())
	}
	if got := q.Take(); len(got) != 4 || got[0] != "a" || got[3] != "d" || q.Len() != 0 {
		t.Errorf("Take = %v, then Len %d; want [a b c d], then 0", got, q.Len())
	}
	if wake, ok := q.Add("e", t0.Add(9)); !wake || !ok {
		t.Errorf("Add to an emptied queue = wake %v, ok %v; want both", wake, ok)
	}
	if got := q.Stop(); len(got) != 1 || got[0] != "e" {
		t.Errorf("Stop = %v, want [e]", got)
	}
	if wake, ok := q.Add("f", t0); wake || ok || q.Len() != 0 {
		t.Errorf("Add after Stop = wake %v, ok %v, Len %d; want refused", wake, ok, q.Len())
	}
}

func TestCallDue(t *testing.T) {
	every, ttl := 500*time.Millisecond, 10*time.Second
	bg := context.Background()
	if got := CallDue(bg, t0, every, ttl); !got.Equal(t0.Add(every)) {
		t.Errorf("no deadline: due %v after start, want %v", got.Sub(t0), every)
	}
	if got := CallDue(bg, t0, every, time.Second); !got.Equal(t0.Add(250 * time.Millisecond)) {
		t.Errorf("1s TTL: due %v after start, want a quarter of it", got.Sub(t0))
	}
	ctx, cancel := context.WithDeadline(bg, t0.Add(400*time.Millisecond))
	defer cancel()
	if got := CallDue(ctx, t0, every, ttl); !got.Equal(t0.Add(200 * time.Millisecond)) {
		t.Errorf("400ms given: due %v after start, want half of it", got.Sub(t0))
	}
	if got := CallDue(ctx, t0.Add(time.Second), every, ttl); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("deadline already past: due %v after start, want at once", got.Sub(t0.Add(time.Second)))
	}
}

// TestCancelWhenAllDone checks that the batch ends once both callers have
// given up. (That it does not end before is not observable without timing:
// the callbacks run on their own goroutines.) With no callers, nothing is set
// up and nothing ends it.
func TestCancelWhenAllDone(t *testing.T) {
	a, cancelA := context.WithCancel(context.Background())
	b, cancelB := context.WithCancel(context.Background())
	batch, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := CancelWhenAllDone(cancel, []context.Context{a, b}, ctxOf)
	defer stop()
	cancelA()
	cancelB()
	<-batch.Done() // the test times out if the batch never ends

	var called bool
	CancelWhenAllDone(func() { called = true }, []context.Context(nil), ctxOf)()
	if called {
		t.Error("a batch with no callers was cancelled")
	}
}

func ctxOf(c context.Context) context.Context { return c }
