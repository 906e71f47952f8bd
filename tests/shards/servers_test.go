package servertest

import (
	"context"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/backends/kube"
	"github.com/tenure-go/tenure/backends/kube/kubetest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/shardstest"
	"k8s.io/client-go/kubernetes"
)

// timing is the elector template against real servers: a 2 s TTL (the
// test etcd grants 1 s leases at the least).
func timing() elector.Config {
	return elector.Config{TTL: 2 * time.Second, RenewPeriod: 500 * time.Millisecond}
}

// etcdStores returns a store factory over one etcd server: each member
// gets its own client, as a process would.
func etcdStores(t testing.TB, opts ...etcd.Option) func(int) backends.Store {
	t.Helper()
	srv := etcdtest.Start(t)
	return func(int) backends.Store {
		s, err := etcd.New(context.Background(), srv.Client(t), "/tenure/", opts...)
		if err != nil {
			t.Fatalf("etcd.New: %v", err)
		}
		return s
	}
}

// kubeStores returns a store factory over one real kube-apiserver.
func kubeStores(t testing.TB) func(int) backends.Store {
	t.Helper()
	srv := kubetest.Start(t)
	return func(int) backends.Store {
		s, err := kube.New(kubernetes.NewForConfigOrDie(srv.RESTConfig()))
		if err != nil {
			t.Fatalf("kube.New: %v", err)
		}
		return s
	}
}

func TestEtcd(t *testing.T) {
	shardstest.Scenario(t, shardstest.New(t, 16, timing(), etcdStores(t)), time.Minute)
}

func TestEtcdSharedLease(t *testing.T) {
	g := shardstest.New(t, 16, timing(), etcdStores(t, etcd.WithSharedLease(0)))
	shardstest.Scenario(t, g, time.Minute)
}

// TestEtcdResize changes the count of a running group of three members on
// etcd with shared leases from 8 to 16 shards and back
// (shardstest.ResizeScenario).
func TestEtcdResize(t *testing.T) {
	shardstest.ResizeScenario(t, timing(), etcdStores(t, etcd.WithSharedLease(0)), time.Minute)
}

func TestKube(t *testing.T) {
	shardstest.Scenario(t, shardstest.New(t, 8, timing(), kubeStores(t)), 2*time.Minute)
}
