package etcd_test

import (
	"context"
	"log"
	"net/url"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
)

// A program's --store flag names an etcd cluster and a key prefix; OpenURL
// turns it into a Store, and the Store into the Locker an elector runs on.
// (Not run: it needs an etcd at the address.)
func ExampleOpenURL() {
	storeFlag := "etcd://10.0.0.1:2379,10.0.0.2:2379/indexer" // e.g. from --store

	u, err := url.Parse(storeFlag)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := etcd.OpenURL(ctx, u, etcd.WithSharedLease(0))
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
