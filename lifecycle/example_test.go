package lifecycle_test

import (
	"fmt"

	"github.com/tenure-go/tenure/lifecycle"
)

func Example() {
	for _, s := range lifecycle.States() {
		fmt.Println(s)
	}
	// Output:
	// follower
	// acquiring
	// leader
	// demoting
	// stopped
}
