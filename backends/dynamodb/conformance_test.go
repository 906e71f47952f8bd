package dynamodb_test

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/backendtest"
	"github.com/tenure-go/tenure/backends/dynamodb"
	"github.com/tenure-go/tenure/backends/dynamodb/dynamotest"
)

// TestConformance runs the contract's suite against a dynalite server,
// each store on a table of its own. Expiry is judged by local observation
// on real time, so the suite waits for it (Elapse is nil) and each store
// counts from its own first read. Peer and Reopen open another client over
// the same table, as another process would; a reopened store has
// forgotten what it saw.
func TestConformance(t *testing.T) {
	srv := dynamotest.Start(t)
	table := func(st backends.Store) string { return st.(*dynamodb.Store).Table() }
	backendtest.Run(t, backendtest.Harness{
		New:  func(t *testing.T) backends.Store { return open(t, srv.Endpoint(), dynamotest.NewTable()) },
		Peer: func(t *testing.T, st backends.Store) backends.Store { return open(t, srv.Endpoint(), table(st)) },
		Reopen: func(t *testing.T, st backends.Store) backends.Store {
			if err := st.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return open(t, srv.Endpoint(), table(st))
		},
		TTL: 500 * time.Millisecond,
	})
}
