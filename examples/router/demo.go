package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/shards"
)

func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ttl := fs.Duration("ttl", time.Second, "the TTL of every claim")
	clients := fs.Int("clients", 4, "concurrent clients")
	strict := fs.Bool("strict-timing", true, "fail when shards are owned again later than their bound; "+
		"false reports the time and fails only if they are not owned again within 10s")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	dir, err := os.MkdirTemp("", "router-demo-")
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	d := &demo{out: stdout, errOut: &lockedWriter{w: stderr}, dir: dir, ttl: *ttl, strict: *strict, acked: map[string]int{}}
	ok := d.run(*clients)
	if ok {
		fmt.Fprintln(stdout, "all checks held")
		return 0
	}
	fmt.Fprintln(stdout, "some checks failed")
	return 1
}

// demo runs member processes and clients, and checks what they did.
type demo struct {
	out, errOut io.Writer
	dir         string
	ttl         time.Duration
	strict      bool           // a bound missed fails the demo
	store       backends.Store // the demo's own view of the store
	failed      bool

	mu      sync.Mutex
	members map[string]*memberProc // live, by identity (address); guarded by mu
	acked   map[string]int         // per key, the last acknowledged value; guarded by mu
	writes  int                    // acknowledged writes; guarded by mu
}

type memberProc struct {
	name string
	addr string
	cmd  *exec.Cmd
}

func (d *demo) check(ok bool, format string, args ...any) {
	verdict := "ok  "
	if !ok {
		verdict = "FAIL"
		d.failed = true
	}
	fmt.Fprintf(d.out, "%s %s\n", verdict, fmt.Sprintf(format, args...))
}

// timed awaits every shard owned again after a fault at start, and checks
// the time it took against bound. With strict timing off (the tests, on a
// machine whose load they do not control), a bound missed is reported,
// and only shards not owned again at all within 10s fail the demo, unless
// excuse says why that may happen; the demo then checks it later.
func (d *demo) timed(what string, start time.Time, bound time.Duration, excuse, format string, args ...any) {
	limit := bound
	if !d.strict {
		limit = max(bound, 10*time.Second)
	}
	ok := d.awaitOwned(what, limit)
	took := time.Since(start).Round(time.Millisecond)
	line := fmt.Sprintf(format, args...) + fmt.Sprintf(" in %v (bound %v)", took, bound)
	if ok && took > bound && !d.strict {
		d.say("%s: later than the bound, not checked (-strict-timing=false)", line)
		return
	}
	if !ok && excuse != "" && !d.strict {
		d.say("%s: not all, %s", line, excuse)
		return
	}
	d.check(ok, "%s", line)
}

func (d *demo) say(format string, args ...any) { fmt.Fprintf(d.out, "     "+format+"\n", args...) }

