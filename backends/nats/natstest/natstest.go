// Package natstest runs real nats-server instances with JetStream inside
// the test process, for the tests of the NATS backend, and one in a child
// process for a test that pauses it (StartProcess). It is test support:
// import it only from _test.go files.
//
// Servers listen on 127.0.0.1 on ports the kernel picks, keep their
// JetStream state in t.TempDir() and sync every write to disk (sync
// always), as the backend's documentation asks of production servers. A
// Server keeps its ports and store directory across Restart, so clients
// reconnect and see the same streams. Everything started is shut down by
// t.Cleanup. The servers' options are internal/natsproc's, as the fault
// campaign's servers' are.
package natstest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/tenure-go/tenure/internal/natsproc"
	"github.com/tenure-go/tenure/internal/toxiproc"
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

// options are the server's: those of the servers natsproc runs in
// processes of their own.
func (s *Server) options() (*server.Options, error) {
	c := natsproc.Config{Name: s.name, Dir: s.dir, Client: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))}
	if s.cluster != nil {
		c.Cluster = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.cport))
		c.Routes = s.cluster.routes(s)
		// Peers reach each other only through the proxies of the
		// configured routes: a route learnt by gossip fails.
		c.Closed = s.cluster.proxies != nil
	}
	return c.Options()
}

func (s *Server) start() {
	s.t.Helper()
	s.launch()
	s.ready()
}

// launch starts the server without waiting for it.
func (s *Server) launch() {
	s.t.Helper()
	o, err := s.options()
	if err != nil {
		s.t.Fatalf("natstest: options of server %s: %v", s.name, err)
	}
	srv, err := server.NewServer(o)
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
// directory, or for the first time one that StartCluster held back (see
// WithHeldBack).
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

// Cluster is n servers routed to each other, with JetStream clustered.
type Cluster struct {
	Servers []*Server

	// proxies[i][j] carries server i's route to server j; nil without
	// WithPartitions.
	proxies [][]*toxiproc.Proxy
}

// ClusterOption configures StartCluster.
type ClusterOption func(*clusterConfig)

type clusterConfig struct {
	partitions bool
	held       map[int]bool // indexes of the servers not started
}

// WithPartitions routes every server to every other through a proxy of
// its own, on a toxiproxy server process, so that Partition can cut a
// server off from its peers while its clients still reach it.
func WithPartitions() ClusterOption { return func(c *clusterConfig) { c.partitions = true } }

// WithHeldBack leaves the servers at the given indexes unstarted, on the
// ports and with the routes they will have: Restart starts each. A cluster
// started without a majority of its servers has no JetStream meta leader,
// so StartCluster then waits only until the started servers take
// connections.
func WithHeldBack(idx ...int) ClusterOption {
	return func(c *clusterConfig) {
		if c.held == nil {
			c.held = map[int]bool{}
		}
		for _, i := range idx {
			c.held[i] = true
		}
	}
}

// StartCluster starts an n-server cluster and waits until it has a
// JetStream meta leader (see WithHeldBack for the exception).
func StartCluster(t testing.TB, n int, opts ...ClusterOption) *Cluster {
	t.Helper()
	var cf clusterConfig
	for _, o := range opts {
		o(&cf)
	}
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
	if cf.partitions {
		tp := toxiproc.StartTest(t)
		c.proxies = make([][]*toxiproc.Proxy, n)
		for i := range n {
			c.proxies[i] = make([]*toxiproc.Proxy, n)
			for j, to := range c.Servers {
				if i == j {
					continue
				}
				c.proxies[i][j] = tp.Proxy(t, fmt.Sprintf("route-%d-%d", i, j), net.JoinHostPort("127.0.0.1", strconv.Itoa(to.cport)))
			}
		}
	}
	for i, s := range c.Servers {
		t.Cleanup(s.Stop)
		if !cf.held[i] {
			s.launch()
		}
	}
	for i, s := range c.Servers {
		if !cf.held[i] {
			s.ready()
		}
	}
	if len(cf.held) > 0 {
		return c
	}
	deadline := time.Now().Add(readyTimeout)
	for {
		leaders, ready := 0, 0
		for _, s := range c.Servers {
			srv := s.Running()
			if srv == nil {
				continue
			}
			// The meta leader lists the peers it knows (others list none).
			if srv.JetStreamIsLeader() && len(srv.JetStreamClusterPeers()) == n {
				leaders++
			}
			if srv.NumRemotes() == n-1 && srv.JetStreamIsCurrent() {
				ready++
			}
		}
		if leaders == 1 && ready == n {
			break
		}
		if time.Now().After(deadline) {
			var state []string
			for _, s := range c.Servers {
				if srv := s.Running(); srv != nil {
					state = append(state, fmt.Sprintf("%s: leader %v, %d remotes, current %v, peers %q", s.name, srv.JetStreamIsLeader(), srv.NumRemotes(), srv.JetStreamIsCurrent(), srv.JetStreamClusterPeers()))
				}
			}
			t.Fatalf("natstest: cluster not ready within %v: %s", readyTimeout, strings.Join(state, "; "))
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

// routes are the cluster addresses (host:port) of the servers other than
// self, through self's proxies where the cluster has them.
func (c *Cluster) routes(self *Server) []string {
	var out []string
	for i, s := range c.Servers {
		if s == self {
			if c.proxies != nil {
				out = out[:0]
				for j, px := range c.proxies[i] {
					if j != i {
						out = append(out, px.Listen)
					}
				}
				return out
			}
			continue
		}
		out = append(out, net.JoinHostPort("127.0.0.1", strconv.Itoa(s.cport)))
	}
	return out
}

// Partition cuts server i off from its peers: its route proxies, both
// ways, drop everything (connections stay open, as in a network
// partition). Its clients still reach it. It needs WithPartitions.
func (c *Cluster) Partition(i int) {
	for _, px := range c.routeProxies(i) {
		if err := px.Blackhole("cut"); err != nil {
			c.Servers[i].t.Fatalf("natstest: partition: %v", err)
		}
	}
}

// Heal ends Partition(i).
func (c *Cluster) Heal(i int) {
	for _, px := range c.routeProxies(i) {
		if err := px.RemoveBoth("cut"); err != nil {
			c.Servers[i].t.Fatalf("natstest: heal: %v", err)
		}
	}
}

// routeProxies are the proxies on server i's routes, both ways.
func (c *Cluster) routeProxies(i int) []*toxiproc.Proxy {
	if c.proxies == nil {
		c.Servers[i].t.Fatal("natstest: Partition on a cluster started without WithPartitions")
	}
	var out []*toxiproc.Proxy
	for j := range c.Servers {
		if j != i {
			out = append(out, c.proxies[i][j], c.proxies[j][i])
		}
	}
	return out
}

// Index is the position in Servers of the server named name, or -1.
func (c *Cluster) Index(name string) int {
	for i, s := range c.Servers {
		if s.name == name {
			return i
		}
	}
	return -1
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
