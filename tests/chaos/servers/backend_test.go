package servers

import (
	"net/url"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/testrig/toxiproc"
	"github.com/tenure-go/tenure/storeurl"

	// The stores whose URLs the test parses.
	_ "github.com/tenure-go/tenure/backends/etcd"
	_ "github.com/tenure-go/tenure/backends/kube"
)

// TestBatchedModesReachTheWorkers checks that the store URLs the batched
// backends hand their workers ask storeurl for the batched mode, and that
// the plain backends' URLs do not.
func TestBatchedModesReachTheWorkers(t *testing.T) {
	px := &proxies{by: [][]*toxiproc.Proxy{{{Listen: "127.0.0.1:1"}, {Listen: "127.0.0.1:2"}}}}
	dir := t.TempDir()
	for _, tc := range []struct {
		name    string
		b       Backend
		shared  bool
		session time.Duration
	}{
		{"etcd", &etcdBackend{prefix: "chaos", clients: px}, false, 0},
		{"etcd-shared", &etcdBackend{prefix: "chaos", clients: px, query: EtcdShared}, true, 0},
		{"kube", &kubeBackend{dir: dir}, false, 0},
		{"kube-session", &kubeBackend{dir: dir, query: KubeSession}, false, time.Second},
	} {
		raw := tc.b.URL(0)
		if _, err := storeurl.Parse(raw); err != nil {
			t.Errorf("%s: worker URL %q: %v", tc.name, raw, err)
			continue
		}
		// storeurl checked the URL; what each parameter does is the
		// backends' to test (backends/etcd, backends/kube).
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		session, _ := time.ParseDuration(u.Query().Get("session"))
		if shared := u.Query().Get("lease") == "shared"; shared != tc.shared || session != tc.session {
			t.Errorf("%s: worker URL %q: shared lease %v, session %v; want %v, %v", tc.name, raw, shared, session, tc.shared, tc.session)
		}
	}
}
