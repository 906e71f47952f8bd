package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
)

// A claim taken with create-if-absent, a compare-and-set that lost to a
// newer write, and expiry judged by a fake clock.
func Example() {
	clk := clocktest.New(time.Time{})
	s := memstore.New(memstore.WithClock(clk))
	defer s.Close()
	ctx := context.Background()

	a, _ := s.CreateIfAbsent(ctx, "leader", []byte("node-a"), 10*time.Second)
	fmt.Printf("node-a created the claim: token %d\n", a.CreateRevision)

	_, err := s.CreateIfAbsent(ctx, "leader", []byte("node-b"), 10*time.Second)
	var ce *backends.ConflictError
	if errors.As(err, &ce) && errors.Is(err, backends.ErrExists) {
		fmt.Printf("node-b: exists, held by %s at revision %d\n", ce.Current.Value, ce.Current.Revision)
	}

	a2, _ := s.CompareAndSet(ctx, "leader", a.Revision, []byte("node-a, epoch 2"), 10*time.Second)
	_, err = s.CompareAndSet(ctx, "leader", a.Revision, []byte("stale write"), 10*time.Second)
	if errors.As(err, &ce) {
		fmt.Printf("stale CAS: expected revision %d, current is %d (%q)\n", ce.Expected, ce.Current.Revision, ce.Current.Value)
	}

	clk.Add(10 * time.Second) // the TTL runs out on the injected clock
	_, err = s.Get(ctx, "leader")
	fmt.Println("after 10s:", errors.Is(err, backends.ErrNotFound))

	b, _ := s.CreateIfAbsent(ctx, "leader", []byte("node-b"), 10*time.Second)
	fmt.Printf("node-b created the claim: token %d > %d\n", b.CreateRevision, a2.Revision)

	// Output:
	// node-a created the claim: token 1
	// node-b: exists, held by node-a at revision 1
	// stale CAS: expected revision 1, current is 2 ("node-a, epoch 2")
	// after 10s: true
	// node-b created the claim: token 4 > 2
}
