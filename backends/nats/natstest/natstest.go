// Package natstest runs real nats-server instances with JetStream for the
// tests of the NATS backend, each as a process of its own (package
// natsproc: the nats-server binary of a pinned tools module, built and
// cached on first use unless TENURE_NATS_SERVER names one). It is test
// support: import it only from _test.go files.
//
// Servers listen on 127.0.0.1 on ports picked free at their first start,
// keep their JetStream state in t.TempDir() and sync every write to disk
// (sync always), as the backend's documentation asks of production
// servers. A Server keeps its ports and store directory across Restart,
// so clients reconnect and see the same streams; Pause and Resume stop
// and continue its process. Everything started is ended by t.Cleanup.
// The servers' configuration is internal/testrig/natsproc's, as the fault
// campaign's servers' is.
package natstest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/internal/testrig/natsproc"
	"github.com/tenure-go/tenure/internal/testrig/toxiproc"
)

// readyTimeout bounds a start under -race on busy cores.
const readyTimeout = 60 * time.Second

// Server is one nats-server process. Its methods are called from the
// test goroutine; URL, HostPort and CPU are safe for concurrent use.
type Server struct {
	t       testing.TB
	bin     string
	name    string
	dir     string
	log     string
	port    int      // client port, fixed
	mport   int      // monitoring port, fixed
	cport   int      // cluster port, fixed; 0 for a single server
	cluster *Cluster // nil for a single server

	mu   sync.Mutex
	proc *childproc.Process // nil while stopped
}

// Start starts a single server with JetStream and waits until it takes
// connections.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := binary(t)
	var err error
	// A port picked free may be taken by another process before the
	// server binds it: try again on fresh ports.
	for range 3 {
		dir := t.TempDir()
		s := &Server{t: t, bin: bin, name: "n1", dir: dir + "/store", log: dir + "/server.log", port: freePort(t), mport: freePort(t)}
		if err = s.launch(); err == nil {
			if err = s.waitReady(); err == nil {
				t.Cleanup(s.Stop)
				return s
			}
		}
		s.Stop()
	}
	t.Fatalf("natstest: %v", err)
	return nil
}

func binary(t testing.TB) string {
	t.Helper()
	bin, err := natsproc.Tool.Path()
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return bin
}

func (s *Server) config() natsproc.Config {
	c := natsproc.Config{Name: s.name, Dir: s.dir, Client: s.HostPort(), Monitor: hostPort(s.mport)}
	if s.cluster != nil {
		c.Cluster = hostPort(s.cport)
		c.Routes = s.cluster.routes(s)
		// Peers reach each other only through the proxies of the
		// configured routes: a route learnt by gossip fails.
		c.Closed = s.cluster.proxies != nil
	}
	return c
}

// launch starts the server's process without waiting for it.
func (s *Server) launch() error {
	argv, err := s.config().Argv(s.bin)
	if err != nil {
		return err
	}
	p, err := childproc.Start(childproc.Spec{Argv: argv, Log: s.log})
	if err != nil {
		return fmt.Errorf("natstest: start server %s: %w", s.name, err)
	}
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return nil
}

// waitReady waits for a launched server to take connections.
func (s *Server) waitReady() error {
	if err := natsproc.WaitReady(s.HostPort(), s.running(), readyTimeout); err != nil {
		return fmt.Errorf("%w\n%s", err, logTail(s.log))
	}
	return nil
}

func (s *Server) start() {
	s.t.Helper()
	if err := s.launch(); err != nil {
		s.t.Fatal(err)
	}
	if err := s.waitReady(); err != nil {
		s.Stop()
		s.t.Fatalf("natstest: server %s: %v", s.name, err)
	}
}

func (s *Server) running() *childproc.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// URL is the server's client URL, nats://127.0.0.1:PORT.
func (s *Server) URL() string { return "nats://" + s.HostPort() }

// HostPort is the server's client address, 127.0.0.1:PORT.
func (s *Server) HostPort() string { return hostPort(s.port) }

