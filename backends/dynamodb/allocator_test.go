package dynamodb_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/allocator"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/dynamodb/dynamotest"
)

// TestAllocatorRefused checks that the ID allocator, which needs a watch,
// refuses the store (which has none) with ErrUnsupported, instead of
// running without it: it fails closed.
func TestAllocatorRefused(t *testing.T) {
	srv := dynamotest.Start(t)
	st := open(t, srv.Endpoint(), dynamotest.NewTable())
	_, err := allocator.New(st, allocator.Config{
		Prefix: "ids/", Member: "node-a", Min: 1, Max: 1000,
		TTL: time.Minute, Grace: time.Minute, GCInterval: -1,
	})
	if !errors.Is(err, backends.ErrUnsupported) {
		t.Fatalf("allocator.New over the store = %v, want ErrUnsupported (the store has no watch)", err)
	}
}
