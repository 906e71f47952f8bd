package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/postgres"
	"github.com/tenure-go/tenure/internal/testrig/pgproc"
)

// A claim kept in a PostgreSQL table: two processes' stores on one
// database, a create that loses to the holder, a release, and the next
// holder's higher fencing token. The example starts a PostgreSQL server
// of its own, as the package's tests do; a program opens its store with
// the connection string of its database instead.
func Example() {
	srv, err := pgproc.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Remove()
	dsn := srv.DSN("postgres")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Open creates the table, its sequence and its trigger where missing.
	a, err := postgres.Open(ctx, dsn, postgres.WithTable("public", "example_claims"))
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := postgres.Open(ctx, dsn, postgres.WithTable("public", "example_claims"))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

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
