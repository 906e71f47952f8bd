package filestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/filestore"
)

// Two stores over one directory behave like two processes on one host: one
// claims a key, the other sees the claim, watches it, and takes it over when
// it is released — with a higher fencing token.
func Example() {
	dir, err := os.MkdirTemp("", "filestore-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	a, err := filestore.Open(ctx, dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()
	b, err := filestore.Open(ctx, dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer b.Close()

	held, err := a.CreateIfAbsent(ctx, "indexer/leader", []byte("node-a"), 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("a holds %s with token %d\n", held.Key, held.CreateRevision)

	_, err = b.CreateIfAbsent(ctx, "indexer/leader", []byte("node-b"), 10*time.Second)
	var conflict *backends.ConflictError
	if errors.As(err, &conflict) && errors.Is(err, backends.ErrExists) {
		fmt.Printf("b sees it held: %s\n", conflict.Current.Value)
	}

	events, err := b.Watch(ctx, "indexer/")
	if err != nil {
		fmt.Println(err)
		return
	}
	held, err = a.KeepAlive(ctx, "indexer/leader", held.Revision, 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := a.CompareAndDelete(ctx, "indexer/leader", held.Revision); err != nil {
		fmt.Println(err)
		return
	}
	ev := <-events // the keep-alive produced no event
	fmt.Printf("b saw a %s of %s\n", ev.Kind, ev.Entry.Key)

	taken, err := b.CreateIfAbsent(ctx, "indexer/leader", []byte("node-b"), 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("b holds %s with token %d\n", taken.Key, taken.CreateRevision)

	// Output:
	// a holds indexer/leader with token 1
	// b sees it held: node-a
	// b saw a delete of indexer/leader
	// b holds indexer/leader with token 2
}