func (d *demo) run(clients int) bool {
	store, err := filestore.Open(context.Background(), d.dir)
	if err != nil {
		d.check(false, "open the store: %v", err)
		return false
	}
	defer store.Close()
	d.store = store
	d.members = map[string]*memberProc{}
	defer d.stopAll()

	bound := d.ttl + time.Second
	for _, name := range []string{"a", "b", "c"} {
		if err := d.spawn(name); err != nil {
			d.check(false, "start member %s: %v", name, err)
			return false
		}
	}
	d.check(d.awaitOwned("three members", 10*time.Second), "three members own every shard, balanced")

	ctx, stopClients := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() { d.client(ctx, i) })
	}
	defer func() { stopClients(); wg.Wait() }()
	d.pause(time.Second)

	b := d.byName("b")
	d.drop(b)
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	_ = b.cmd.Wait()
	d.timed("after SIGKILL", time.Now(), bound, "", "after SIGKILL of b, every shard owned again")

	// Let the members settle into renewing before the next fault. On a
	// filestore a process stopped inside a write's commit (the re-read and
	// rename under the key's lock) keeps that key locked until it continues
	// (see backends/filestore); stopped right as it acquires its new
	// shards, c would be there far more often than in steady work. With
	// strict timing (the default) such a stop fails the demo.
	d.pause(time.Second)
	c := d.byName("c")
	d.drop(c)
	_ = c.cmd.Process.Signal(syscall.SIGSTOP)
	d.timed("after SIGSTOP", time.Now(), bound,
		"as when c stopped inside a write's commit, which keeps that key locked on a filestore "+
			"until c continues (see backends/filestore); checked after SIGCONT below",
		"after SIGSTOP of c, every shard owned again")
	d.pause(d.ttl) // c stays stopped well past its TTL
	_ = c.cmd.Process.Signal(syscall.SIGCONT)
	d.mu.Lock()
	d.members[c.addr] = c
	d.mu.Unlock()
	d.check(d.awaitOwned("after SIGCONT", 10*time.Second), "c continued and got its share back")

	if err := d.spawn("d"); err != nil {
		d.check(false, "start member d: %v", err)
		return false
	}
	d.check(d.awaitOwned("after a join", 10*time.Second), "d joined and got its share")

	a := d.byName("a")
	d.drop(a)
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	d.timed("after a graceful stop", time.Now(), bound, "", "after a graceful stop of a, every shard owned again")
	d.check(a.cmd.Wait() == nil, "a left cleanly")

	d.pause(time.Second)
	stopClients()
	wg.Wait()

	d.checkWrites()
	d.checkFencing()
	d.check(d.balanced(), "balance restored: every live member owns ⌊S/M⌋ or ⌈S/M⌉ shards")
	return !d.failed
}

// pause lets the clients run for a while.
func (d *demo) pause(t time.Duration) { <-time.After(t) }

// spawn starts member name (this binary, "serve") and waits for its address.
func (d *demo) spawn(name string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(exe, "serve", "--dir", d.dir, "--ttl", d.ttl.String())
	cmd.Stderr = d.errOut
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("member %s said nothing", name)
	}
	addr, ok := strings.CutPrefix(sc.Text(), "listening ")
	if !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("member %s said %q", name, sc.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	d.mu.Lock()
	d.members[addr] = &memberProc{name: name, addr: addr, cmd: cmd}
	d.mu.Unlock()
	d.say("started %s at %s (pid %d)", name, addr, cmd.Process.Pid)
	return nil
}

func (d *demo) byName(name string) *memberProc {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, m := range d.members {
		if m.name == name {
			return m
		}
	}
	return nil
}

// drop removes m from the live members the clients and checks use.
func (d *demo) drop(m *memberProc) {
	d.mu.Lock()
	delete(d.members, m.addr)
	d.mu.Unlock()
}

func (d *demo) live() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for addr := range d.members {
		out = append(out, addr)
	}
	slices.Sort(out)
	return out
}

// owners reads every shard's holder from the store.
func (d *demo) owners(ctx context.Context) ([]string, error) {
	locker, err := backends.NewLocker(d.store)
	if err != nil {
		return nil, err
	}
	out := make([]string, shardCount)
	for s := range shardCount {
		hs, err := locker.Holders(ctx, group+"/shard/"+strconv.Itoa(s))
		if err != nil {
			return nil, err
		}
		if len(hs) == 1 {
			out[s] = hs[0].Holder.ID
		}
	}
	return out, nil
}

// awaitOwned waits until every shard is held by the live member the
// placement over the live members names.
func (d *demo) awaitOwned(what string, limit time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var got []string // the owners last read
	for {
		want := shards.Place(shardCount, d.live())
		if now, err := d.owners(ctx); err == nil {
			if got = now; slices.Equal(got, want) {
				return true
			}
		}
		select {
		case <-ctx.Done():
			d.say("%s: owners %v, want %v", what, got, want)
			return false
		case <-tick.C:
		}
	}
}

func (d *demo) balanced() bool {
	got, err := d.owners(context.Background())
	if err != nil {
		return false
	}
	n := map[string]int{}
	for _, id := range got {
		n[id]++
	}
	live := d.live()
	lo, hi := shardCount/len(live), (shardCount+len(live)-1)/len(live)
	for _, id := range live {
		if n[id] < lo || n[id] > hi {
			return false
		}
	}
	return true
}

