package servertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/allocator"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/backends/kube"
	"github.com/tenure-go/tenure/backends/kube/kubetest"
	"github.com/tenure-go/tenure/clocktest"
	"k8s.io/client-go/kubernetes"
)

const prefix = "alloc/"

// etcdStores returns n stores over one etcd server, each with its own
// client, as n processes would have.
func etcdStores(t testing.TB, n int) []backends.Store {
	t.Helper()
	srv := etcdtest.Start(t)
	var ss []backends.Store
	for range n {
		s, err := etcd.New(context.Background(), srv.Client(t), "/tenure/")
		if err != nil {
			t.Fatalf("etcd.New: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		ss = append(ss, s)
	}
	return ss
}

// kubeStores returns n stores over one real kube-apiserver, each with its
// own client.
func kubeStores(t testing.TB, n int) []backends.Store {
	t.Helper()
	srv := kubetest.Start(t)
	var ss []backends.Store
	for range n {
		s, err := kube.New(kubernetes.NewForConfigOrDie(srv.RESTConfig()))
		if err != nil {
			t.Fatalf("kube.New: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		ss = append(ss, s)
	}
	return ss
}

func config(member string, clk *clocktest.Clock) allocator.Config {
	return allocator.Config{
		Prefix: prefix, Member: member, TTL: time.Hour, Grace: time.Minute,
		GCInterval: -1, Clock: clk,
	}
}

func TestEtcd(t *testing.T) { smoke(t, etcdStores(t, 4), 60) }

func TestKube(t *testing.T) { smoke(t, kubeStores(t, 3), 15) }

// smoke has one allocator per store allocate overlapping keys at once,
// checks that they agree and that no two keys share an ID, then releases
// everything and checks that garbage collection empties the store.
func smoke(t *testing.T, stores []backends.Store, keys int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	as := make([]*allocator.Allocator, len(stores))
	for i, s := range stores {
		a, err := allocator.New(s, config(fmt.Sprintf("m%d", i), clk))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { _ = a.Close(context.Background()) })
		as[i] = a
	}
	pool := keys * 3 / 2
	got := make([]map[string]uint64, len(as))
	var wg sync.WaitGroup
	errs := make(chan error, len(as))
	for i, a := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 3))
			m := make(map[string]uint64)
			for _, j := range r.Perm(pool)[:keys] {
				k := fmt.Sprintf("k/%d", j)
				id, _, err := a.Allocate(ctx, k)
				if err != nil {
					errs <- err
					return
				}
				m[k] = id
			}
			got[i] = m
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	byKey, byID := map[string]uint64{}, map[uint64]string{}
	for _, m := range got {
		for k, id := range m {
			if prev, ok := byKey[k]; ok && prev != id {
				t.Errorf("%q got ids %d and %d", k, prev, id)
			}
			if prev, ok := byID[id]; ok && prev != k {
				t.Errorf("id %d given to %q and %q", id, prev, k)
			}
			byKey[k], byID[id] = id, k
		}
	}
	for k, id := range byKey {
		if got, err := as[0].Get(ctx, k); err != nil || got != id {
			t.Errorf("Get(%q) = %d, %v; want %d", k, got, err, id)
		}
		if got, err := as[len(as)-1].GetByID(ctx, id); err != nil || got != k {
			t.Errorf("GetByID(%d) = %q, %v; want %q", id, got, err, k)
		}
	}
	for i, a := range as {
		for k := range got[i] {
			if _, err := a.Release(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 4 {
		if _, err := as[0].RunGC(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Add(time.Minute)
	}
	left, err := stores[0].List(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		var ks []string
		for _, e := range left {
			ks = append(ks, e.Key)
		}
		t.Errorf("%d entries left after release and GC: %s", len(left), strings.Join(ks, ", "))
	}
}
