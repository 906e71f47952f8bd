package allocator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/clocktest"
)

// Child parameters travel in the environment.
const (
	envDir    = "TENURE_ALLOCATOR_DIR"
	envMember = "TENURE_ALLOCATOR_MEMBER"
	envKeys   = "TENURE_ALLOCATOR_CHILD_KEYS" // "seed pool count"
	envTTL    = "TENURE_ALLOCATOR_TTL"
)

// runChild is one allocating process on a filestore: it allocates the keys
// its parameters name, prints "<key> <id>" for each and then "allocated",
// and on the line "release" on stdin releases them all, closes and prints
// "released". It runs on the real clock.
func runChild() error {
	s, err := filestore.Open(context.Background(), os.Getenv(envDir))
	if err != nil {
		return err
	}
	defer s.Close()
	ttl, err := time.ParseDuration(os.Getenv(envTTL))
	if err != nil {
		return err
	}
	a, err := New(s, Config{Prefix: testPrefix, Member: os.Getenv(envMember), TTL: ttl, GCInterval: -1})
	if err != nil {
		return err
	}
	ctx := context.Background()
	defer a.Close(ctx)
	var seed, pool, count int
	if _, err := fmt.Sscan(os.Getenv(envKeys), &seed, &pool, &count); err != nil {
		return err
	}
	keys := childKeys(seed, pool, count)
	out := bufio.NewWriter(os.Stdout)
	for _, k := range keys {
		id, _, err := a.Allocate(ctx, k)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s %d\n", k, id)
	}
	fmt.Fprintln(out, "allocated")
	if err := out.Flush(); err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "release" {
			continue
		}
		for _, k := range keys {
			if _, err := a.Release(ctx, k); err != nil {
				return err
			}
		}
		if err := a.Close(ctx); err != nil {
			return err
		}
		fmt.Println("released")
	}
	return in.Err()
}

// childKeys is the key list of one process: count keys drawn from a pool
// shared by every process, in an order of its own.
func childKeys(seed, pool, count int) []string {
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	var keys []string
	for _, j := range r.Perm(pool)[:count] {
		keys = append(keys, keyName(j))
	}
	return keys
}

// proc is a child process and its output.
type proc struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // closed at EOF
	ids   map[string]uint64
}

func startProc(t testing.TB, dir, member string, ttl time.Duration, seed, pool, count int) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", envDir+"="+dir, envMember+"="+member,
		envTTL+"="+ttl.String(), fmt.Sprintf("%s=%d %d %d", envKeys, seed, pool, count))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 64), ids: make(map[string]uint64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Signal(syscall.SIGKILL)
		for range p.lines {
		}
		<-done
		_ = cmd.Wait()
	})
	return p
}

// await reads lines up to want, recording "<key> <id>" lines.
func (p *proc) await(ctx context.Context, want string) {
	p.t.Helper()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("child exited before %q", want)
			}
			if l == want {
				return
			}
			f := strings.Fields(l)
			id, err := strconv.ParseUint(f[len(f)-1], 10, 64)
			if len(f) != 2 || err != nil {
				p.t.Fatalf("child printed %q", l)
			}
			p.ids[f[0]] = id
		case <-ctx.Done():
			p.t.Fatalf("child did not print %q in time", want)
		}
	}
}

func (p *proc) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("send %q: %v", line, err)
	}
}

// processCounts is the size of the process test: keys per process and the
// pool they are drawn from. TENURE_ALLOCATOR_KEYS raises it (the full size
// is 1000, from a pool of 1500).
func processCounts(t testing.TB) (count, pool int) {
	count = 150
	if testing.Short() {
		count = 50
	}
	if v := os.Getenv("TENURE_ALLOCATOR_KEYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("TENURE_ALLOCATOR_KEYS=%q: want a positive count", v)
		}
		count = n
	}
	return count, count * 3 / 2
}

// TestProcessesFilestore has eight real processes allocate heavily
// overlapping keys concurrently on one filestore: they agree on every key's
// ID, no two keys share one, and after they release everything garbage
// collection empties the store.
func TestProcessesFilestore(t *testing.T) {
	dir := t.TempDir()
	count, pool := processCounts(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const procs = 8
	ps := make([]*proc, procs)
	for i := range ps {
		ps[i] = startProc(t, dir, fmt.Sprintf("p%d", i), 30*time.Second, i, pool, count)
	}
	got := make([]map[string]uint64, procs)
	for i, p := range ps {
		p.await(ctx, "allocated")
		if len(p.ids) != count {
			t.Fatalf("process %d allocated %d keys, want %d", i, len(p.ids), count)
		}
		got[i] = p.ids
	}
	checkAgreement(t, got)
	s, err := filestore.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	index := checkBijection(t, s)
	for _, m := range got {
		for k, id := range m {
			if index[k] != strconv.FormatUint(id, 10) {
				t.Fatalf("a process got %d for %q, the index says %q", id, k, index[k])
			}
		}
	}
	for _, p := range ps {
		p.send("release")
	}
	for _, p := range ps {
		p.await(ctx, "released")
	}
	clk := clocktest.New(epoch)
	gc := newAllocator(t, s, testConfig("gc", clk))
	collect(t, gc, clk)
	for _, d := range []string{idDir, keyDir, valueDir} {
		if left := dump(t, s, d); len(left) != 0 {
			t.Errorf("%d %s entries left after release and GC", len(left), d)
		}
	}
}

// TestProcessKilledFreesIDs checks that a process killed with SIGKILL stops
// referencing its IDs once its TTL runs out; garbage collection then reclaims
// the IDs only it used, while IDs another process still uses keep their keys.
func TestProcessKilledFreesIDs(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const keys = 20
	p := startProc(t, dir, "victim", time.Second, 1, keys, keys)
	p.await(ctx, "allocated")

	s, err := filestore.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	clk := clocktest.New(epoch)
	me := newAllocator(t, s, testConfig("survivor", clk))
	shared := make(map[string]uint64)
	for i := range keys / 4 {
		k := keyName(i)
		shared[k] = mustAllocate(t, me, k)
		if shared[k] != p.ids[k] {
			t.Fatalf("survivor got %d for %q, the victim %d", shared[k], k, p.ids[k])
		}
	}

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := p.cmd.Wait(); !errors.As(err, &ee) {
		t.Fatalf("victim exit: %v", err)
	}
	waitRefs(ctx, t, s, keys/4)

	collect(t, me, clk)
	index := checkBijection(t, s)
	if len(index) != keys/4 {
		t.Errorf("index after GC has %d keys, want the %d the survivor uses: %v", len(index), keys/4, index)
	}
	for k, id := range shared {
		if n, err := me.Get(ctx, k); err != nil || n != id {
			t.Errorf("Get(%q) after GC = %d, %v; want %d", k, n, err, id)
		}
		if index[k] != strconv.FormatUint(id, 10) {
			t.Errorf("index of %q = %q, want %d", k, index[k], id)
		}
	}
	if masters := dump(t, s, idDir); len(masters) != keys/4 {
		t.Errorf("%d masters after GC, want %d", len(masters), keys/4)
	}
}

// waitRefs waits until s holds exactly n references: the killed process's
// lapse on the host's monotonic clock, which the filestore judges, so this
// waits in real time (polling on the real clock).
func waitRefs(ctx context.Context, t testing.TB, s backends.Store, n int) {
	t.Helper()
	tick := clock.New().Ticker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		refs, err := s.List(ctx, testPrefix+valueDir)
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d references left, want %d", len(refs), n)
		case <-tick.C:
		}
	}
}
