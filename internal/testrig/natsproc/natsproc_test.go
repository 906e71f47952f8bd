package natsproc_test

import (
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/internal/testrig/natsproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestConf checks that a clustered server's configuration syncs every write,
// routes to the given peers and, closed, advertises a port nobody listens on.
func TestConf(t *testing.T) {
	c := natsproc.Config{Name: "n1", Dir: "/d/store", Client: "127.0.0.1:1", Cluster: "127.0.0.1:2", Routes: []string{"127.0.0.1:3", "127.0.0.1:4"}, Closed: true}
	got := c.Conf()
	for _, want := range []string{`server_name: "n1"`, `listen: "127.0.0.1:1"`, `store_dir: "/d/store"`, "sync_interval: always", `listen: "127.0.0.1:2"`, "no_advertise: true", `advertise: "127.0.0.1:1"`, `routes: ["nats://127.0.0.1:3", "nats://127.0.0.1:4"]`} {
		if !strings.Contains(got, want) {
			t.Errorf("Conf() lacks %q:\n%s", want, got)
		}
	}
	if c.ConfFile() != "/d/store.conf" {
		t.Errorf("ConfFile() = %q", c.ConfFile())
	}
}

// TestServer checks that the binary runs from the configuration Argv writes,
// takes connections, and, paused, does not greet a new one; WaitReady fails
// at once on a server that exited.
func TestServer(t *testing.T) {
	bin, err := natsproc.Tool.Path()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := natsproc.Config{Name: "n1", Dir: filepath.Join(dir, "store"), Client: freeAddr(t)}
	argv, err := c.Argv(bin)
	if err != nil {
		t.Fatal(err)
	}
	p, err := childproc.Start(childproc.Spec{Argv: argv, Log: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Terminate(10 * time.Second)
	if err := natsproc.WaitReady(c.Client, p, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Signal(syscall.SIGSTOP)
	// kill returns before every thread of the server has stopped: one
	// still running could greet the probe.
	waitStopped(t, p.Pid())
	if err := natsproc.WaitReady(c.Client, p, 300*time.Millisecond); err == nil {
		t.Error("a paused server greeted a connection")
	}
	p.Signal(syscall.SIGKILL)
	<-p.Done()
	start := time.Now()
	if err := natsproc.WaitReady(c.Client, p, 60*time.Second); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("WaitReady on an exited server: %v, want it exited", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("WaitReady on an exited server took %v", d)
	}
}

// waitStopped waits until pid's group stop is complete: the kernel reports
// a child stopped to its parent (waitid with WSTOPPED) only once every one
// of its threads has stopped. WNOWAIT leaves the report in place, so the
// reaper's wait for the exit is not disturbed.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("waitid for the stop of server %d: %v", pid, err)
		}
		return
	}
}
