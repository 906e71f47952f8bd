package lifecycle_test

import (
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/lifecycle"
)

func Example() {
	m := lifecycle.New()
	for _, ev := range []lifecycle.Event{
		lifecycle.Campaign, lifecycle.Acquired, // elected
		lifecycle.Stop, // refused: a leader must demote first
		lifecycle.Demote, lifecycle.Stop,
	} {
		from, to, err := m.Fire(ev)
		if errors.Is(err, lifecycle.ErrInvalidTransition) {
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
