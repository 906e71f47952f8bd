package fsm_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/internal/fsm"
	"github.com/tenure-go/tenure/lifecycle"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// machineIn drives a new machine to state s along the table's transitions.
func machineIn(t *testing.T, s lifecycle.State) *fsm.Machine {
	t.Helper()
	paths := map[lifecycle.State][]fsm.Event{
		lifecycle.Follower:  nil,
		lifecycle.Acquiring: {fsm.Campaign},
		lifecycle.Leader:    {fsm.Campaign, fsm.Acquired},
		lifecycle.Demoting:  {fsm.Campaign, fsm.Acquired, fsm.Demote},
		lifecycle.Stopped:   {fsm.Stop},
	}
	path, ok := paths[s]
	if !ok {
		t.Fatalf("no path to state %v", s)
	}
	m := fsm.New()
	for _, e := range path {
		if _, _, err := m.Fire(e); err != nil {
			t.Fatalf("reaching %v: Fire(%v): %v", s, e, err)
		}
	}
	if got := m.State(); got != s {
		t.Fatalf("reaching %v: State() = %v", s, got)
	}
	return m
}

// TestTable walks every (state, event) pair: each transition the table lists
// works and lands where the table says; every other pair is refused with
// ErrInvalidTransition and leaves the state unchanged.
func TestTable(t *testing.T) {
	for _, from := range lifecycle.States() {
		for _, ev := range fsm.Events() {
			t.Run(fmt.Sprintf("%v/%v", from, ev), func(t *testing.T) {
				m := machineIn(t, from)
				want, allowed := fsm.Next(from, ev)
				gotFrom, gotTo, err := m.Fire(ev)
				if gotFrom != from {
					t.Errorf("Fire(%v) in %v: from = %v, want %v", ev, from, gotFrom, from)
				}
				if allowed {
					if err != nil || gotTo != want || m.State() != want {
						t.Errorf("Fire(%v) in %v = (to %v, err %v), State() = %v; want to %v, nil", ev, from, gotTo, err, m.State(), want)
					}
					return
				}
				if !errors.Is(err, fsm.ErrInvalidTransition) {
					t.Errorf("Fire(%v) in %v: err = %v, want ErrInvalidTransition", ev, from, err)
				}
				if gotTo != from || m.State() != from {
					t.Errorf("refused Fire(%v) in %v moved the machine: to = %v, State() = %v", ev, from, gotTo, m.State())
				}
			})
		}
	}
}

func TestTableInvariants(t *testing.T) {
	for _, tr := range fsm.Table() {
		for _, from := range tr.From {
			if from == lifecycle.Leader && tr.To != lifecycle.Demoting {
				t.Errorf("%v leaves leader for %v; leader may only be left through demoting", tr.Event, tr.To)
			}
			if from == lifecycle.Stopped {
				t.Errorf("%v leaves stopped; stopped is terminal", tr.Event)
			}
			if from == tr.To {
				t.Errorf("%v is a self-loop on %v", tr.Event, from)
			}
		}
	}
	// Every state is reachable from follower.
	seen := map[lifecycle.State]bool{lifecycle.Follower: true}
	for changed := true; changed; {
		changed = false
		for _, tr := range fsm.Table() {
			for _, from := range tr.From {
				if seen[from] && !seen[tr.To] {
					seen[tr.To], changed = true, true
				}
			}
		}
	}
	for _, s := range lifecycle.States() {
		if !seen[s] {
			t.Errorf("state %v is unreachable from follower", s)
		}
	}
}

func TestUnknownEventAndState(t *testing.T) {
	m := fsm.New()
	from, to, err := m.Fire(fsm.Event(99))
	if !errors.Is(err, fsm.ErrInvalidTransition) || from != lifecycle.Follower || to != lifecycle.Follower {
		t.Errorf("Fire(99) = (%v, %v, %v), want (follower, follower, ErrInvalidTransition)", from, to, err)
	}
	if got, want := fsm.Event(99).String(), "event(99)"; got != want {
		t.Errorf("Event(99).String() = %q, want %q", got, want)
	}
	if got, want := lifecycle.State(0).String(), "state(0)"; got != want {
		t.Errorf("State(0).String() = %q, want %q", got, want)
	}
}

func TestTableIsACopy(t *testing.T) {
	tab := fsm.Table()
	tab[0].From[0] = lifecycle.Stopped
	tab[0].To = lifecycle.Stopped
	if got := fsm.Table()[0]; got.From[0] != lifecycle.Follower || got.To != lifecycle.Acquiring {
		t.Errorf("Table() after mutating a copy: first row = %+v, want campaign follower->acquiring", got)
	}
}

// TestDocMatchesTable keeps the table in the package documentation in step
// with Table.
func TestDocMatchesTable(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "lifecycle", "doc.go"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "//\t%-9s %-29s %s\n", "event", "from", "to")
	for _, tr := range fsm.Table() {
		from := make([]string, len(tr.From))
		for i, s := range tr.From {
			from[i] = s.String()
		}
		fmt.Fprintf(&b, "//\t%-9s %-29s %s\n", tr.Event, strings.Join(from, ", "), tr.To)
	}
	if want := b.String(); !strings.Contains(string(src), want) {
		t.Errorf("doc.go does not contain the rendered table; want:\n%s", want)
	}
}

// TestConcurrentFire races many Fire calls; each reported (from, to) pair
// must be a transition of the table.
func TestConcurrentFire(t *testing.T) {
	m := fsm.New()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				ev := fsm.Events()[(i+j)%4] // campaign, acquired, rejected, demote
				if j%5 == 4 {
					ev = fsm.Demoted
				}
				from, to, err := m.Fire(ev)
				if err != nil {
					continue
				}
				if want, ok := fsm.Next(from, ev); !ok || want != to {
					t.Errorf("Fire(%v) reported %v -> %v, table says %v (ok %v)", ev, from, to, want, ok)
				}
			}
		}()
	}
	wg.Wait()
}
