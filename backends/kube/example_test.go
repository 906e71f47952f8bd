package kube_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A program opens the store over the client it already has, built from its
// kubeconfig or from the pod's service account:
//
//	cfg, err := rest.InClusterConfig() // or clientcmd.BuildConfigFromFlags("", kubeconfig)
//	...
//	client, err := kubernetes.NewForConfig(cfg)
//
// and hands it to an elector (backends.NewLocker, then elector.New) or uses
// the Store API directly, as here. Each key is a Lease object in the store's
// namespace, which kubectl shows; the Role the program runs under needs get,
// list, watch, create and update on leases.coordination.k8s.io there.
//
// So that it runs without a cluster, this example uses client-go's fake
// clientset, with a reactor that gives each write the next resourceVersion as
// an API server does. The fake checks no resourceVersion precondition, so it
// stands for a cluster only where, as here, one process writes: where
// processes compete it would let both win, and the package's tests run
// against a real kube-apiserver.
func Example() {
	client := fake.NewClientset()
	var rv atomic.Int64
	stamp := func(a k8stesting.Action) (bool, runtime.Object, error) {
		if w, ok := a.(interface{ GetObject() runtime.Object }); ok {
			if m, err := meta.Accessor(w.GetObject()); err == nil {
				m.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
			}
		}
		return false, nil, nil // the fake's object tracker stores it
	}
	client.PrependReactor("create", "leases", stamp)
	client.PrependReactor("update", "leases", stamp)

	store, err := kube.New(client, kube.WithNamespace("indexer"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	ctx := context.Background()
	const key = "indexer/leader"
	fmt.Println("lease:", store.LeaseName(key))

	held, err := store.CreateIfAbsent(ctx, key, []byte("indexer-0"), 15*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("claimed: token %d, revision %d\n", held.CreateRevision, held.Revision)

	// A keep-alive extends the claim and changes neither its token nor
	// its revision.
	held, err = store.KeepAlive(ctx, key, held.Revision, 15*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("kept alive: token %d, revision %d\n", held.CreateRevision, held.Revision)

	// Releasing clears the Lease but keeps it, so the next claim's token is
	// above every revision the key had.
	if err := store.CompareAndDelete(ctx, key, held.Revision); err != nil {
		fmt.Println(err)
		return
	}
	_, err = store.Get(ctx, key)
	fmt.Println("released:", errors.Is(err, backends.ErrNotFound))
	again, err := store.CreateIfAbsent(ctx, key, []byte("indexer-1"), 15*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("claimed again: token %d, value %s\n", again.CreateRevision, again.Value)

	// Output:
	// lease: tenure-ca31464dcb17b0f4d98c171814b19d50d97b2cce
	// claimed: token 1, revision 1
	// kept alive: token 1, revision 1
	// released: true
	// claimed again: token 4, value indexer-1
}
