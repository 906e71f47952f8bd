package shards_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/shardstest"
	"github.com/tenure-go/tenure/shards"
)

// The environment of a member process (the test binary re-executed).
const (
	childEnv   = "TENURE_SHARDS_CHILD" // the member's identity
	childDir   = "TENURE_SHARDS_DIR"
	childCount = "TENURE_SHARDS_COUNT" // the group's shard count; procCount if unset
	childQuiet = "TENURE_SHARDS_QUIET" // if set, the member reports no actions
	procCount  = 16
)

// mono reads CLOCK_MONOTONIC, which every process of a host shares: the
// member processes report their actions and deadlines on it.
func mono() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

// runChild is a member process: a Member over the filestore in childDir,
// which stops when its stdin closes. For every owned shard it reports, on
// stdout, "begin <shard> <token>", then every 20 ms while its Term says it
// owns the shard "act <shard> <token> <now> <deadline>" (CLOCK_MONOTONIC
// nanoseconds; not with childQuiet set), and "end <shard> <token>" once the
// term's context is done.
func runChild() error {
	count := procCount
	if c := os.Getenv(childCount); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil {
			return err
		}
		count = n
	}
	quiet := os.Getenv(childQuiet) != ""
	store, err := filestore.Open(context.Background(), os.Getenv(childDir))
	if err != nil {
		return err
	}
	defer store.Close()
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	var m *shards.Member
	m, err = shards.New(store, shards.Config{
		Group:    "g",
		Identity: os.Getenv(childEnv),
		Count:    count,
		Elector:  liveTiming(),
		OnAcquired: func(ctx context.Context, shard int, term elector.Term) {
			say("begin %d %d", shard, term.Token)
			if quiet {
				<-ctx.Done()
				say("end %d %d", shard, term.Token)
				return
			}
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for ctx.Err() == nil {
				now := mono()
				if t, ok := m.Term(shard); ok && t.Token == term.Token {
					deadline := now + time.Until(t.Deadline)
					say("act %d %d %d %d", shard, term.Token, now, deadline)
				}
				select {
				case <-ctx.Done():
				case <-tick.C:
				}
			}
			say("end %d %d", shard, term.Token)
		},
	})
	if err != nil {
		return err
	}
	if err := m.Start(context.Background()); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return m.Stop(ctx)
}

// proc is a member process.
type proc struct {
	id    string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when its stdout has ended
}

// procs runs member processes and checks what they report.
type procs struct {
	t     testing.TB
	dir   string
	count int           // the group's shard count
	env   []string      // added to the members' environment
	sig   chan struct{} // receives (without blocking) after each line
	mu    sync.Mutex
	cur   map[int]held        // per shard, the highest token begun; guarded by mu
	acts  map[int][]actReport // per shard, every action; guarded by mu
	all   map[string]*proc    // guarded by mu
}

// newProcs returns a procs for a group of count shards over a new
// directory.
func newProcs(t testing.TB, count int, env ...string) *procs {
	return &procs{t: t, dir: t.TempDir(), count: count, env: env, sig: make(chan struct{}, 1), cur: map[int]held{}, acts: map[int][]actReport{}, all: map[string]*proc{}}
}

type held struct {
	id    string
	token int64
	ended bool
	at    time.Time // when its begin was read
}

type actReport struct {
	id            string
	token         int64
	now, deadline time.Duration
}

func (p *procs) start(id string) *proc {
	p.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), childEnv+"="+id, childDir+"="+p.dir, childCount+"="+strconv.Itoa(p.count), "GORACE="+gorace)
	cmd.Env = append(cmd.Env, p.env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	c := &proc{id: id, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	p.mu.Lock()
	p.all[id] = c
	p.mu.Unlock()
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.line(id, sc.Text())
		}
	}()
	p.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = stdin.Close()
		<-c.done
		_ = cmd.Wait()
	})
	return c
}

func (p *procs) line(id, l string) {
	f := strings.Fields(l)
	num := func(i int) int64 {
		if i >= len(f) {
			p.t.Errorf("%s: short line %q", id, l)
			return 0
		}
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			p.t.Errorf("%s: bad line %q", id, l)
		}
		return n
	}
	shard, token := int(num(1)), num(2)
	at := time.Now()
	p.mu.Lock()
	switch f[0] {
	case "begin":
		if token > p.cur[shard].token {
			p.cur[shard] = held{id: id, token: token, at: at}
		}
	case "act":
		p.acts[shard] = append(p.acts[shard], actReport{id: id, token: token, now: time.Duration(num(3)), deadline: time.Duration(num(4))})
	case "end":
		if c := p.cur[shard]; c.token == token {
			c.ended = true
			p.cur[shard] = c
		}
	default:
		p.t.Errorf("%s: unknown line %q", id, l)
	}
	p.mu.Unlock()
	select {
	case p.sig <- struct{}{}:
	default:
	}
}

// settled reports whether every shard's newest term belongs to the member
// the placement over ids names and has not ended.
func (p *procs) settled(ids ...string) bool {
	want := shards.Place(p.count, ids)
	p.mu.Lock()
	defer p.mu.Unlock()
	for s, id := range want {
		if c := p.cur[s]; c.id != id || c.ended {
			return false
		}
	}
	return true
}

