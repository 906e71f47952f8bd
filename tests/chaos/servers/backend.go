package servers

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tenure-go/tenure/internal/testrig/toxiproc"
	"github.com/tenure-go/tenure/internal/tools/toolbuild"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
)

// Backend is one backend under test for one run: it starts what the store
// needs, gives each worker its store URL, and applies the faults that
// concern the backend itself or the network to it.
type Backend interface {
	// Kinds are the fault kinds a run on this backend draws from.
	Kinds() []string
	// URL is the store URL worker i opens.
	URL(worker int) string
	// Apply starts fault f on the target it picks, and returns what ends
	// it and the target's name; ok is false when no target fits now.
	Apply(f schedule.Fault, holder int) (heal func(), target string, ok bool)
	Close()
}

// settler is a backend that may take longer than TTL + 1s to serve again
// after a fault ends, for a reason of its own that the campaign accepts
// (a client's reconnect interval, a consensus election timeout, a
// follower's backoff). The run goes on up to that much longer after the
// last fault, until somebody acts, and the checker allows that much more
// for the first act after it. ttl is the run's claim TTL.
type settler interface {
	settle(ttl time.Duration) time.Duration
}

// SettleOf is b's settle time in a run whose claims have TTL ttl, 0 unless
// b is a settler.
func SettleOf(b Backend, ttl time.Duration) time.Duration {
	if s, ok := b.(settler); ok {
		return s.settle(ttl)
	}
	return 0
}

// reserve returns a loopback address with a port the kernel just handed
// out, and the listener that holds it until release is called. Servers
// are given fixed ports so that a restart keeps its address; holding the
// port until just before the server starts keeps the proxies started in
// between from being given it.
func reserve() (addr string, release func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	return ln.Addr().String(), func() { _ = ln.Close() }, nil
}

// freeAddr is reserve for a port used at once.
func freeAddr() (string, error) {
	addr, release, err := reserve()
	if err != nil {
		return "", err
	}
	release()
	return addr, nil
}

// FileBackend is a filestore in one directory. It has no server and no
// network: its faults are the workers' own.
type FileBackend struct{ Dir string }

func (b *FileBackend) Kinds() []string                                  { return schedule.WorkerKinds }
func (b *FileBackend) URL(int) string                                   { return "file://" + b.Dir }
func (b *FileBackend) Close()                                           {}
func (b *FileBackend) Apply(schedule.Fault, int) (func(), string, bool) { return nil, "", false }

// proxies puts a toxiproxy proxy between each worker and each server
// address, and applies latency and partitions to one worker's proxies.
type proxies struct {
	by [][]*toxiproc.Proxy // worker -> one proxy per upstream
}

func newProxies(api *toxiproc.Server, name string, workers int, upstreams []string) (*proxies, error) {
	p := &proxies{}
	for w := range workers {
		var row []*toxiproc.Proxy
		for u, up := range upstreams {
			px, err := api.CreateProxy(fmt.Sprintf("%s-w%d-%d", name, w, u), up)
			if err != nil {
				p.by = append(p.by, row)
				p.close()
				return nil, fmt.Errorf("chaos: proxy: %w", err)
			}
			row = append(row, px)
		}
		p.by = append(p.by, row)
	}
	return p, nil
}

func (p *proxies) addrs(w int) []string {
	var out []string
	for _, px := range p.by[w] {
		out = append(out, px.Listen)
	}
	return out
}

// toxicAll adds one toxic, in both directions, to every proxy of a row,
// and returns what removes it. A toxic the server refuses is reported on
// stderr: the fault is then weaker than drawn, and the run says so.
func toxicAll(row []*toxiproc.Proxy, name, typ string, attrs map[string]int) func() {
	for _, px := range row {
		if err := px.AddBoth(name, typ, attrs); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		}
	}
	return func() {
		for _, px := range row {
			if err := px.RemoveBoth(name); err != nil {
				fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
			}
		}
	}
}

// netFault applies a latency or partition fault to worker w's proxies.
func netFault(row []*toxiproc.Proxy, f schedule.Fault) func() {
	switch {
	case f.Kind == schedule.FLatency:
		ms := f.Lat.Milliseconds()
		return toxicAll(row, fmt.Sprintf("lat%d", f.N), "latency", map[string]int{"latency": int(ms), "jitter": int(ms / 4)})
	case f.Mode == "reset":
		// Connections are closed and new ones refused until the heal.
		for _, px := range row {
			if err := px.Disable(); err != nil {
				fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
			}
		}
		return func() {
			for _, px := range row {
				if err := px.Enable(); err != nil {
					fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
				}
			}
		}
	default:
		// Connections stay open; everything sent is dropped.
		return toxicAll(row, fmt.Sprintf("cut%d", f.N), "timeout", map[string]int{"timeout": 0})
	}
}

// fault applies a latency or partition fault to one worker's proxies:
// mostly the holder's, where a cut matters, else one the fault picks. It
// returns the heal and the target's name.
func (p *proxies) fault(f schedule.Fault, holder int) (func(), string, bool) {
	w := holder
	if w < 0 || f.Pick%3 == 0 {
		w = int(f.Pick/3) % len(p.by)
	}
	return netFault(p.by[w], f), fmt.Sprintf("w%d", w), true
}

