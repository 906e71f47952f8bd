package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/internal/testrig/etcdproc"
)

// startTries bounds the attempts to start a cluster: its ports are picked
// free and then bound by etcd, and another process may take one in between.
const startTries = 3

// pollInterval is how often WaitLeader looks at the members.
const pollInterval = 10 * time.Millisecond

// Cluster is a multi-member etcd cluster for fault tests, each member a
// process of its own: each member's clients reach it through a bridge that
// can blackhole their traffic, members can be cut off from each other,
// stopped and restarted. Members use the same fast timings as Start (10 ms
// ticks, 100 ms election timeout, no fsync, 1 s minimum lease).
// Partitions are made in the peer bridges, which tell the member that
// dialed a connection by the process that owns its socket.
//
// Its methods are called from the test goroutine; Endpoints, Client and
// Leader are also safe from others.
//
// StartCluster runs the etcd v3.6 binary (as Start does);
// StartProcessCluster runs another.
type Cluster struct {
	members []*member

	mu  sync.Mutex
	cut map[int]bool // guarded by mu; the partitioned members of a process cluster
}

type member struct {
	name       string
	dir        string
	client     url.URL // the member's own client URL
	peer       url.URL // where the member listens for its peers
	peerBridge *bridge // what its peers dial: it forwards to peer
	initial    string  // the --initial-cluster of every member
	bridge     *bridge // what its clients dial: it forwards to client
	bin        string  // the etcd binary
	log        string  // the member's log file

	mu     sync.Mutex
	proc   *childproc.Process // nil while stopped
	status *clientv3.Client   // a client of the member's own URL, for Leader; closed by close
}

// StartCluster starts an n-member cluster, waits until it has a leader and
// every member serves, and stops it at cleanup.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("etcdtest: cluster of %d members", n)
	}
	return startClusterTries(t, binary36(t), n)
}

// StartProcessCluster is StartCluster with members run from the etcd
// binary bin, killed at cleanup (and by Pdeathsig if the test process
// dies).
func StartProcessCluster(t testing.TB, bin string, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("etcdtest: cluster of %d members", n)
	}
	return startClusterTries(t, bin, n)
}

func startClusterTries(t testing.TB, bin string, n int) *Cluster {
	t.Helper()
	var err error
	for try := 0; try < startTries; try++ {
		var c *Cluster
		c, err = startCluster(t, bin, n)
		if err == nil {
			t.Cleanup(c.close)
			return c
		}
	}
	t.Fatalf("etcdtest: start cluster: %v", err)
	return nil
}

func startCluster(t testing.TB, bin string, n int) (*Cluster, error) {
	c := &Cluster{}
	var initial []string
	for i := 0; i < n; i++ {
		dir := t.TempDir()
		m := &member{name: fmt.Sprintf("m%d", i), dir: filepath.Join(dir, "data"), bin: bin, log: filepath.Join(dir, "etcd.log")}
		clientPort, err := etcdproc.FreePort()
		if err != nil {
			return nil, err
		}
		peerPort, err := etcdproc.FreePort()
		if err != nil {
			return nil, err
		}
		m.client = url.URL{Scheme: "http", Host: clientPort}
		m.peer = url.URL{Scheme: "http", Host: peerPort}
		// Peers talk through a bridge too, so that closing the cluster can
		// cut every peer connection at once: etcd leaves a peer connection
		// that is still busy open when it stops, and with it goroutines.
		if m.peerBridge, err = newBridge(peerPort); err != nil {
			c.close()
			return nil, err
		}
		initial = append(initial, m.name+"=http://"+m.peerBridge.addr())
		c.members = append(c.members, m)
	}
	for j, m := range c.members {
		m.initial = strings.Join(initial, ",")
		m.peerBridge.mu.Lock()
		m.peerBridge.admit = c.admitPeer(j)
		m.peerBridge.mu.Unlock()
	}
	errs := make(chan error, n)
	for _, m := range c.members {
		go func() { errs <- m.start(false) }()
	}
	var all []error
	for range c.members {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		c.close()
		return nil, err
	}
	for _, m := range c.members {
		b, err := newBridge(m.client.Host)
		if err != nil {
			c.close()
			return nil, err
		}
		m.bridge = b
	}
	return c, nil
}

// start starts the member and waits until it serves (which needs a quorum:
// the first start of a cluster starts every member at once).
func (m *member) start(restart bool) error {
	state := "new"
	if restart {
		state = "existing"
	}
	client := m.client.String()
	proc, err := etcdproc.Run(m.bin, m.log, []string{
		"--name", m.name,
		"--data-dir", m.dir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", m.peer.String(),
		"--initial-advertise-peer-urls", "http://" + m.peerBridge.addr(),
		"--initial-cluster", m.initial,
		"--initial-cluster-token", "etcdtest",
		"--initial-cluster-state", state,
		// Elections and leader changes are logged at info: Describe's
		// log tails tell a failing fault test what the cluster went
		// through.
		"--log-level", "info",
	}, true)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.proc = proc
	m.mu.Unlock()
	if err := etcdproc.WaitReady(m.bin, client, proc); err != nil {
		m.stop()
		return fmt.Errorf("member %s: %w\n%s", m.name, err, etcdproc.LogTail(m.log))
	}
	return nil
}

