package slots_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
)

// TestElectorsOverGroup runs four electors over a group of three slots: three
// lead, each in its own slot with its own token, and when one stops the
// fourth takes its slot.
func TestElectorsOverGroup(t *testing.T) {
	clk := clocktest.New(time.Time{})
	store := memstore.New(memstore.WithClock(clk))
	defer store.Close()
	g := newGroup(t, store, 3)

	type won struct {
		name string
		term elector.Term
	}
	elected := make(chan won, 8)
	var els []*elector.Elector
	for i := range 4 {
		name := fmt.Sprint("e", i)
		e, err := elector.New(g, elector.Config{
			Key: "grp", Identity: name, TTL: 10 * time.Second, Clock: clk, Jitter: elector.NoJitter,
			OnElected: func(ctx context.Context, term elector.Term) { elected <- won{name, term} },
		})
		if err != nil {
			t.Fatal(err)
		}
		els = append(els, e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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

	slotOf := map[string]int{}
	used := map[int]bool{}
	for range 3 {
		select {
		case w := <-elected:
			if used[w.term.Slot] || w.term.Slot < 0 || w.term.Slot > 2 || w.term.Token <= 0 {
				t.Fatalf("%s elected with slot %d token %d; slots in use %v", w.name, w.term.Slot, w.term.Token, used)
			}
			used[w.term.Slot] = true
			slotOf[w.name] = w.term.Slot
		case <-ctx.Done():
			t.Fatal("three electors were not elected")
		}
	}
	leaders := 0
	var follower, leaving *elector.Elector
	for i, e := range els {
		if e.IsLeader() {
			leaders++
			if leaving == nil {
				leaving = e
			}
		} else if _, ok := slotOf[fmt.Sprint("e", i)]; !ok {
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
	select {
	case w := <-elected:
		if w.term.Slot != freed.Slot {
			t.Errorf("%s took slot %d, want the freed slot %d", w.name, w.term.Slot, freed.Slot)
		}
	case <-ctx.Done():
		t.Fatal("the follower did not take the freed slot")
	}
	if !follower.IsLeader() {
		t.Error("the follower was elected but does not report IsLeader")
	}
}
