package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/backends/nats/natstest"
)

const testTTL = 2 * time.Second

// stores are the stores the end-to-end tests run over: each returns a
// fresh store URL.
var stores = []struct {
	name string
	url  func(t *testing.T) string
}{
	{"file", func(t *testing.T) string { return "file://" + t.TempDir() }},
	{"etcd", func(t *testing.T) string {
		if testing.Short() {
			t.Skip("etcd skipped in -short mode")
		}
		s := etcdtest.Start(t)
		return "etcd://" + strings.TrimPrefix(s.Endpoints()[0], "http://") + "/tenuretest"
	}},
	{"nats", func(t *testing.T) string {
		if testing.Short() {
			t.Skip("nats-server skipped in -short mode")
		}
		return natstest.Start(t).URL() + "/tenuretest?create=true"
	}},
}

// proc is a tenure process under test.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	log  string // its stderr
	done chan struct{}
	code int
}

// startTenure starts tenure with args; the command it runs is this test
// binary in child mode, writing to journal, with env added.
func startTenure(t *testing.T, name, journal string, env []string, args ...string) *proc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range args {
		if a == "CHILD" {
			args[i] = self
		}
	}
	p := &proc{t: t, name: name, log: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(tenureBin, args...)
	// A race-enabled binary sleeps a second at exit unless told not to;
	// the child would outlast its kill grace.
	p.cmd.Env = append(append(os.Environ(), envChild+"="+journal, "GORACE=atexit_sleep_ms=0"), env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		defer logf.Close()
		_ = p.cmd.Wait()
		p.code = status(p.cmd.ProcessState)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("%s stderr:\n%s", name, b)
		}
	})
	return p
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("%s: signal %v: %v", p.name, sig, err)
	}
}

// wait waits up to within for p to exit and returns its status.
func (p *proc) wait(within time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-clock.New().After(within):
		p.t.Fatalf("%s did not exit within %v", p.name, within)
		return -1
	}
}

// logged reports whether p's stderr contains s.
func (p *proc) logged(s string) bool {
	b, _ := os.ReadFile(p.log)
	return bytes.Contains(b, []byte(s))
}

// waitUntil polls cond in real time, every 10ms, for at most within: the
// processes under test report only through files.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	clk := clock.New()
	end := clk.Now().Add(within)
	for !cond() {
		if clk.Now().After(end) {
			t.Fatalf("not within %v: %s", within, what)
		}
		clk.Sleep(10 * time.Millisecond)
	}
}

// record is one journal line written by childMain.
type record struct {
	kind  string
	token int64
	pid   int
	mono  int64
	slot  int
}

func readJournal(t *testing.T, path string) []record {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r record
		if _, err := fmt.Sscanf(sc.Text(), "%s %d %d %d %d", &r.kind, &r.token, &r.pid, &r.mono, &r.slot); err != nil {
			t.Fatalf("journal line %q: %v", sc.Text(), err)
		}
		recs = append(recs, r)
	}
	return recs
}

func count(recs []record, kind string) int {
	n := 0
	for _, r := range recs {
		if r.kind == kind {
			n++
		}
	}
	return n
}

func starts(recs []record) []record {
	var out []record
	for _, r := range recs {
		if r.kind == "start" {
			out = append(out, r)
		}
	}
	return out
}

// checkJournal checks that no two children ran at once: tokens strictly
// increase from start to start, no child found an earlier one alive, and
// every child that ended did so, by its own clock, before the next
// started.
func checkJournal(t *testing.T, recs []record) {
	t.Helper()
	var last *record
	for i, r := range recs {
		switch r.kind {
		case "overlap", "reject":
			t.Fatalf("journal line %d: %+v", i, r)
		case "start":
			if last != nil {
				if r.token <= last.token {
					t.Fatalf("journal line %d: token %d after token %d", i, r.token, last.token)
				}
			}
			last = &recs[i]
		case "end":
			if last == nil || r.pid != last.pid {
				t.Fatalf("journal line %d: end of pid %d, not of the last start %+v", i, r.pid, last)
			}
		}
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].kind == "start" && recs[i-1].kind == "end" && recs[i-1].mono >= recs[i].mono {
			t.Fatalf("journal lines %d, %d: child ended at %d, next started at %d", i-1, i, recs[i-1].mono, recs[i].mono)
		}
	}
}