// stop kills the member, like a crash: a leader does not hand its
// leadership over first (which, when all members stop together, waits for a
// transfer that cannot happen).
func (m *member) stop() {
	m.mu.Lock()
	p := m.proc
	m.proc = nil
	m.mu.Unlock()
	if p != nil {
		etcdproc.Kill(p)
	}
}

// pid is the process ID of a running process member, else 0.
func (m *member) pid() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc == nil {
		return 0
	}
	return m.proc.Pid()
}

// running reports whether the member runs.
func (m *member) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc != nil
}

// leaderOf returns the raft IDs of the member and of the leader it knows
// (0 if none); ok is false if it is stopped or does not answer.
func (m *member) leaderOf() (self, leader uint64, ok bool) {
	resp, err := m.statusOf()
	if err != nil {
		return 0, 0, false
	}
	return resp.Header.MemberId, resp.Leader, true
}

// statusOf asks the member, on its own URL, for its status.
func (m *member) statusOf() (*clientv3.StatusResponse, error) {
	if !m.running() {
		return nil, errors.New("stopped")
	}
	m.mu.Lock()
	if m.status == nil {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.client.String()}, DialTimeout: dialTimeout, Logger: zap.NewNop()})
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		m.status = cli
	}
	cli := m.status
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	return cli.Status(ctx, m.client.String())
}

// Describe tells, for a failing test's message, what each member says of
// the cluster (its raft ID, the leader it knows, its raft term and index,
// or why it does not answer) and the last lines of its log.
func (c *Cluster) Describe() string {
	var b strings.Builder
	for i, m := range c.members {
		c.mu.Lock()
		cut := c.cut[i]
		c.mu.Unlock()
		fmt.Fprintf(&b, "member %d (%s, partitioned %t): ", i, m.name, cut)
		if resp, err := m.statusOf(); err != nil {
			fmt.Fprintf(&b, "no status: %v\n", err)
		} else {
			fmt.Fprintf(&b, "id %x, leader %x, raft term %d, raft index %d\n", resp.Header.MemberId, resp.Leader, resp.RaftTerm, resp.RaftIndex)
		}
		b.WriteString(etcdproc.LogTail(m.log))
		b.WriteString("\n")
	}
	return b.String()
}

func (c *Cluster) close() {
	for _, m := range c.members {
		if m.peerBridge != nil {
			m.peerBridge.setRefuse(true)
		}
	}
	for _, m := range c.members {
		for _, b := range []*bridge{m.bridge, m.peerBridge} {
			if b != nil {
				b.close()
			}
		}
	}
	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.stop()
			m.mu.Lock()
			cli := m.status
			m.status = nil
			m.mu.Unlock()
			if cli != nil {
				cli.Close()
			}
		}()
	}
	wg.Wait()
}

// Size is the number of members.
func (c *Cluster) Size() int { return len(c.members) }

// Endpoints are the client URLs of member i, through its bridge.
func (c *Cluster) Endpoints(i int) []string {
	return []string{"http://" + c.members[i].bridge.addr()}
}

// AllEndpoints are the bridged client URLs of every member.
func (c *Cluster) AllEndpoints() []string {
	var eps []string
	for i := range c.members {
		eps = append(eps, c.Endpoints(i)...)
	}
	return eps
}

// Client returns a client of member i (through its bridge), closed at
// cleanup.
func (c *Cluster) Client(t testing.TB, i int) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(i), DialTimeout: dialTimeout, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcdtest: client of member %d: %v", i, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Leader is the index of the member that is the raft leader, as the
// running members see it, or -1 if none is.
func (c *Cluster) Leader() int {
	for i, m := range c.members {
		if self, leader, ok := m.leaderOf(); ok && self == leader {
			return i
		}
	}
	return -1
}

// WaitLeader waits until a running member leads and every running member
// knows it, and returns its index.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	tk := clock.New().Ticker(pollInterval)
	defer tk.Stop()
	for {
		if l := c.Leader(); l >= 0 && c.agree(l) {
			return l, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("etcdtest: no leader: %w", ctx.Err())
		case <-tk.C:
		}
	}
}

func (c *Cluster) agree(l int) bool {
	id, _, ok := c.members[l].leaderOf()
	if !ok {
		return false
	}
	for _, m := range c.members {
		if !m.running() {
			continue
		}
		if _, leader, ok := m.leaderOf(); !ok || leader != id {
			return false
		}
	}
	return true
}

