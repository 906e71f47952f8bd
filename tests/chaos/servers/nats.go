package servers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tenure-go/tenure/backends"
	natsstore "github.com/tenure-go/tenure/backends/nats"
	"github.com/tenure-go/tenure/internal/testrig/natsproc"
	"github.com/tenure-go/tenure/internal/testrig/toxiproc"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
)

// natsBucket is the key-value bucket the workers' claims live in.
const natsBucket = "chaos"

// natsServer is one nats-server process (package natsproc), on fixed
// ports and a store directory kept across restarts.
type natsServer struct {
	server
	cfg natsproc.Config
	bin string
}

func (s *natsServer) start() error {
	argv, err := s.cfg.Argv(s.bin)
	if err != nil {
		return err
	}
	return s.server.start(argv)
}

// waitReady waits until the server takes client connections.
func (s *natsServer) waitReady(d time.Duration) error {
	if err := natsproc.WaitReady(s.cfg.Client, s.proc(), d); err != nil {
		return fmt.Errorf("chaos: %s: %w", s.name, err)
	}
	return nil
}

func (s *natsServer) stop() { s.server.stop(10 * time.Second) }

// natsBackend is n nats-server processes with JetStream (a cluster when
// n > 1) and one bucket with n replicas. Each worker reaches every server
// through a proxy of its own. In a cluster, server i dials server j
// through a proxy of its own (routes[i][j]) and advertises a closed port,
// so that routes learnt by gossip fail and every route between two
// servers runs through the proxies of that pair: cutting both ways of
// every proxy touching a server cuts it off its peers while its clients
// still reach it (a two-way partition, where etcd3's isolate is one-way).
type natsBackend struct {
	servers []*natsServer
	clients *proxies
	routes  [][]*toxiproc.Proxy // nil for one server
}

