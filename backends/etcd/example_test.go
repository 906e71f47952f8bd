package etcd_test

import (
	"context"
	"log"
	"time"

	"github.com/tenure-go/tenure/backends"
	_ "github.com/tenure-go/tenure/backends/etcd" // makes etcd:// URLs known to storeurl
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
