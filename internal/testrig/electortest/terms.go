package electortest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
)

// Term is one leadership as a Terms saw it, on the Terms' clock.
type Term struct {
	Who        string // the name the elector was installed with
	Slot       int
	Token      int64
	Start, End time.Time // End is zero while the term runs
	Deadline   time.Time // the leadership context's deadline
}

// Terms records the terms of several Electors, each under a name, for
// tests that run them over a real store: when each term began and ended
// on one clock, its slot and token, and how many attempts of each elector
// were refused. Check tests the recorded history for overlapping terms and
// tokens that do not increase.
//
// Terms is a Source that changes whenever a term begins or ends or an
// attempt is refused.
type Terms struct {
	clk clock.Clock
	sig Signal
	won chan string // who was elected, in order

	mu    sync.Mutex
	ended []Term          // guarded by mu
	open  map[string]Term // guarded by mu; running terms by elector
	lost  map[string]int  // guarded by mu; refused attempts by elector
}

// NewTerms returns a Terms that dates terms with clk.
func NewTerms(clk clock.Clock) *Terms {
	return &Terms{clk: clk, won: make(chan string, 64), open: map[string]Term{}, lost: map[string]int{}}
}

// Install makes cfg's OnElected record the terms of the elector named who
// (holding each term until its context ends), and its
// Trace.ElectionLost count who's refused attempts.
func (ts *Terms) Install(cfg *elector.Config, who string) {
	cfg.OnElected = ts.onElected(who)
	cfg.Trace.ElectionLost = func(backends.Class, time.Duration) {
		ts.mu.Lock()
		ts.lost[who]++
		ts.mu.Unlock()
		ts.sig.Notify()
	}
}

func (ts *Terms) onElected(who string) func(context.Context, elector.Term) {
	return func(ctx context.Context, t elector.Term) {
		ts.mu.Lock()
		ts.open[who] = Term{Who: who, Slot: t.Slot, Token: t.Token, Start: ts.clk.Now()}
		ts.mu.Unlock()
		ts.sig.Notify()
		ts.won <- who
		<-ctx.Done()
		now := ts.clk.Now()
		deadline, _ := ctx.Deadline()
		ts.mu.Lock()
		tm := ts.open[who]
		delete(ts.open, who)
		tm.End, tm.Deadline = now, deadline
		ts.ended = append(ts.ended, tm)
		ts.mu.Unlock()
		ts.sig.Notify()
	}
}

// Changed returns a channel closed at the next change.
func (ts *Terms) Changed() <-chan struct{} { return ts.sig.Changed() }

// Next waits for the next election and returns who was elected; it fails
// t if ctx ends first.
func (ts *Terms) Next(t testing.TB, ctx context.Context) string {
	t.Helper()
	select {
	case who := <-ts.won:
		return who
	case <-ctx.Done():
		t.Fatalf("waiting for an election: %v", ctx.Err())
		return ""
	}
}

// Leading returns who leads now, in order of name.
func (ts *Terms) Leading() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []string
	for who := range ts.open {
		out = append(out, who)
	}
	slices.Sort(out)
	return out
}

// Lost returns how many of who's attempts have been refused.
func (ts *Terms) Lost(who string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.lost[who]
}

// Check fails t if two terms of one slot overlap (a running term counts
// as ending now), or if the tokens of a slot do not strictly increase in
// the order its terms began. It returns every term in that order, running
// ones with a zero End.
func (ts *Terms) Check(t testing.TB) []Term {
	t.Helper()
	ts.mu.Lock()
	all := slices.Clone(ts.ended)
	for _, tm := range ts.open {
		all = append(all, tm)
	}
	now := ts.clk.Now()
	ts.mu.Unlock()
	slices.SortFunc(all, func(a, b Term) int { return a.Start.Compare(b.Start) })
	last := map[int]Term{}
	for _, cur := range all {
		prev, ok := last[cur.Slot]
		last[cur.Slot] = cur
		if !ok {
			continue
		}
		end := prev.End
		if end.IsZero() {
			end = now
		}
		if cur.Start.Before(end) {
			t.Errorf("slot %d: %s's term (token %d) began %v before %s's (token %d) ended: two leaders", cur.Slot, cur.Who, cur.Token, end.Sub(cur.Start), prev.Who, prev.Token)
		}
		if cur.Token <= prev.Token {
			t.Errorf("slot %d: %s's token %d after %s's %d: not increasing", cur.Slot, cur.Who, cur.Token, prev.Who, prev.Token)
		}
	}
	return all
}

// EndSlack is how long after its leadership context's deadline EndsByDeadline
// lets a term's recorded end come. The end is recorded by the goroutine that
// waits on the context's Done channel, so it carries that goroutine's
// scheduling delay (close to 100 ms was seen on a machine at load 10), on
// top of whatever the elector did. A term whose work ran on past its
// deadline until a renewal failed, or until the claim was lost, overshoots
// by a renewal timeout or more, which this slack does not hide.
const EndSlack = 250 * time.Millisecond

// EndsByDeadline fails t unless every ended term of all ended no later than
// EndSlack after its leadership context's deadline.
func EndsByDeadline(t testing.TB, all []Term) {
	t.Helper()
	for _, tm := range all {
		if tm.End.IsZero() || tm.Deadline.IsZero() {
			continue
		}
		if late := tm.End.Sub(tm.Deadline); late > EndSlack {
			t.Errorf("%s's term (token %d) ended %v after its local deadline", tm.Who, tm.Token, late)
		}
	}
}
