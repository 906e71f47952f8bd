package natstest

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/internal/natsproc"
)

// envProcess names the variable that makes a test binary started by
// StartProcess run a nats-server instead of its tests.
const envProcess = "TENURE_NATSTEST_PROCESS"

// ServeProcess runs a nats-server and exits, when the test binary was
// started by StartProcess; otherwise it returns at once. A package that
// uses StartProcess calls it first thing in TestMain:
//
//	func TestMain(m *testing.M) {
//		natstest.ServeProcess()
//		...
//	}
func ServeProcess() {
	if os.Getenv(envProcess) == "" {
		return
	}
	if err := natsproc.Main(os.Args[1:]); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(2)
	}
	os.Exit(0)
}

// Process is a nats-server in a process of its own (the test binary run
// again, see ServeProcess), with JetStream syncing every write, so that a
// test can pause it with SIGSTOP. It is stopped by t.Cleanup.
type Process struct {
	cfg  natsproc.Config
	proc *childproc.Process
}

// StartProcess starts a single server in a child process and waits until
// it takes connections. The test binary's TestMain must call ServeProcess.
func StartProcess(t testing.TB) *Process {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	dir := t.TempDir()
	p := &Process{
		cfg: natsproc.Config{Name: "n1", Dir: filepath.Join(dir, "store"), Client: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))},
	}
	if err := os.MkdirAll(p.cfg.Dir, 0o755); err != nil {
		t.Fatalf("natstest: %v", err)
	}
	logPath := filepath.Join(dir, "server.log")
	p.proc, err = childproc.Start(childproc.Spec{
		Argv: append([]string{exe}, p.cfg.Args()...),
		Env:  append(os.Environ(), envProcess+"=1"),
		Log:  logPath,
	})
	if err != nil {
		t.Fatalf("natstest: start the server process: %v", err)
	}
	t.Cleanup(p.stop)
	if err := p.proc.WaitFile(filepath.Join(p.cfg.Dir, natsproc.ReadyFile), readyTimeout); err != nil {
		logText, _ := os.ReadFile(logPath)
		t.Fatalf("natstest: %v\n%s", err, logText)
	}
	return p
}

// URL is the server's client URL, nats://127.0.0.1:PORT.
func (p *Process) URL() string { return "nats://" + p.cfg.Client }

// Pause stops the server with SIGSTOP: its connections stay open and
// nothing is answered until Resume.
func (p *Process) Pause(t testing.TB) {
	t.Helper()
	if !p.proc.Signal(syscall.SIGSTOP) {
		t.Fatal("natstest: pause: the server process has exited")
	}
}

// Resume continues a paused server.
func (p *Process) Resume(t testing.TB) {
	t.Helper()
	if !p.proc.Signal(syscall.SIGCONT) {
		t.Fatal("natstest: resume: the server process has exited")
	}
}

// stop continues the server if paused, ends it and waits for it.
func (p *Process) stop() { p.proc.Terminate(10 * time.Second) }