func runArgs(store, key, id string, extra ...string) []string {
	args := []string{"run", "--store", store, "--key", key, "--ttl", testTTL.String(), "--id", id, "--log-level", "debug"}
	args = append(args, extra...)
	return append(args, "--", "CHILD")
}

// TestRunNoOverlap runs two tenures whose children each run 150ms and
// exit, and checks by the children's own journal that they never ran at
// once and that their tokens strictly increase.
func TestRunNoOverlap(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			url := s.url(t)
			j := filepath.Join(t.TempDir(), "journal")
			env := []string{envHold + "=150ms"}
			a := startTenure(t, "a", j, env, runArgs(url, "job", "a")...)
			b := startTenure(t, "b", j, env, runArgs(url, "job", "b")...)
			waitUntil(t, 60*time.Second, "8 children ran", func() bool { return count(readJournal(t, j), "end") >= 8 })
			a.signal(syscall.SIGTERM)
			b.signal(syscall.SIGTERM)
			for _, p := range []*proc{a, b} {
				// 0: the child's status after SIGTERM; 143: no child ran.
				if code := p.wait(10 * time.Second); code != 0 && code != 128+int(syscall.SIGTERM) {
					t.Errorf("%s exited %d, want 0 or 143", p.name, code)
				}
			}
			recs := readJournal(t, j)
			checkJournal(t, recs)
			t.Logf("%d children ran, tokens %d to %d", count(recs, "start"), starts(recs)[0].token, starts(recs)[count(recs, "start")-1].token)
		})
	}
}

// holdingAndWaiting starts tenure a, waits for its child to run, then
// starts b and waits until b has seen a hold the claim.
func holdingAndWaiting(t *testing.T, url, j string) (a, b *proc) {
	t.Helper()
	a = startTenure(t, "a", j, nil, runArgs(url, "job", "a")...)
	waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
	b = startTenure(t, "b", j, nil, runArgs(url, "job", "b")...)
	waitUntil(t, 20*time.Second, "b saw a lead", func() bool { return b.logged(`msg="elector: new leader"`) })
	return a, b
}

// TestRunKillTakeover SIGKILLs the holding tenure: its child dies with it
// (the parent-death signal), and the waiting tenure's child starts once the
// claim has expired.
func TestRunKillTakeover(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			url := s.url(t)
			j := filepath.Join(t.TempDir(), "journal")
			a, b := holdingAndWaiting(t, url, j)
			first := starts(readJournal(t, j))[0]
			killed := monoNow()
			a.signal(syscall.SIGKILL)
			waitUntil(t, 5*time.Second, "a's child died with a", func() bool { return !alive(first.pid) })
			waitUntil(t, testTTL+5*time.Second, "b's child started", func() bool { return count(readJournal(t, j), "start") == 2 })
			second := starts(readJournal(t, j))[1]
			takeover := time.Duration(second.mono - killed)
			// The time is reported, not asserted: it includes the start of
			// b's child, which a loaded machine delays by seconds. The
			// waits above bound it for liveness.
			t.Logf("takeover after SIGKILL: %v (ttl %v)", takeover, testTTL)
			b.signal(syscall.SIGTERM)
			if code := b.wait(10 * time.Second); code != 0 {
				t.Errorf("b exited %d, want its child's 0", code)
			}
			checkJournal(t, readJournal(t, j))
		})
	}
}

// TestRunTermReleases sends SIGTERM to the holding tenure: its child gets
// SIGTERM and exits, tenure releases the claim once it has, and the
// waiting tenure's child starts well within the TTL.
func TestRunTermReleases(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			url := s.url(t)
			j := filepath.Join(t.TempDir(), "journal")
			a, b := holdingAndWaiting(t, url, j)
			termed := monoNow()
			a.signal(syscall.SIGTERM)
			if code := a.wait(10 * time.Second); code != 0 {
				t.Errorf("a exited %d, want its child's 0", code)
			}
			waitUntil(t, testTTL+5*time.Second, "b's child started", func() bool { return count(readJournal(t, j), "start") == 2 })
			recs := readJournal(t, j)
			checkJournal(t, recs)
			if recs[1].kind != "end" {
				t.Fatalf("journal %+v: a's child did not end before b's started", recs)
			}
			handover := time.Duration(starts(recs)[1].mono - termed)
			t.Logf("handover after SIGTERM: %v (ttl %v)", handover, testTTL)
			if handover > testTTL/2 {
				t.Errorf("handover took %v, want well under the ttl %v (released, not expired)", handover, testTTL)
			}
			b.signal(syscall.SIGTERM)
			b.wait(10 * time.Second)
		})
	}
}

