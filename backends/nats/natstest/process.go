package natstest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

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
	pid  int
	done chan struct{} // closed once the process has been reaped

	mu     sync.Mutex // guards reaped
	reaped bool
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
		cfg:  natsproc.Config{Name: "n1", Dir: filepath.Join(dir, "store"), Client: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))},
		done: make(chan struct{}),
	}
	if err := os.MkdirAll(p.cfg.Dir, 0o755); err != nil {
		t.Fatalf("natstest: %v", err)
	}
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	started := make(chan error, 1)
	// The child gets SIGKILL when the thread that forked it exits (Go
	// retires threads): the goroutine keeps its thread until the child
	// is reaped.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer log.Close()
		cmd := exec.Command(exe, p.cfg.Args()...)
		cmd.Env = append(os.Environ(), envProcess+"=1")
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- err
			close(p.done)
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		_ = cmd.Wait()
		p.mu.Lock()
		p.reaped = true
		p.mu.Unlock()
		close(p.done)
	}()
	if err := <-started; err != nil {
		t.Fatalf("natstest: start the server process: %v", err)
	}
	t.Cleanup(p.stop)
	if err := natsproc.WaitReady(p.cfg.Dir, p.done, readyTimeout); err != nil {
		logText, _ := os.ReadFile(filepath.Join(dir, "server.log"))
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
	if !p.signal(syscall.SIGSTOP) {
		t.Fatal("natstest: pause: the server process has exited")
	}
}

// Resume continues a paused server.
func (p *Process) Resume(t testing.TB) {
	t.Helper()
	if !p.signal(syscall.SIGCONT) {
		t.Fatal("natstest: resume: the server process has exited")
	}
}

// signal sends sig unless the process was reaped (its pid may name
// another process by then), and reports whether it sent it.
func (p *Process) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return false
	}
	return syscall.Kill(p.pid, sig) == nil
}

// stop continues the server if paused, ends it and waits for it.
func (p *Process) stop() {
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}
