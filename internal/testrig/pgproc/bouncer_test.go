package pgproc

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestBouncer checks that the bouncer serves the server's databases in
// transaction mode, runs as nobody when started by root (PgBouncer refuses
// root), and Stop ends it and removes its directory.
func TestBouncer(t *testing.T) {
	defer RemoveTemplate()
	srv, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Remove()
	b, err := StartBouncer(srv, 2)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			b.Stop()
		}
	}()

	if os.Geteuid() == 0 {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.p.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "Uid:" && f[1] != fmt.Sprint(nobody) {
				t.Errorf("pgbouncer runs as uid %s, want nobody (%d)", f[1], nobody)
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := Query(ctx, b.DSN("postgres"), "SELECT 1"); err != nil || out != "1" {
		t.Fatalf("query through the bouncer: %q, %v\n%s", out, err, b.Log())
	}
	ini, err := os.ReadFile(b.root + "/pgbouncer.ini")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pool_mode = transaction", "listen_addr = 127.0.0.1", "auth_type = trust", fmt.Sprintf("listen_port = %d", b.Port())} {
		if !strings.Contains(string(ini), want) {
			t.Errorf("pgbouncer.ini lacks %q:\n%s", want, ini)
		}
	}

	b.Stop()
	stopped = true
	if b.p.Alive() {
		t.Error("pgbouncer still running after Stop")
	}
	if _, err := os.Stat(b.root); !os.IsNotExist(err) {
		t.Errorf("the bouncer's directory after Stop: %v, want it removed", err)
	}
}
