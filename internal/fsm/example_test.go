package fsm_test

import (
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/internal/fsm"
)

func Example() {
	m := fsm.New()
	for _, ev := range []fsm.Event{
		fsm.Campaign, fsm.Acquired, // elected
		fsm.Stop, // refused: a leader must demote first
		fsm.Demote, fsm.Stop,
	} {
		from, to, err := m.Fire(ev)
		if errors.Is(err, fsm.ErrInvalidTransition) {
			fmt.Printf("%-8s refused in %s\n", ev, from)
			continue
		}
		fmt.Printf("%-8s %s -> %s\n", ev, from, to)
	}
	// Output:
	// campaign follower -> acquiring
	// acquired acquiring -> leader
	// stop     refused in leader
	// demote   leader -> demoting
	// stop     demoting -> stopped
}
