package toolbuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// servers are the modules of the servers the tests run as processes,
// built from tools modules: no package of this module, tests included,
// may import them, and go.mod may not require them.
var servers = []string{
	"github.com/Shopify/toxiproxy/v2",
	"github.com/nats-io/nats-server/v2",
	"go.etcd.io/etcd/server/v3",
	"go.etcd.io/etcd/tests/v3",
}

// TestNoServerLinked checks that no package of the module, its tests
// included, imports a server's module, and go.mod does not require one.
func TestNoServerLinked(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(gobin, "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	mod, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mod), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require"))
		for _, s := range servers {
			if len(f) > 0 && f[0] == s {
				t.Errorf("go.mod requires %s: %s", s, strings.TrimSpace(line))
			}
		}
	}
	cmd := exec.Command(gobin, "list", "-deps", "-test", "./...")
	cmd.Dir = filepath.Dir(gomod)
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -test ./...: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps -test listed only %d packages", len(deps))
	}
	for _, d := range deps {
		for _, s := range servers {
			if d == s || strings.HasPrefix(d, s+"/") {
				t.Errorf("a package of the module imports %s", d)
			}
		}
	}
}