// Stop shuts the server down (SIGTERM, after a SIGCONT should it be
// paused; SIGKILL if it has not exited within 10 s); its state stays on
// disk. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Terminate(10 * time.Second)
	}
}

// Restart starts a stopped server again on the same ports and store
// directory, or for the first time one that StartCluster held back (see
// WithHeldBack).
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Pause stops the server with SIGSTOP and returns once every thread of it
// has stopped: its connections stay open and nothing is answered until
// Resume.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	if p := s.running(); p == nil || !p.Pause() {
		t.Fatal("natstest: pause: the server process is not running")
	}
}

// Resume continues a paused server.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	if p := s.running(); p == nil || !p.Signal(syscall.SIGCONT) {
		t.Fatal("natstest: resume: the server process is not running")
	}
}

// CPU is the CPU time (user and system) the server's current process has
// used; 0 while stopped.
func (s *Server) CPU() time.Duration {
	p := s.running()
	if p == nil {
		return 0
	}
	return p.CPU()
}

// jsz is what the server's /jsz monitoring endpoint says of its
// JetStream: the meta group's leader as this server sees it, and each
// stream's.
type jsz struct {
	Meta *struct {
		Leader string `json:"leader"`
		Size   int    `json:"cluster_size"`
	} `json:"meta_cluster"`
	Accounts []struct {
		Streams []struct {
			Name    string `json:"name"`
			Cluster *struct {
				Leader string `json:"leader"`
			} `json:"cluster"`
		} `json:"stream_detail"`
	} `json:"account_details"`
}

// monitor GETs path from the server's monitoring endpoint and decodes the
// JSON answer into out, unless out is nil; a status other than 200 is an
// error.
func (s *Server) monitor(path string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+hostPort(s.mport)+path, nil)
	if err != nil {
		return err
	}
	resp, err := monitorClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// monitorClient keeps no connection open between requests, so that no
// connection outlives its server and its test.
var monitorClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func (s *Server) jsz() (jsz, error) {
	var j jsz
	err := s.monitor("/jsz?accounts=true&streams=true", &j)
	return j, err
}

// IsMetaLeader reports whether the server believes it leads the
// cluster's JetStream meta group.
func (s *Server) IsMetaLeader(t testing.TB) bool {
	t.Helper()
	j, err := s.jsz()
	if err != nil {
		t.Fatalf("natstest: server %s: %v", s.name, err)
	}
	return j.Meta != nil && j.Meta.Leader == s.name
}

// IsStreamLeader reports whether the server believes it leads the
// stream's raft group.
func (s *Server) IsStreamLeader(t testing.TB, stream string) bool {
	t.Helper()
	j, err := s.jsz()
	if err != nil {
		t.Fatalf("natstest: server %s: %v", s.name, err)
	}
	for _, a := range j.Accounts {
		for _, st := range a.Streams {
			if st.Name == stream && st.Cluster != nil && st.Cluster.Leader == s.name {
				return true
			}
		}
	}
	return false
}

