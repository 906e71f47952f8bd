// Package natsproc runs one nats-server with JetStream, embedded, as a
// process of its own: a program (the fault campaign, a test binary)
// re-executes itself with the arguments Config.Args makes, and the child
// calls Main. A server in a process of its own can be paused with SIGSTOP
// and killed with SIGKILL, which a server inside the caller cannot.
//
// The server listens on fixed addresses and keeps its JetStream state in
// a fixed directory, so a restart is the same server to its clients and
// peers. It syncs every write to disk (sync always), as the NATS store's
// documentation asks of production servers.
package natsproc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ReadyFile is created in a server's directory once it takes
// connections, so the parent can wait for a start or a restart without a
// client. Main removes it before it starts the server.
const ReadyFile = "nats-ready"

// readyWithin bounds a start on busy cores.
const readyWithin = 60 * time.Second

// Config is one server.
type Config struct {
	Name   string // server name, unique in a cluster
	Dir    string // JetStream store directory, kept across restarts
	Client string // host:port clients dial
	// Cluster is the host:port the server takes routes on; empty for a
	// server alone.
	Cluster string
	// Routes are the host:port the server dials to reach its peers: their
	// cluster addresses, or proxies in front of them.
	Routes []string
	// Closed makes the server advertise a closed port to its peers, so
	// that they reach it only through the configured routes (proxies
	// that can cut it off); a route learnt by gossip then fails.
	Closed bool
}

// Options are the nats-server options of c.
func (c Config) Options() (*server.Options, error) {
	host, port, err := splitPort(c.Client)
	if err != nil {
		return nil, fmt.Errorf("natsproc: client address: %w", err)
	}
	o := &server.Options{
		ServerName: c.Name,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   c.Dir,
		SyncAlways: true,
		NoLog:      true,
		NoSigs:     true,
	}
	if c.Cluster == "" {
		return o, nil
	}
	chost, cport, err := splitPort(c.Cluster)
	if err != nil {
		return nil, fmt.Errorf("natsproc: cluster address: %w", err)
	}
	o.Cluster = server.ClusterOpts{Name: "tenure", Host: chost, Port: cport}
	// Clients stay on the server they dialled.
	o.Cluster.NoAdvertise = true
	if c.Closed {
		o.Cluster.Advertise = "127.0.0.1:1"
	}
	for _, r := range c.Routes {
		o.Routes = append(o.Routes, &url.URL{Scheme: "nats", Host: r})
	}
	return o, nil
}

func splitPort(hostport string) (string, int, error) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", p, err)
	}
	return host, port, nil
}

// Args are the arguments Main reads c from.
func (c Config) Args() []string {
	args := []string{"-name", c.Name, "-dir", c.Dir, "-client", c.Client}
	if c.Cluster != "" {
		args = append(args, "-cluster", c.Cluster, "-routes", strings.Join(c.Routes, ","))
	}
	if c.Closed {
		args = append(args, "-closed")
	}
	return args
}

func parseArgs(args []string) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
	fs.StringVar(&c.Name, "name", "n1", "server name")
	fs.StringVar(&c.Dir, "dir", "", "JetStream store directory")
	fs.StringVar(&c.Client, "client", "", "client host:port")
	fs.StringVar(&c.Cluster, "cluster", "", "cluster host:port (empty: no cluster)")
	routes := fs.String("routes", "", "comma-separated host:port of the peers' routes")
	fs.BoolVar(&c.Closed, "closed", false, "advertise a closed cluster port to peers")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.Dir == "" || c.Client == "" {
		return c, errors.New("natsproc: -dir and -client are required")
	}
	if *routes != "" {
		c.Routes = strings.Split(*routes, ",")
	}
	return c, nil
}

// Main runs the server args describe until SIGTERM or SIGINT, writing
// ReadyFile into its directory once it takes connections.
func Main(args []string) error {
	c, err := parseArgs(args)
	if err != nil {
		return err
	}
	o, err := c.Options()
	if err != nil {
		return err
	}
	ready := filepath.Join(c.Dir, ReadyFile)
	_ = os.Remove(ready)
	s, err := server.NewServer(o)
	if err != nil {
		return fmt.Errorf("natsproc: %w", err)
	}
	go s.Start()
	defer func() {
		s.Shutdown()
		s.WaitForShutdown()
	}()
	if !s.ReadyForConnections(readyWithin) {
		return fmt.Errorf("natsproc: server %s not ready within %v", c.Name, readyWithin)
	}
	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	<-ctx.Done()
	return nil
}
