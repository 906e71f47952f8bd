package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd" // also makes etcd:// URLs known to storeurl
	"github.com/tenure-go/tenure/storeurl"
)

// A program's --store flag names an etcd cluster and a key prefix;
// storeurl.Open turns it into a Store (lease=shared: WithSharedLease), and
// the Store into the Locker an elector runs on. (Not run: it needs an etcd
// at the address.)
func Example_url() {
	storeFlag := "etcd://10.0.0.1:2379,10.0.0.2:2379/indexer?lease=shared" // e.g. from --store

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := storeurl.Open(ctx, storeFlag)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	locker, err := backends.NewLocker(store)
	if err != nil {
		log.Fatal(err)
	}
	_ = locker // elector.New(locker, elector.Config{...})
}

// A claim kept in etcd: two processes' stores under one prefix, a create
// that loses to the holder, a release, and the next holder's higher
// fencing token. The example starts an etcd server of its own, as the
// package's tests do; a program names its cluster instead.
func Example() {
	endpoint, stop, err := startServer()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := "etcd://" + strings.TrimPrefix(endpoint, "http://") + "/example"
	var stores [2]*etcd.Store
	for i := range stores {
		s, err := storeurl.Open(ctx, url)
		if err != nil {
			log.Fatal(err)
		}
		defer s.Close()
		stores[i] = s.(*etcd.Store)
	}
	a, b := stores[0], stores[1]

	first, err := a.CreateIfAbsent(ctx, "indexer", []byte("node-a"), 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("node-a holds the claim under", a.Prefix())

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
	// node-a holds the claim under example/
	// node-b: true, held by node-a
	// after node-a released it, node-b's token is higher: true
}