// StepdownStream asks the stream's leader, through a connection to this
// server, to hand the stream's leadership to another replica.
func (s *Server) StepdownStream(t testing.TB, stream string) {
	t.Helper()
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatalf("natstest: stepdown: %v", err)
	}
	defer nc.Close()
	msg, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil, 10*time.Second)
	if err != nil {
		t.Fatalf("natstest: stepdown of stream %s: %v", stream, err)
	}
	var resp struct {
		Success bool `json:"success"`
		Error   *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		t.Fatalf("natstest: stepdown of stream %s: %v", stream, err)
	}
	if !resp.Success {
		t.Fatalf("natstest: stepdown of stream %s refused: %s", stream, msg.Data)
	}
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
// JetStream meta leader that every server follows (see WithHeldBack for
// the exception).
func StartCluster(t testing.TB, n int, opts ...ClusterOption) *Cluster {
	t.Helper()
	var cf clusterConfig
	for _, o := range opts {
		o(&cf)
	}
	bin := binary(t)
	c := &Cluster{}
	// Every server routes to every other, so the ports are picked first.
	for i := range n {
		dir := t.TempDir()
		c.Servers = append(c.Servers, &Server{t: t, bin: bin, name: fmt.Sprintf("n%d", i+1), dir: dir + "/store", log: dir + "/server.log",
			port: freePort(t), mport: freePort(t), cport: freePort(t), cluster: c})
	}
	if cf.partitions {
		tp := toxiproc.StartTest(t)
		c.proxies = make([][]*toxiproc.Proxy, n)
		for i := range n {
			c.proxies[i] = make([]*toxiproc.Proxy, n)
			for j, to := range c.Servers {
				if i != j {
					c.proxies[i][j] = tp.Proxy(t, fmt.Sprintf("route-%d-%d", i, j), hostPort(to.cport))
				}
			}
		}
	}
	// A clustered server takes connections only once it has met its
	// peers: all start before any is waited for.
	for i, s := range c.Servers {
		t.Cleanup(s.Stop)
		if !cf.held[i] {
			if err := s.launch(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, s := range c.Servers {
		if !cf.held[i] {
			if err := s.waitReady(); err != nil {
				t.Fatalf("natstest: server %s: %v", s.name, err)
			}
		}
	}
	if len(cf.held) == 0 {
		c.waitMetaLeader(t)
	}
	return c
}

// waitMetaLeader waits until every server names the same meta leader of
// a group of all the servers, and answers its health check (JetStream
// current with that leader).
func (c *Cluster) waitMetaLeader(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		state, ok := c.metaState()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("natstest: cluster not ready within %v: %s", readyTimeout, state)
		}
		<-tick.C
	}
}

func (c *Cluster) metaState() (string, bool) {
	var state []string
	leaders := map[string]bool{}
	ok := true
	for _, s := range c.Servers {
		j, err := s.jsz()
		if err != nil || j.Meta == nil {
			state = append(state, fmt.Sprintf("%s: %v", s.name, err))
			ok = false
			continue
		}
		herr := s.monitor("/healthz", nil)
		state = append(state, fmt.Sprintf("%s: leader %q of %d, health %v", s.name, j.Meta.Leader, j.Meta.Size, herr))
		leaders[j.Meta.Leader] = true
		if j.Meta.Leader == "" || j.Meta.Size != len(c.Servers) || herr != nil {
			ok = false
		}
	}
	return strings.Join(state, "; "), ok && len(leaders) == 1
}

// URLs are the servers' client URLs, comma-separated, for nats.Connect.
func (c *Cluster) URLs() string {
	var out []string
	for _, s := range c.Servers {
		out = append(out, s.URL())
	}
	return strings.Join(out, ",")
}

// routes are the cluster addresses (host:port) of the servers other than
// self, through self's proxies where the cluster has them.
func (c *Cluster) routes(self *Server) []string {
	var out []string
	for i, s := range c.Servers {
		switch {
		case s == self:
		case c.proxies != nil:
			out = append(out, c.proxies[c.index(self)][i].Listen)
		default:
			out = append(out, hostPort(s.cport))
		}
	}
	return out
}

func (c *Cluster) index(s *Server) int {
	for i, o := range c.Servers {
		if o == s {
			return i
		}
	}
	return -1
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

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

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

// logTail is the end of a server's log, for a failure message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "nats-server log:\n" + strings.Join(lines, "\n")
}

// LeakOptions are the goleak options of a package whose tests run NATS
// stores. nats.go v1.55.0's ordered consumer, stopped while it replaces
// its inner consumer after a reconnect, starts a new pull iterator that
// nothing stops; its two goroutines outlive the consumer, the Store and
// the connection. The Store no longer waits for them (its watch ends with
// the Store), so they are the dependency's and are ignored by name; every
// other goroutine still fails the test.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*pullSubscription).pullMessages"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*pullConsumer).Messages.func2"),
	}
}
