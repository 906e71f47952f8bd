package servers

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-go/tenure/internal/childproc"
)

// Spawn starts a child process of the campaign, a worker or a backend
// server, its output appended to logPath. It dies with the campaign
// (package childproc), so that no child outlives a campaign that was
// itself killed.
func Spawn(name, logPath string, argv []string) (*childproc.Process, error) {
	p, err := childproc.Start(childproc.Spec{Argv: argv, Log: logPath})
	if err != nil {
		return nil, fmt.Errorf("chaos: start %s: %w", name, err)
	}
	return p, nil
}

// server is one backend server process, which the faults pause, kill and
// restart: an etcd member, a nats-server, the kube-apiserver.
type server struct {
	name    string // its name in the journal and in errors
	logPath string
	ready   string // the file it creates once it serves; "" if it has none

	mu sync.Mutex // guards p
	p  *childproc.Process
}

// start starts the server's program, argv, without waiting for it to
// serve.
func (s *server) start(argv []string) error {
	if s.ready != "" {
		_ = os.Remove(s.ready)
	}
	p, err := Spawn(s.name, s.logPath, argv)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
	return nil
}

// waitReady waits until the server has created its ready file.
func (s *server) waitReady(d time.Duration) error {
	if err := s.proc().WaitFile(s.ready, d); err != nil {
		return fmt.Errorf("chaos: %s: %w", s.name, err)
	}
	return nil
}

// proc is the server's latest process; nil before the first start.
func (s *server) proc() *childproc.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

// stop ends the server's process, if it was started: SIGTERM, and
// SIGKILL after grace.
func (s *server) stop(grace time.Duration) {
	if p := s.proc(); p != nil {
		p.Terminate(grace)
	}
}

// pause is the fault fServerPause on s: SIGSTOP until the heal.
func (s *server) pause() (heal func(), target string, ok bool) {
	p := s.proc()
	if !p.Pause() {
		return nil, "", false
	}
	return func() { p.Signal(syscall.SIGCONT) }, s.name, true
}

// kill is the fault fServerKill on s: SIGKILL, and restart as the heal.
// It returns once the killed process was reaped.
func (s *server) kill(restart func()) (heal func(), target string, ok bool) {
	p := s.proc()
	if !p.Signal(syscall.SIGKILL) {
		return nil, "", false
	}
	<-p.Done()
	return restart, s.name, true
}
