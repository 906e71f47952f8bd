package clocktest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/clocktest"
)

// A goroutine renews something every 10 seconds of fake time. The test
// advances the clock only once the goroutine is waiting on its timer, so
// every step is deterministic and nothing sleeps.
func ExampleClock_AdvanceWhenBlocked() {
	c := clocktest.New(time.Time{}) // 2026-01-01T00:00:00Z
	ctx := context.Background()

	renewed := make(chan time.Time)
	go func() {
		defer close(renewed)
		for range 3 {
			c.Sleep(10 * time.Second)
			renewed <- c.Now()
		}
	}()

	for range 3 {
		// Wait until the goroutine's Sleep has armed its timer, then fire it.
		if err := c.AdvanceWhenBlocked(ctx, 1, 10*time.Second); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("renewed at", (<-renewed).Format(time.TimeOnly))
	}
	<-renewed // closed: the goroutine is done

	// Output:
	// renewed at 00:00:10
	// renewed at 00:00:20
	// renewed at 00:00:30
}

// A context from WithTimeout is done as soon as Add reaches its deadline.
func ExampleClock_WithTimeout() {
	c := clocktest.New(time.Time{})
	ctx, cancel := c.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	c.Add(4 * time.Second)
	fmt.Println("after 4s:", ctx.Err())
	c.Add(time.Second)
	fmt.Println("after 5s:", ctx.Err())

	// Output:
	// after 4s: <nil>
	// after 5s: context deadline exceeded
}

// A view of the same fake time running 1% fast, as a peer with a drifting
// clock would see it.
func ExampleClock_Skewed() {
	c := clocktest.New(time.Time{})
	fast := c.Skewed(1.01)
	lease := fast.Timer(10 * time.Second) // 10 s on the fast clock

	c.Add(9900 * time.Millisecond)
	fmt.Println("base", c.Now().Format("15:04:05.000"), "fast", fast.Now().Format("15:04:05.000"))
	select {
	case <-lease.C:
		fmt.Println("lease timer fired")
	default:
		fmt.Println("lease timer pending")
	}
	c.Add(10 * time.Millisecond)
	<-lease.C
	fmt.Println("base", c.Now().Format("15:04:05.000"), "fast", fast.Now().Format("15:04:05.000"), "lease timer fired")

	// Output:
	// base 00:00:09.900 fast 00:00:09.999
	// lease timer pending
	// base 00:00:09.910 fast 00:00:10.009 lease timer fired
}