// Blackhole makes member i's bridge drop everything its clients send and
// everything it answers, keeping their connections open: requests hang
// until their deadlines, like behind a broken network.
func (c *Cluster) Blackhole(i int) { c.members[i].bridge.setBlackhole(true) }

// Unblackhole restores member i's client traffic.
func (c *Cluster) Unblackhole(i int) { c.members[i].bridge.setBlackhole(false) }

// Partition cuts member i off from every other member (its clients still
// reach it): a minority member has no leader and refuses what needs one.
func (c *Cluster) Partition(i int) { c.partition(i, true) }

// Heal restores member i's links to every other member.
func (c *Cluster) Heal(i int) { c.partition(i, false) }

// Stop stops member i abruptly, as a crash would: its client and peer
// connections break at once, and a leader does not hand its leadership
// over. Its data is kept for Restart.
func (c *Cluster) Stop(i int) {
	m := c.members[i]
	// No peer request reaches a member while it stops.
	m.peerBridge.setRefuse(true)
	m.bridge.drop()
	m.peerBridge.drop()
	m.stop()
}

// Restart starts member i again (stopping it first if it runs) on the same
// ports and data, and waits until it serves.
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	c.Stop(i)
	m := c.members[i]
	m.peerBridge.setRefuse(false)
	if err := m.start(true); err != nil {
		t.Fatalf("etcdtest: restart member %d: %v", i, err)
	}
}

// bridge forwards TCP connections from its listener to a member's client
// address, and can drop their traffic.
type bridge struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup // the accept loop and every connection's copiers

	mu        sync.Mutex
	blackhole bool                  // guarded by mu
	refuse    bool                  // guarded by mu; close new connections at once
	conns     map[net.Conn]struct{} // guarded by mu; both ends of every connection
	closed    bool                  // guarded by mu
	// admit, if set, tells the member whose process dialed an accepted
	// connection, and whether it may pass (a process cluster's partitions).
	admit  func(in net.Conn) (src int, ok bool) // guarded by mu
	source map[net.Conn]int                     // guarded by mu; the dialing member of each admitted connection
}

func newBridge(target string) (*bridge, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bridge to %s: %w", target, err)
	}
	b := &bridge{target: target, ln: ln, conns: make(map[net.Conn]struct{}), source: make(map[net.Conn]int)}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

func (b *bridge) addr() string { return b.ln.Addr().String() }

func (b *bridge) setBlackhole(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.blackhole = on
}

func (b *bridge) setRefuse(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refuse = on
}

func (b *bridge) refusing() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refuse
}

func (b *bridge) dropping() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.blackhole
}

func (b *bridge) track(cs ...net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	for _, c := range cs {
		b.conns[c] = struct{}{}
	}
	return true
}

func (b *bridge) untrack(cs ...net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range cs {
		delete(b.conns, c)
		delete(b.source, c)
	}
}

// dropFrom closes every connection the bridge carries that member src
// dialed, or every connection if src is negative.
func (b *bridge) dropFrom(src int) {
	if src < 0 {
		b.drop()
		return
	}
	b.mu.Lock()
	var conns []net.Conn
	for c, from := range b.source {
		if from == src {
			conns = append(conns, c)
		}
	}
	b.mu.Unlock()
	for _, c := range conns {
		c.Close() // its pipe closes the other end
	}
}

func (b *bridge) accept() {
	defer b.wg.Done()
	for {
		in, err := b.ln.Accept()
		if err != nil {
			return // closed
		}
		if b.refusing() {
			in.Close()
			continue
		}
		b.mu.Lock()
		admit := b.admit
		b.mu.Unlock()
		src := -1
		if admit != nil {
			var ok bool
			if src, ok = admit(in); !ok {
				in.Close() // partitioned: the dialer sees its connection reset
				continue
			}
		}
		out, err := net.Dial("tcp", b.target)
		if err != nil {
			in.Close() // the member is down: the client sees a refused connection
			continue
		}
		if !b.track(in, out) {
			in.Close()
			out.Close()
			return
		}
		if src >= 0 {
			b.mu.Lock()
			b.source[in] = src
			b.mu.Unlock()
		}
		b.wg.Add(2)
		go b.pipe(out, in)
		go b.pipe(in, out)
	}
}

// pipe copies src to dst, dropping what it reads while blackholed. When
// either side ends, it closes both, so its partner ends too.
func (b *bridge) pipe(dst, src net.Conn) {
	defer b.wg.Done()
	defer func() {
		src.Close()
		dst.Close()
		b.untrack(src, dst)
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !b.dropping() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or closed: the deferred closes end the partner too
		}
	}
}

// drop closes every connection the bridge carries; it keeps accepting new
// ones.
func (b *bridge) drop() {
	b.mu.Lock()
	conns := make([]net.Conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (b *bridge) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.ln.Close()
	b.drop()
	b.wg.Wait()
}
