package main

import (
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	"github.com/tenure-go/tenure/storeurl"
)

// TestBatchedModesReachTheWorkers checks that the store URLs the batched
// backends hand their workers ask storeurl for the batched mode, and that
// the plain backends' URLs do not.
func TestBatchedModesReachTheWorkers(t *testing.T) {
	px := &proxies{by: [][]*toxiproxy.Proxy{{{Listen: "127.0.0.1:1"}, {Listen: "127.0.0.1:2"}}}}
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		b       backend
		shared  bool
		session time.Duration
	}{
		{"etcd", &etcdBackend{prefix: "chaos", clients: px}, false, 0},
		{"etcd-shared", &etcdBackend{prefix: "chaos", clients: px, query: etcdShared}, true, 0},
		{"kube", &kubeBackend{dir: dir}, false, 0},
		{"kube-session", &kubeBackend{dir: dir, query: kubeSession}, false, time.Second},
	} {
		raw := tc.b.url(0)
		loc, err := storeurl.Parse(raw)
		if err != nil {
			t.Errorf("%s: worker URL %q: %v", tc.name, raw, err)
			continue
		}
		if loc.SharedLease != tc.shared || loc.Session != tc.session {
			t.Errorf("%s: worker URL %q: shared lease %v, session %v; want %v, %v", tc.name, raw, loc.SharedLease, loc.Session, tc.shared, tc.session)
		}
	}
}