// TestRunSignalWhileWaiting signals tenures waiting for the claim: they
// exit at once with 128 + the signal, and the holder is not disturbed.
func TestRunSignalWhileWaiting(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a, b := holdingAndWaiting(t, url, j)
	c := startTenure(t, "c", j, nil, runArgs(url, "job", "c")...)
	waitUntil(t, 20*time.Second, "c saw a lead", func() bool { return c.logged(`msg="elector: new leader"`) })
	b.signal(syscall.SIGINT)
	if code := b.wait(5 * time.Second); code != 128+int(syscall.SIGINT) {
		t.Errorf("b exited %d after SIGINT while waiting, want 130", code)
	}
	c.signal(syscall.SIGTERM)
	if code := c.wait(5 * time.Second); code != 128+int(syscall.SIGTERM) {
		t.Errorf("c exited %d after SIGTERM while waiting, want 143", code)
	}
	if recs := readJournal(t, j); len(recs) != 1 {
		t.Errorf("journal %+v: want only a's child's start", recs)
	}
	out := holders(t, "--store", url, "--key", "job")
	if !strings.Contains(out, "\na ") {
		t.Errorf("holders after b and c left:\n%s\nwant a", out)
	}
	a.signal(syscall.SIGTERM)
	a.wait(10 * time.Second)
}

// TestRunExitStatus checks tenure's exit statuses with --once.
func TestRunExitStatus(t *testing.T) {
	url := stores[0].url(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().String()
	tests := []struct {
		name string
		args []string
		env  []string
		want int
	}{
		{"child status", runArgs(url, "k1", "a", "--once"), []string{envHold + "=1ms", envExit + "=7"}, 7},
		{"child success", runArgs(url, "k2", "a", "--once"), []string{envHold + "=1ms"}, 0},
		{"not found", []string{"run", "--store", url, "--key", "k3", "--once", "--", "/nonexistent/command"}, nil, exitNotFound},
		{"store cannot open", []string{"run", "--store", "file:///proc/tenure-no/such", "--key", "k4", "--once", "--", "CHILD"}, nil, exitStore},
		{"metrics cannot listen", runArgs(url, "k5", "a", "--once", "--metrics", busy), nil, exitInternal},
		{"metrics bad port", runArgs(url, "k5", "a", "--once", "--metrics", "127.0.0.1:99999"), nil, exitUsage},
		{"holders store cannot open", []string{"holders", "--store", "file:///proc/tenure-no/such", "--key", "k4"}, nil, exitStore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := filepath.Join(t.TempDir(), "journal")
			p := startTenure(t, "tenure", j, tt.env, tt.args...)
			if code := p.wait(20 * time.Second); code != tt.want {
				t.Errorf("tenure %q exited %d, want %d", tt.args, code, tt.want)
			}
		})
	}
}

// TestRunLostOnce pauses the holding tenure past its deadline: when it
// resumes, its term has ended by its own clock, the child gets SIGTERM and
// tenure --once exits 75. (The child ran on while tenure was paused: that
// is what no wrapper can prevent, and why writes carry TENURE_TOKEN.)
func TestRunLostOnce(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, nil, runArgs(url, "job", "a", "--once")...)
	waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
	a.signal(syscall.SIGSTOP)
	stopped := monoNow()
	waitUntil(t, 2*testTTL, "a paused past its ttl", func() bool { return time.Duration(monoNow()-stopped) > testTTL+200*time.Millisecond })
	a.signal(syscall.SIGCONT)
	if code := a.wait(10 * time.Second); code != exitLost {
		t.Errorf("a exited %d after losing its term, want %d", code, exitLost)
	}
	// The deadline passed while a was paused, so the child got SIGKILL
	// right after SIGTERM; a has reaped it.
	if pid := starts(readJournal(t, j))[0].pid; alive(pid) {
		t.Errorf("a's child %d still runs after a exited", pid)
	}
	if !a.logged("killing command") {
		t.Errorf("a did not log that it killed its child")
	}
}

