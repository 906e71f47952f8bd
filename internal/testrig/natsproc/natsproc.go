// Package natsproc runs a nats-server with JetStream as a process of its
// own, for the NATS backend's tests and the fault campaign: a server in a
// process of its own can be paused with SIGSTOP and killed with SIGKILL.
// The binary is the nats-server command of a pinned tools module
// (server/build.sh), found through package toolbuild: the path
// TENURE_NATS_SERVER names, or the cached build.
//
// A server listens on fixed addresses and keeps its JetStream state in a
// fixed directory, so a restart is the same server to its clients and
// peers. It syncs every write to disk (sync always), as the NATS store's
// documentation asks of production servers.
//
// Not promised: a server's processes die with the thread that started
// them (package childproc), but the files they wrote stay.
package natsproc

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/internal/tools/toolbuild"
)

// Tool is the nats-server: TENURE_NATS_SERVER, or the binary
// server/build.sh builds and caches.
var Tool = toolbuild.Tool{Env: "TENURE_NATS_SERVER", Script: "internal/testrig/natsproc/server/build.sh"}

// Config is one server.
type Config struct {
	Name   string // server name, unique in a cluster
	Dir    string // JetStream store directory, kept across restarts
	Client string // host:port clients dial
	// Monitor is the host:port of the server's HTTP monitoring endpoint
	// (/jsz, /healthz, ...); empty for none.
	Monitor string
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

// ConfFile is where Argv writes the server's configuration: beside its
// store directory.
func (c Config) ConfFile() string { return strings.TrimRight(c.Dir, "/") + ".conf" }

// Conf is c in nats-server's configuration format.
func (c Config) Conf() string {
	var b strings.Builder
	fmt.Fprintf(&b, "server_name: %q\nlisten: %q\n", c.Name, c.Client)
	if c.Monitor != "" {
		fmt.Fprintf(&b, "http: %q\n", c.Monitor)
	}
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n  sync_interval: always\n}\n", c.Dir)
	if c.Cluster == "" {
		return b.String()
	}
	fmt.Fprintf(&b, "cluster {\n  name: tenure\n  listen: %q\n", c.Cluster)
	// Clients stay on the server they dialled.
	b.WriteString("  no_advertise: true\n")
	if c.Closed {
		b.WriteString("  advertise: \"127.0.0.1:1\"\n")
	}
	b.WriteString("  routes: [")
	for i, r := range c.Routes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", "nats://"+r)
	}
	b.WriteString("]\n}\n")
	return b.String()
}

// Argv writes c's configuration to ConfFile and returns the command line
// that runs the nats-server bin with it.
func (c Config) Argv(bin string) ([]string, error) {
	if c.Dir == "" || c.Client == "" {
		return nil, fmt.Errorf("natsproc: a server needs a store directory and a client address")
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("natsproc: %w", err)
	}
	if err := os.WriteFile(c.ConfFile(), []byte(c.Conf()), 0o644); err != nil {
		return nil, fmt.Errorf("natsproc: %w", err)
	}
	return []string{bin, "-c", c.ConfFile()}, nil
}

// WaitReady waits until the server p runs takes client connections at
// addr (it greets a connection with its INFO), at most d. It fails at
// once if p exits.
func WaitReady(addr string, p *childproc.Process, d time.Duration) error {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := greets(addr, time.Until(deadline))
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("natsproc: server at %s not ready within %v: %w", addr, d, err)
		}
		select {
		case <-p.Done():
			return fmt.Errorf("natsproc: server at %s exited before serving: %v", addr, p.Wait())
		case <-tick.C:
		}
	}
}

// greets dials addr and reads the server's INFO line.
func greets(addr string, d time.Duration) error {
	if d <= 0 {
		d = time.Millisecond
	}
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(min(d, 5*time.Second))); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "INFO ") {
		return fmt.Errorf("greeted with %q", line)
	}
	return nil
}
