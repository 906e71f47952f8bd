// Package natstest runs real nats-server instances with JetStream inside
// the test process, for the tests of the NATS backend. It is test support:
// import it only from _test.go files.
//
// Servers listen on 127.0.0.1 on ports the kernel picks, keep their
// JetStream state in t.TempDir() and sync every write to disk (sync
// always), as the backend's documentation asks of production servers. A
// Server keeps its ports and store directory across Restart, so clients
// reconnect and see the same streams. Everything started is shut down by
// t.Cleanup.
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds a start under -race on busy cores.
const readyTimeout = 30 * time.Second

// Server is one nats-server. Its methods are called from the test
// goroutine; URL is safe for concurrent use.
type Server struct {
	t    testing.TB
	name string
	dir  string

	mu      sync.Mutex
	srv     *server.Server // nil while stopped
	port    int            // client port, fixed after the first start
	cluster *Cluster       // nil for a single server
	cport   int            // cluster port, fixed after the first start
}

// Start starts a single server with JetStream.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, name: "n1", dir: t.TempDir(), port: -1}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) options() *server.Options {
	o := &server.Options{
		ServerName: s.name,
		Host:       "127.0.0.1",
		Port:       s.port,
		JetStream:  true,
		StoreDir:   s.dir,
		SyncAlways: true,
		NoLog:      true,
		NoSigs:     true,
	}
	if s.cluster != nil {
		o.Cluster = server.ClusterOpts{Name: "tenure", Host: "127.0.0.1", Port: s.cport}
		o.Routes = s.cluster.routes(s)
	}
	return o
}

func (s *Server) start() {
	s.t.Helper()
	s.launch()
	s.ready()
}

// launch starts the server without waiting for it.
func (s *Server) launch() {
	s.t.Helper()
	srv, err := server.NewServer(s.options())
	if err != nil {
		s.t.Fatalf("natstest: new server %s: %v", s.name, err)
	}
	go srv.Start()
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

// ready waits for a launched server to take connections.
func (s *Server) ready() {
	s.t.Helper()
	srv := s.Running()
	if !srv.ReadyForConnections(readyTimeout) {
		s.Stop()
		s.t.Fatalf("natstest: server %s not ready within %v", s.name, readyTimeout)
	}
	s.mu.Lock()
	s.port = srv.Addr().(*net.TCPAddr).Port
	s.mu.Unlock()
}

// URL is the server's client URL, nats://127.0.0.1:PORT.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "nats://" + s.HostPort()
}

// HostPort is the server's client address, 127.0.0.1:PORT. Callers hold
// no lock; it is fixed after the first start.
func (s *Server) HostPort() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Stop shuts the server down (as a kill would: its state stays on disk).
// Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Shutdown()
	srv.WaitForShutdown()
}

// Restart starts a stopped server again on the same ports and store
// directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Running is the live server, or nil while stopped.
func (s *Server) Running() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// Cluster is three servers routed to each other, with JetStream clustered.
type Cluster struct {
	Servers []*Server
}

// StartCluster starts an n-server cluster and waits until it has a
// JetStream meta leader.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{}
	for i := range n {
		c.Servers = append(c.Servers, &Server{t: t, name: fmt.Sprintf("n%d", i+1), dir: t.TempDir(), port: -1, cport: -1, cluster: c})
	}
	// Every server routes to every other, so the ports are picked first. A
	// clustered server takes connections only once it has met its peers:
	// all start before any is waited for.
	for _, s := range c.Servers {
		s.port, s.cport = freePort(t), freePort(t)
	}
	for _, s := range c.Servers {
		s.launch()
		t.Cleanup(s.Stop)
	}
	for _, s := range c.Servers {
		s.ready()
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		leaders := 0
		for _, s := range c.Servers {
			if srv := s.Running(); srv != nil && srv.JetStreamIsLeader() {
				leaders++
			}
		}
		if leaders == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("natstest: no JetStream meta leader within %v", readyTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c
}

// URLs are the servers' client URLs, comma-separated, for nats.Connect.
func (c *Cluster) URLs() string {
	out := ""
	for i, s := range c.Servers {
		if i > 0 {
			out += ","
		}
		out += s.URL()
	}
	return out
}

// routes are the cluster URLs of the servers other than s that have one.
func (c *Cluster) routes(self *Server) []*url.URL {
	var out []*url.URL
	for _, s := range c.Servers {
		if s == self || s.cport <= 0 {
			continue
		}
		out = append(out, &url.URL{Scheme: "nats", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.cport))})
	}
	return out
}

// freePort is a port the kernel had free a moment ago. Another process may
// take it before the server binds it; the start then fails loudly.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: pick a port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