func (p *proxies) close() {
	for _, row := range p.by {
		for _, px := range row {
			_ = px.Delete()
		}
	}
}

// member is one etcd server process, of the etcd v3.6 binary bin.
type member struct {
	server
	dir, client, peer, advPeer, cluster string
	bin                                 string
}

func (m *member) start() error {
	return m.server.start(etcdArgv(m.bin, m.name, m.dir, m.client, m.peer, m.advPeer, m.cluster))
}

// waitReady waits until the member is healthy.
func (m *member) waitReady(d time.Duration) error { return waitEtcd(&m.server, m.client, d) }

func (m *member) stop() { m.server.stop(10 * time.Second) }

// etcdBackend is a cluster of n etcd server processes; each worker reaches
// every member through a proxy of its own. With n > 1, members reach each
// other through a proxy in front of each member's peer port too, so a
// member can be cut off its peers.
type etcdBackend struct {
	members []*member
	clients *proxies
	peers   []*toxiproc.Proxy
	prefix  string
	query   string // appended to the workers' store URLs: "" or etcdShared
}

// EtcdShared is the store URL query that puts a worker's claims on one
// shared etcd lease per process (etcd.WithSharedLease).
const EtcdShared = "?lease=shared"

func StartEtcd(api *toxiproc.Server, dir, name string, n, workers int, query string) (*etcdBackend, error) {
	bin, err := toolbuild.Etcd36.Path()
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	b := &etcdBackend{prefix: "chaos", query: query}
	var (
		initial  []string
		releases []func()
	)
	defer func() { // on the error paths
		for _, r := range releases {
			r()
		}
	}()
	for i := range n {
		client, r1, err1 := reserve()
		if err1 == nil {
			releases = append(releases, r1)
		}
		peer, r2, err2 := reserve()
		if err2 == nil {
			releases = append(releases, r2)
		}
		if err := errors.Join(err1, err2); err != nil {
			b.Close()
			return nil, err
		}
		mdir := filepath.Join(dir, fmt.Sprintf("etcd%d", i))
		m := &member{server: server{name: fmt.Sprintf("m%d", i), logPath: filepath.Join(dir, "procs.log")},
			dir: mdir, client: client, peer: peer, advPeer: peer, bin: bin}
		if n > 1 {
			px, err := api.CreateProxy(fmt.Sprintf("%s-peer%d", name, i), peer)
			if err != nil {
				b.Close()
				return nil, err
			}
			b.peers = append(b.peers, px)
			m.advPeer = px.Listen
		}
		// Fresh: a failed start before this one may have left a member
		// of another cluster there.
		if err := os.RemoveAll(m.dir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(m.dir, 0o755); err != nil {
			return nil, err
		}
		initial = append(initial, fmt.Sprintf("%s=http://%s", m.name, m.advPeer))
		b.members = append(b.members, m)
	}
	for _, r := range releases {
		r()
	}
	releases = nil
	for _, m := range b.members {
		m.cluster = strings.Join(initial, ",")
		if err := m.start(); err != nil {
			b.Close()
			return nil, err
		}
	}
	for _, m := range b.members {
		if err := m.waitReady(60 * time.Second); err != nil {
			b.Close()
			return nil, err
		}
	}
	var ups []string
	for _, m := range b.members {
		ups = append(ups, m.client)
	}
	if b.clients, err = newProxies(api, name, workers, ups); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (b *etcdBackend) Kinds() []string {
	k := append(append([]string(nil), schedule.WorkerKinds...), schedule.FLatency, schedule.FPartition, schedule.FServerPause, schedule.FServerKill)
	if len(b.members) > 1 {
		k = append(k, schedule.FIsolate)
	}
	return k
}

func (b *etcdBackend) URL(w int) string {
	return "etcd://" + strings.Join(b.clients.addrs(w), ",") + "/" + b.prefix + b.query
}

func (b *etcdBackend) Apply(f schedule.Fault, holder int) (func(), string, bool) {
	switch f.Kind {
	case schedule.FLatency, schedule.FPartition:
		return b.clients.fault(f, holder)
	case schedule.FServerPause:
		return b.members[int(f.Pick)%len(b.members)].pause()
	case schedule.FServerKill:
		m := b.members[int(f.Pick)%len(b.members)]
		return m.kill(func() {
			if err := m.start(); err == nil {
				_ = m.waitReady(60 * time.Second)
			}
		})
	case schedule.FIsolate:
		i := int(f.Pick) % len(b.members)
		return netFault([]*toxiproc.Proxy{b.peers[i]}, schedule.Fault{N: f.N, Kind: schedule.FPartition, Mode: "blackhole"}), b.members[i].name, true
	}
	return nil, "", false
}

func (b *etcdBackend) Close() {
	if b.clients != nil {
		b.clients.close()
	}
	for _, m := range b.members {
		m.stop()
	}
	for _, px := range b.peers {
		_ = px.Delete()
	}
}
