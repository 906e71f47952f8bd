package dynamodb_test

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends/dynamodb"
	"github.com/tenure-go/tenure/backends/dynamodb/dynamotest"
)

// open opens a store over table at endpoint, creating the table if it is
// missing, closed when t ends.
func open(t testing.TB, endpoint, table string, opts ...dynamodb.Option) *dynamodb.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := dynamodb.Open(ctx, dynamotest.ClientAt(t, endpoint), table, append([]dynamodb.Option{dynamodb.WithCreateTable()}, opts...)...)
	if err != nil {
		t.Fatalf("Open(table %s at %s): %v", table, endpoint, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// within is a context that ends after d, or when t ends: a bound on a
// wait, never a timing assertion.
func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}
