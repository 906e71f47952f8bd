package nats_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/internal/testrig/natsproc"
)

// startServer starts a nats-server with JetStream as a process of its
// own on a free port of 127.0.0.1, as the package's tests do (natstest,
// which needs a testing.TB an Example does not have). It returns the
// server's host:port and a function that stops the server and removes
// its files.
func startServer() (addr string, stop func(), err error) {
	bin, err := natsproc.Tool.Path()
	if err != nil {
		return "", nil, err
	}
	// A port picked free may be taken by another process before the
	// server binds it: try again on a fresh one.
	for range 3 {
		if addr, stop, err = launch(bin); err == nil {
			return addr, stop, nil
		}
	}
	return "", nil, err
}

func launch(bin string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "tenure-nats-example-")
	if err != nil {
		return "", nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	argv, err := natsproc.Config{Name: "example", Dir: filepath.Join(dir, "store"), Client: addr}.Argv(bin)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	p, err := childproc.Start(childproc.Spec{Argv: argv, Log: filepath.Join(dir, "server.log")})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	stop := func() {
		p.Terminate(10 * time.Second)
		os.RemoveAll(dir)
	}
	// Generous: the machine may be busy with other tests under -race.
	if err := natsproc.WaitReady(addr, p, 60*time.Second); err != nil {
		stop()
		return "", nil, err
	}
	return addr, stop, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a port: %w", err)
	}
	defer l.Close()
	a, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("pick a port: not a TCP address")
	}
	return a.Port, nil
}