func StartNats(api *toxiproc.Server, dir, name string, n, workers int) (*natsBackend, error) {
	bin, err := natsproc.Tool.Path()
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	b := &natsBackend{}
	var releases []func()
	defer func() { // on the error paths
		for _, r := range releases {
			r()
		}
	}()
	var clusterAddrs []string
	for i := range n {
		client, r1, err1 := reserve()
		if err1 == nil {
			releases = append(releases, r1)
		}
		cfg := natsproc.Config{Name: fmt.Sprintf("n%d", i), Dir: filepath.Join(dir, fmt.Sprintf("nats%d", i)), Client: client, Closed: n > 1}
		var err2 error
		if n > 1 {
			var r2 func()
			cfg.Cluster, r2, err2 = reserve()
			if err2 == nil {
				releases = append(releases, r2)
			}
		}
		if err := errors.Join(err1, err2); err != nil {
			b.Close()
			return nil, err
		}
		// Fresh: a failed start before this one may have left a server
		// of another cluster there.
		if err := os.RemoveAll(cfg.Dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, err
		}
		clusterAddrs = append(clusterAddrs, cfg.Cluster)
		b.servers = append(b.servers, &natsServer{server: server{name: cfg.Name, logPath: filepath.Join(dir, "procs.log")}, cfg: cfg, bin: bin})
	}
	if n > 1 {
		b.routes = make([][]*toxiproc.Proxy, n)
		for i := range n {
			b.routes[i] = make([]*toxiproc.Proxy, n)
			for j := range n {
				if i == j {
					continue
				}
				px, err := api.CreateProxy(fmt.Sprintf("%s-route%d-%d", name, i, j), clusterAddrs[j])
				if err != nil {
					b.Close()
					return nil, err
				}
				b.routes[i][j] = px
				b.servers[i].cfg.Routes = append(b.servers[i].cfg.Routes, px.Listen)
			}
		}
	}
	for _, r := range releases {
		r()
	}
	releases = nil
	// A clustered server takes connections once it has met its peers:
	// every server starts before any is waited for.
	for _, s := range b.servers {
		if err := s.start(); err != nil {
			b.Close()
			return nil, err
		}
	}
	for _, s := range b.servers {
		if err := s.waitReady(60 * time.Second); err != nil {
			b.Close()
			return nil, err
		}
	}
	var ups []string
	for _, s := range b.servers {
		ups = append(ups, s.cfg.Client)
	}
	if err := createBucket(ups, n); err != nil {
		b.Close()
		return nil, err
	}
	if b.clients, err = newProxies(api, name, workers, ups); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// createBucket creates the workers' bucket with n replicas, once, before
// the workers open it. Opening asks again while the cluster has no meta
// leader, each request dropped meanwhile after a second rather than the
// store's default timeout. Just after its election the leader may not know
// its peers yet and refuse to place the replicas ("no suitable peers for
// placement", not an error the store asks again on, since it is also the
// answer for more replicas than servers): a refusal that is not fatal is
// tried again.
func createBucket(servers []string, n int) error {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = "nats://" + s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		err := createBucketOnce(ctx, strings.Join(urls, ","), n)
		if err == nil {
			return nil
		}
		if backends.Classify(err) == backends.ClassFatal {
			return fmt.Errorf("chaos: create the NATS bucket: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: create the NATS bucket: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// createBucketOnce opens the workers' bucket over a connection of its
// own, creating it with n replicas if it is missing, and closes both.
func createBucketOnce(ctx context.Context, urls string, n int) error {
	nc, err := nats.Connect(urls, nats.Timeout(time.Second), nats.NoEcho())
	if err != nil {
		return fmt.Errorf("connect %s: %w: %w", urls, backends.ErrUnavailable, err)
	}
	defer nc.Close()
	s, err := natsstore.New(ctx, nc, natsBucket, natsstore.WithCreate(n), natsstore.WithTimeout(time.Second))
	if err != nil {
		return err
	}
	return s.Close()
}

// natsElection is the longest a nats-server's raft group waits without
// hearing its leader before it campaigns (nats-server's maximum election
// timeout, which it does not let a user change): after a fault that took
// a stream's or the cluster's leader away, the cluster may be without one
// that long.
const natsElection = 9 * time.Second

// settle: a worker's client, once refused by a killed server or a proxy
// that resets, tries that server again only after its reconnect wait; in
// a cluster, a new leader may also take a raft election timeout to come.
func (b *natsBackend) settle(time.Duration) time.Duration {
	d := nats.DefaultReconnectWait + nats.DefaultReconnectJitter
	if len(b.servers) > 1 {
		d += natsElection
	}
	return d
}

func (b *natsBackend) Kinds() []string {
	k := append(append([]string(nil), schedule.WorkerKinds...), schedule.FLatency, schedule.FPartition, schedule.FServerPause, schedule.FServerKill)
	if len(b.servers) > 1 {
		k = append(k, schedule.FIsolate)
	}
	return k
}

func (b *natsBackend) URL(w int) string {
	return "nats://" + strings.Join(b.clients.addrs(w), ",") + "/" + natsBucket
}

func (b *natsBackend) Apply(f schedule.Fault, holder int) (func(), string, bool) {
	switch f.Kind {
	case schedule.FLatency, schedule.FPartition:
		return b.clients.fault(f, holder)
	case schedule.FServerPause:
		return b.servers[int(f.Pick)%len(b.servers)].pause()
	case schedule.FServerKill:
		s := b.servers[int(f.Pick)%len(b.servers)]
		return s.kill(func() {
			err := s.start()
			if err == nil {
				err = s.waitReady(60 * time.Second)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "chaos: restart %s: %v\n", s.cfg.Name, err)
			}
		})
	case schedule.FIsolate:
		i := int(f.Pick) % len(b.servers)
		var touching []*toxiproc.Proxy
		for j := range b.servers {
			if j != i {
				touching = append(touching, b.routes[i][j], b.routes[j][i])
			}
		}
		return netFault(touching, schedule.Fault{N: f.N, Kind: schedule.FPartition, Mode: "blackhole"}), b.servers[i].cfg.Name, true
	}
	return nil, "", false
}

func (b *natsBackend) Close() {
	if b.clients != nil {
		b.clients.close()
	}
	// Each server takes about a second to shut JetStream down: together.
	var wg sync.WaitGroup
	for _, s := range b.servers {
		wg.Go(s.stop)
	}
	wg.Wait()
	for _, row := range b.routes {
		for _, px := range row {
			if px != nil {
				_ = px.Delete()
			}
		}
	}
}