// holders runs tenure holders with args and returns its stdout.
func holders(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(tenureBin, append([]string{"holders"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tenure holders %q: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// TestHolders checks holders' table and JSON for a claim and a slot group,
// with the value each holder advertises (--advertise) where it has one.
func TestHolders(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	startTenure(t, "a", j, nil, runArgs(url, "single", "alpha")...)
	waitUntil(t, 20*time.Second, "alpha's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
	token := starts(readJournal(t, j))[0].token
	out := holders(t, "--store", url, "--key", "single")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "HOLDER SLOT TOKEN REMAINING RECORDED ADVERTISED" {
		t.Fatalf("holders:\n%s\nwant a header and one line", out)
	}
	f := strings.Fields(lines[1])
	if len(f) != 6 || f[0] != "alpha" || f[1] != "0" || f[2] != fmt.Sprint(token) || f[4] != "-" || f[5] != "-" {
		t.Errorf("holders line %q, want alpha 0 %d REMAINING - - (the file store records no time; nothing advertised)", lines[1], token)
	}
	if d, err := time.ParseDuration(f[3]); err != nil || d <= 0 || d > testTTL {
		t.Errorf("holders remaining %q, want within (0, %v]", f[3], testTTL)
	}

	// A slot group of two: two holders, slots 0 and 1.
	j2 := filepath.Join(t.TempDir(), "journal")
	startTenure(t, "b", j2, nil, runArgs(url, "group", "beta", "--slots", "2", "--advertise", "10.0.0.2:8080")...)
	startTenure(t, "c", j2, nil, runArgs(url, "group", "gamma", "--slots", "2", "--advertise", "http://gamma.example:8080/x y")...)
	waitUntil(t, 20*time.Second, "both children started", func() bool { return count(readJournal(t, j2), "start") == 2 })
	var got []holderJSON
	if err := json.Unmarshal([]byte(holders(t, "--store", url, "--key", "group", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	seen := map[int]string{}
	for _, h := range got {
		seen[h.Slot] = h.Holder
		if h.Token <= 0 || !h.Verified || h.RemainingSeconds == nil || *h.RemainingSeconds <= 0 || h.Nonce == "" {
			t.Errorf("holder %+v: want a token, a nonce and time left", h)
		}
	}
	if len(got) != 2 || seen[0] == "" || seen[1] == "" || seen[0] == seen[1] {
		t.Errorf("holders --json of the group: %+v, want beta and gamma in slots 0 and 1", got)
	}
	want := map[string]string{"beta": "10.0.0.2:8080", "gamma": "http://gamma.example:8080/x y"}
	for _, h := range got {
		if h.Advertised != want[h.Holder] {
			t.Errorf("holders --json: %s advertises %q, want %q", h.Holder, h.Advertised, want[h.Holder])
		}
	}
	table := holders(t, "--store", url, "--key", "group")
	for _, v := range []string{" 10.0.0.2:8080\n", ` "http://gamma.example:8080/x y"` + "\n"} {
		if !strings.Contains(table, v) {
			t.Errorf("holders table of the group:\n%s\nwant a line ending in %q", table, v)
		}
	}
}

// watchEvents waits for watch w to print n JSON lines and returns them.
func watchEvents(t *testing.T, w *proc, n int) []changeJSON {
	t.Helper()
	var events []changeJSON
	waitUntil(t, 10*time.Second, fmt.Sprintf("watch printed %d lines", n), func() bool {
		b, _ := os.ReadFile(w.log)
		events = nil
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "{") {
				var e changeJSON
				if err := json.Unmarshal([]byte(l), &e); err != nil {
					t.Fatalf("watch line %q: %v", l, err)
				}
				events = append(events, e)
			}
		}
		return len(events) >= n
	})
	return events
}

// TestWatch follows a claim nobody holds, then held by one tenure, then
// by another: watch prints that it is free, then each holder as it comes
// and as it goes, in order.
func TestWatch(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	w := startTenure(t, "watch", j, nil, "watch", "--store", url, "--key", "job", "--json", "--log-level", "debug")
	waitUntil(t, 20*time.Second, "watch started", func() bool { return w.logged(`msg=watching`) })
	env := []string{envHold + "=300ms"}
	for _, id := range []string{"a", "b"} {
		p := startTenure(t, id, j, env, runArgs(url, "job", id, "--once")...)
		if code := p.wait(20 * time.Second); code != 0 {
			t.Fatalf("%s exited %d, want 0", id, code)
		}
	}
	events := watchEvents(t, w, 5)
	tokens := starts(readJournal(t, j))
	want := []struct {
		event, holder string
		token         int64
	}{{"free", "", 0}, {"held", "a", tokens[0].token}, {"gone", "a", tokens[0].token}, {"held", "b", tokens[1].token}, {"gone", "b", tokens[1].token}}
	if len(events) != len(want) {
		t.Fatalf("watch printed %+v, want %+v", events, want)
	}
	for i, e := range events {
		if e.Event != want[i].event || e.Holder != want[i].holder || e.Token != want[i].token {
			t.Errorf("watch change %d: %+v, want %+v", i, e, want[i])
		}
	}
	w.signal(syscall.SIGTERM)
	if code := w.wait(10 * time.Second); code != 0 {
		t.Errorf("watch exited %d after SIGTERM, want 0", code)
	}
}

// TestRunMetrics scrapes tenure run --metrics while its child runs: the
// elector's series for the key say it leads.
func TestRunMetrics(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, nil, runArgs(url, "job", "a", "--metrics", "127.0.0.1:0")...)
	waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
	b, _ := os.ReadFile(a.log)
	m := regexp.MustCompile(`msg="serving metrics" addr=(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no metrics address in a's log:\n%s", b)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + string(m[1]) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`tenure_leader{key="job"} 1`, `tenure_elections_won_total{key="job"} 1`, "go_goroutines"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	a.signal(syscall.SIGTERM)
	a.wait(10 * time.Second)
	client.CloseIdleConnections()
}

// TestRunStoreDown stops the etcd server under a holding tenure --once:
// renewals fail, so the child gets SIGTERM before the local deadline (or
// the term ends early, when the store refuses a renewal too close to the
// lease's expiry) and has ended before the server could have let the claim go
// (a TTL after the last renewal, which came before the stop); tenure exits
// 75.
func TestRunStoreDown(t *testing.T) {
	if testing.Short() {
		t.Skip("etcd skipped in -short mode")
	}
	s := etcdtest.Start(t)
	url := "etcd://" + strings.TrimPrefix(s.Endpoints()[0], "http://") + "/tenuretest"
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, nil, runArgs(url, "job", "a", "--once")...)
	waitUntil(t, 20*time.Second, "a's child started", func() bool { return count(readJournal(t, j), "start") == 1 })
	stopped := monoNow()
	s.Stop()
	if code := a.wait(testTTL + 10*time.Second); code != exitLost {
		t.Errorf("a exited %d after its store went away, want %d", code, exitLost)
	}
	recs := readJournal(t, j)
	if len(recs) != 2 || recs[1].kind != "end" {
		t.Fatalf("journal %+v: want a's child to end on SIGTERM", recs)
	}
	ended := time.Duration(recs[1].mono - stopped)
	t.Logf("child ended %v after the store stopped (ttl %v)", ended, testTTL)
	if ended >= testTTL {
		t.Errorf("child ended %v after the store stopped, want before the ttl %v", ended, testTTL)
	}
	// Either path ends the child in time: SIGTERM once renewals have failed
	// for a while, or the term ending early because the store refuses to
	// keep a lease alive close to its possible expiry (backends/etcd).
	if !a.logged(`why="renewals failing"`) && !a.logged(`why="term ended"`) {
		t.Errorf("a did not terminate its child ahead of the deadline")
	}
}

// TestRunRepause runs a command that exits at once under one tenure: it
// campaigns again only ttl/6 after each term, not in a tight loop.
func TestRunRepause(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, []string{envHold + "=1ms"}, runArgs(url, "job", "a")...)
	waitUntil(t, 20*time.Second, "4 children ran", func() bool { return count(readJournal(t, j), "end") >= 4 })
	a.signal(syscall.SIGTERM)
	a.wait(10 * time.Second)
	recs := readJournal(t, j)
	checkJournal(t, recs)
	st := starts(recs)
	for i := 1; i < len(st); i++ {
		if gap := time.Duration(st[i].mono - st[i-1].mono); gap < testTTL/6 {
			t.Errorf("children %d and %d started %v apart, want at least ttl/6 = %v", i-1, i, gap, testTTL/6)
		}
	}
}

// TestRunKillsGroup runs the child under a shell that does not wait for
// it to finish: the end of the term reaches the shell's child too, and no
// process of the term outlives tenure.
func TestRunKillsGroup(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, nil, "run", "--store", url, "--key", "job", "--ttl", testTTL.String(), "--once",
		"--", "sh", "-c", `"$0" & wait`, "CHILD")
	waitUntil(t, 20*time.Second, "a's grandchild started", func() bool { return count(readJournal(t, j), "start") == 1 })
	a.signal(syscall.SIGTERM)
	a.wait(10 * time.Second)
	pid := starts(readJournal(t, j))[0].pid
	waitUntil(t, 2*time.Second, "a's grandchild died with its term", func() bool { return !alive(pid) })
}

// TestRunSlotsNoOverlap runs three tenures over a slot group of two whose
// children each run 150ms: never more than two children run at once (each
// child counts the live ones when it starts), and each slot's tokens
// strictly increase.
func TestRunSlotsNoOverlap(t *testing.T) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			url := s.url(t)
			j := filepath.Join(t.TempDir(), "journal")
			env := []string{envHold + "=150ms", envSlots + "=2"}
			var ps []*proc
			for _, id := range []string{"a", "b", "c"} {
				ps = append(ps, startTenure(t, id, j, env, runArgs(url, "workers", id, "--slots", "2")...))
			}
			waitUntil(t, 60*time.Second, "12 children ran", func() bool { return count(readJournal(t, j), "end") >= 12 })
			for _, p := range ps {
				p.signal(syscall.SIGTERM)
			}
			for _, p := range ps {
				p.wait(10 * time.Second)
			}
			recs := readJournal(t, j)
			last := map[int]int64{}
			both := false
			for i, r := range recs {
				switch r.kind {
				case "overlap", "reject":
					t.Fatalf("journal line %d: %+v", i, r)
				case "start":
					if r.token <= last[r.slot] {
						t.Fatalf("journal line %d: slot %d token %d after %d", i, r.slot, r.token, last[r.slot])
					}
					last[r.slot] = r.token
					both = both || r.slot == 1
				}
			}
			if !both {
				t.Errorf("journal %+v: slot 1 never used", recs)
			}
		})
	}
}

// TestRunRerunBackoff runs a command that exits at once: tenure reruns it
// after ttl/6, then after a pause that doubles each time, up to the ttl.
// Only lower bounds are checked: a loaded machine lengthens gaps, never
// shortens them.
func TestRunRerunBackoff(t *testing.T) {
	url := stores[0].url(t)
	j := filepath.Join(t.TempDir(), "journal")
	a := startTenure(t, "a", j, []string{envHold + "=1ms"}, runArgs(url, "job", "a")...)
	waitUntil(t, 30*time.Second, "5 children ran", func() bool { return count(readJournal(t, j), "end") >= 5 })
	a.signal(syscall.SIGTERM)
	a.wait(10 * time.Second)
	recs := readJournal(t, j)
	checkJournal(t, recs)
	st := starts(recs)
	var gaps []time.Duration
	for i := 1; i < len(st) && i <= 4; i++ {
		gap := time.Duration(st[i].mono - st[i-1].mono)
		gaps = append(gaps, gap)
		want := min(testTTL/6<<(i-1), testTTL)
		if gap < want {
			t.Errorf("children %d and %d started %v apart, want at least %v", i-1, i, gap, want)
		}
	}
	t.Logf("gaps between runs: %v (ttl %v)", gaps, testTTL)
	if !a.logged("command keeps exiting; backing off") {
		t.Errorf("a did not log that it backs off")
	}
}

// readLog returns p's stderr so far.
func readLog(p *proc) string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}