// client increments its own counters with conditional writes through any
// live member, retrying what is retryable, and records what was
// acknowledged.
func (d *demo) client(ctx context.Context, id int) {
	hc := &http.Client{Timeout: 2 * time.Second}
	keys := []string{fmt.Sprintf("client-%d/a", id), fmt.Sprintf("client-%d/b", id), fmt.Sprintf("client-%d/c", id)}
	for ctx.Err() == nil {
		key := keys[rand.IntN(len(keys))]
		live := d.live()
		if len(live) == 0 {
			d.pause(10 * time.Millisecond)
			continue
		}
		base := "http://" + live[rand.IntN(len(live))] + "/kv/" + key
		value, etag, status := d.do(ctx, hc, http.MethodGet, base, nil, "")
		if status != http.StatusOK && status != http.StatusNotFound {
			continue
		}
		n := 0
		if status == http.StatusOK {
			n, _ = strconv.Atoi(value)
		}
		hdr := etag
		if status == http.StatusNotFound {
			hdr = "*"
		}
		_, _, status = d.do(ctx, hc, http.MethodPut, base, strings.NewReader(strconv.Itoa(n+1)), hdr)
		if status == http.StatusOK || status == http.StatusCreated {
			d.mu.Lock()
			d.acked[key] = max(d.acked[key], n+1)
			d.writes++
			d.mu.Unlock()
		}
	}
}

// do sends one request; cond is an ETag for If-Match, or "*" for
// If-None-Match. It returns the body, the ETag and the status (0 on a
// transport error).
func (d *demo) do(ctx context.Context, hc *http.Client, method, url string, body io.Reader, cond string) (string, string, int) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return "", "", 0
	}
	switch {
	case cond == "*":
		req.Header.Set("If-None-Match", "*")
	case cond != "":
		req.Header.Set("If-Match", cond)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", "", 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.Header.Get("ETag"), resp.StatusCode
}

// checkWrites reads every key back: its value is at least the last
// acknowledged one (an increment applied but not acknowledged may have
// gone further; none acknowledged may be missing).
func (d *demo) checkWrites() {
	d.mu.Lock()
	acked := maps.Clone(d.acked)
	writes := d.writes
	d.mu.Unlock()
	lost := 0
	for key, want := range acked {
		got, err := d.readKey(key)
		if err != nil || got < want {
			lost++
			d.say("%s: read %d (%v), last acknowledged %d", key, got, err, want)
		}
	}
	d.check(writes > 0 && lost == 0, "no acknowledged write lost (%d writes acknowledged on %d keys)", writes, len(acked))
}

// readKey reads key's value straight from its shard's data.
func (d *demo) readKey(key string) (int, error) {
	doc, _, err := readDoc(context.Background(), d.store, shards.ShardOf(key, shardCount))
	if err != nil {
		return 0, err
	}
	it, ok := doc.Items[key]
	if !ok {
		return 0, errors.New("missing")
	}
	return strconv.Atoi(it.Value)
}

// checkFencing checks every shard's data: the tokens that wrote it only
// increased, and the last one is the data's token.
func (d *demo) checkFencing() {
	bad, terms := 0, 0
	for s := range shardCount {
		doc, _, err := readDoc(context.Background(), d.store, s)
		if err != nil {
			bad++
			continue
		}
		terms += len(doc.Tokens)
		for i := 1; i < len(doc.Tokens); i++ {
			if doc.Tokens[i] <= doc.Tokens[i-1] {
				bad++
			}
		}
		if n := len(doc.Tokens); n > 0 && doc.Tokens[n-1] != doc.Token {
			bad++
		}
	}
	d.check(bad == 0, "no write applied under an older token after a newer one (%d terms wrote)", terms)
}

// stopAll ends every member still running.
func (d *demo) stopAll() {
	d.mu.Lock()
	ms := make([]*memberProc, 0, len(d.members))
	for _, m := range d.members {
		ms = append(ms, m)
	}
	d.members = map[string]*memberProc{}
	d.mu.Unlock()
	for _, m := range ms {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, m := range ms {
		_ = m.cmd.Wait()
	}
}

// lockedWriter serializes the writes of the members' stderr copiers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer // guarded by mu
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
