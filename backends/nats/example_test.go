package nats_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tenure-go/tenure/backends"
	natsstore "github.com/tenure-go/tenure/backends/nats"
)

// A claim kept in a JetStream key-value bucket: two processes' stores on
// one bucket, a create that loses to the holder, a release, and the next
// holder's higher fencing token. The example starts a nats-server of its
// own, as the package's tests do; a program connects to its cluster
// instead.
func Example() {
	addr, stop, err := startServer()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func() (*natsstore.Store, func()) {
		nc, err := nats.Connect("nats://" + addr)
		if err != nil {
			log.Fatal(err)
		}
		// WithCreate makes the bucket, with one replica, if it is missing.
		s, err := natsstore.New(ctx, nc, "claims", natsstore.WithCreate(1))
		if err != nil {
			log.Fatal(err)
		}
		return s, func() { s.Close(); nc.Close() } // the store first, then its connection
	}
	a, closeA := open()
	defer closeA()
	b, closeB := open()
	defer closeB()

	first, err := a.CreateIfAbsent(ctx, "indexer", []byte("node-a"), 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("node-a holds the claim")

	var ce *backends.ConflictError
	if _, err := b.CreateIfAbsent(ctx, "indexer", []byte("node-b"), 10*time.Second); errors.As(err, &ce) {
		fmt.Printf("node-b: %v, held by %s\n", errors.Is(err, backends.ErrExists), ce.Current.Value)
	}

	if err := a.CompareAndDelete(ctx, "indexer", first.Revision); err != nil {
		log.Fatal(err)
	}
	next, err := b.CreateIfAbsent(ctx, "indexer", []byte("node-b"), 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after node-a released it, node-b's token is higher:", next.CreateRevision > first.CreateRevision)

	// Output:
	// node-a holds the claim
	// node-b: true, held by node-a
	// after node-a released it, node-b's token is higher: true
}