// await waits for settled(ids), woken by the members' reports.
func (p *procs) await(what string, ids ...string) time.Duration {
	p.t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for !p.settled(ids...) {
		select {
		case <-p.sig:
		case <-ctx.Done():
			p.mu.Lock()
			cur := fmt.Sprint(p.cur)
			p.mu.Unlock()
			p.t.Fatalf("%s: not settled over %v: newest terms %s", what, ids, cur)
		}
	}
	return time.Since(start)
}

// check fails the test if two terms of one shard acted at once: an action
// under a token at or after the first action under a higher token. A
// member acts only while its Term says it owns the shard, so each action
// also came before its own deadline (checked too).
func (p *procs) check() {
	p.mu.Lock()
	defer p.mu.Unlock()
	checked := 0
	for shard, acts := range p.acts {
		lastAct := map[int64]actReport{}
		firstAct := map[int64]actReport{}
		for _, a := range acts {
			if a.now >= a.deadline {
				p.t.Errorf("shard %d: %s acted under token %d at %v, past its deadline %v", shard, a.id, a.token, a.now, a.deadline)
			}
			if l, ok := lastAct[a.token]; !ok || a.now > l.now {
				lastAct[a.token] = a
			}
			if f, ok := firstAct[a.token]; !ok || a.now < f.now {
				firstAct[a.token] = a
			}
		}
		for t1, a1 := range lastAct {
			for t2, a2 := range firstAct {
				if t2 <= t1 {
					continue
				}
				checked++
				if a2.now <= a1.now {
					p.t.Errorf("shard %d: %s acted under token %d at %v, while %s still acted under token %d until %v", shard, a2.id, t2, a2.now, a1.id, t1, a1.now)
				}
			}
		}
	}
	p.t.Logf("checked %d pairs of terms", checked)
}

// TestProcessesKilledAndStopped runs member processes on one filestore: one
// is killed with SIGKILL, one stopped with SIGSTOP past its TTL, one added
// and one stopped gracefully; each time every shard is owned again by the
// member the placement names, and no two terms of a shard ever acted at once
// by their own deadlines.
func TestProcessesKilledAndStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("starts member processes")
	}
	p := newProcs(t, procCount)
	defer p.check()
	for _, id := range []string{"a", "b", "c"} {
		p.start(id)
	}
	t.Logf("settled in %v", p.await("start", "a", "b", "c"))

	b := p.all["b"]
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("after SIGKILL, owned elsewhere in %v (TTL %v)", p.await("kill", "a", "c"), liveTiming().TTL)

	p.start("d")
	t.Logf("a new member settled in %v", p.await("join", "a", "c", "d"))

	c := p.all["c"]
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Logf("after SIGSTOP, owned elsewhere in %v", p.await("stop", "a", "d"))
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t.Logf("after SIGCONT, settled in %v", p.await("continue", "a", "c", "d"))

	a := p.all["a"]
	_ = a.stdin.Close()
	t.Logf("after a graceful stop, settled in %v", p.await("leave", "c", "d"))
	<-a.done
	if err := a.cmd.Wait(); err != nil {
		t.Errorf("member a stopped with %v", err)
	}
}

// BenchmarkLeaveProcesses is BenchmarkLeave/filestore with each member its
// own process, as in a deployment: four member processes on one
// filestore, 256 shards; b.N times one of them closes its stdin (it stops
// gracefully) and the time from then until each of its shards has begun
// at another member (its report read here) is recorded; then it is
// started again (untimed). It reports the median and the maximum over all
// those shards (handover-ms, handover-max-ms) and over the leaves of the
// time until all of the leaver's shards had begun elsewhere (all-owned-ms,
// all-owned-max-ms), and the shards the leaver owned (shards/leave). The
// four processes share the host's cores with one another and with this
// one, which reads their reports.
func BenchmarkLeaveProcesses(b *testing.B) {
	const count = 256
	p := newProcs(b, count, childQuiet+"=1")
	ids := []string{"m0", "m1", "m2", "m3"}
	for _, id := range ids {
		p.start(id)
	}
	p.await("start", ids...)
	var all, whole []time.Duration
	owned := 0
	b.ResetTimer()
	for i := range b.N {
		id := ids[i%len(ids)]
		rest := slices.DeleteFunc(slices.Clone(ids), func(x string) bool { return x == id })
		var had []int
		for s, owner := range shards.Place(count, ids) {
			if owner == id {
				had = append(had, s)
			}
		}
		leaver := p.all[id]
		start := time.Now()
		_ = leaver.stdin.Close()
		p.await("leave", rest...)
		p.mu.Lock()
		var last time.Duration
		for _, s := range had {
			d := p.cur[s].at.Sub(start)
			all = append(all, d)
			last = max(last, d)
		}
		p.mu.Unlock()
		if len(had) > 0 {
			whole = append(whole, last) // as BenchLeave: a leave with no shards has no all-owned time
		}
		owned += len(had)
		b.StopTimer()
		<-leaver.done
		if err := leaver.cmd.Wait(); err != nil {
			b.Fatalf("member %s stopped with %v", id, err)
		}
		p.start(id)
		p.await("rejoin", ids...)
		b.StartTimer()
	}
	shardstest.ReportLeaves(b, all, whole)
	b.ReportMetric(float64(owned)/float64(b.N), "shards/leave")
}
