package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends/filestore"
	"github.com/tenure-go/tenure/internal/childproc"
)

// demo runs three indexers as child processes and watches them through
// their shared journal.
type demo struct {
	out     io.Writer
	clk     clock.Clock
	exe     string
	dir     string
	ttl     time.Duration
	group   string
	start   int64 // CLOCK_MONOTONIC at the beginning, for relative times
	reader  *journalReader
	seen    []record
	procs   []*child
	failed  []string
	killed  map[int]int64 // pid -> CLOCK_MONOTONIC once it was dead
	timings []string
	handed  *transferOutcome // the transfer step's, for check
}

// transferOutcome is what the journal showed of a transfer: the term
// handed over, its end, the follower it was handed to and the term that
// began next.
type transferOutcome struct {
	from, stop record // serve-start and serve-stop of the term handed over
	to         string
	next       record // the next serve-start
	// follows: the old leader, asked afterwards, still ran and did not
	// serve.
	follows bool
}

type child struct {
	id     string
	p      *childproc.Process
	log    string // its standard error (serve writes nothing to its standard output)
	addr   string
	exited bool
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("indexer demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ttl := fs.Duration("ttl", 3*time.Second, "lease TTL of the indexers")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "indexer demo: %v\n", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "tenure-indexer-demo-")
	if err != nil {
		fmt.Fprintf(stderr, "indexer demo: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)

	d := &demo{out: stdout, clk: clock.New(), exe: exe, dir: dir, ttl: *ttl, group: "demo", killed: map[int]int64{}}
	err = d.run(ctx)
	d.stopAll()
	if err != nil {
		fmt.Fprintf(stdout, "\ndemo aborted: %v\n", err)
		d.dumpChildren(stdout)
		return 1
	}
	if len(d.failed) > 0 {
		d.dumpChildren(stdout)
		return 1
	}
	return 0
}

func (d *demo) say(format string, args ...any) {
	at := time.Duration(monoNow() - d.start)
	fmt.Fprintf(d.out, "[%6.2fs] %s\n", at.Seconds(), fmt.Sprintf(format, args...))
}

func (d *demo) run(ctx context.Context) error {
	d.start = monoNow()
	jpath := filepath.Join(d.dir, "journal")
	if err := os.WriteFile(jpath, nil, 0o644); err != nil {
		return err
	}
	jf, err := os.Open(jpath)
	if err != nil {
		return err
	}
	defer jf.Close()
	d.reader = &journalReader{f: jf}

	fmt.Fprintf(d.out, "tenure served-indexer demo: 3 indexers share group %q in a filestore\n", d.group)
	fmt.Fprintf(d.out, "(lease TTL %v; at most one indexer may serve at any moment)\n\n", d.ttl)
	for i := 1; i <= 3; i++ {
		if err := d.spawn(fmt.Sprintf("indexer %d", i), jpath); err != nil {
			return err
		}
	}
	if _, err := d.waitFor(ctx, 10*time.Second, func(r record) bool { return r.Event == "listening" }, 3); err != nil {
		return fmt.Errorf("indexers did not start: %w", err)
	}
	first, err := d.waitServing(ctx, 0)
	if err != nil {
		return err
	}
	d.say("%q serves (token %d); the others follow", first.ID, first.Token)
	d.showStatus()

	// 1. Transfer: the serving indexer hands its claim to a named
	// follower; nothing is killed.
	handed, err := d.transfer(ctx, first)
	if err != nil {
		return err
	}

	// 2. Crash: the serving indexer dies without releasing its claim.
	victim := d.byID(handed.ID)
	d.say("SIGKILL %q: it cannot release its claim, so the others must wait out its TTL", victim.id)
	if !victim.p.Signal(syscall.SIGKILL) {
		return fmt.Errorf("%q exited before the kill: %v", victim.id, victim.p.Wait())
	}
	_ = victim.p.Wait()
	victim.exited = true
	deadAt := monoNow()
	d.killed[victim.p.Pid()] = deadAt
	second, err := d.waitServing(ctx, handed.Token)
	if err != nil {
		return err
	}
	takeover := monoDuration(deadAt, second.Mono)
	d.say("%q took over (token %d), %v after the kill", second.ID, second.Token, takeover.Round(time.Millisecond))
	d.timings = append(d.timings, fmt.Sprintf("crash takeover  %v (TTL %v)", takeover.Round(time.Millisecond), d.ttl))

	// 3. A stale write: the dead indexer's token is refused by the store.
	if err := d.staleWrite(ctx, handed); err != nil {
		return err
	}

	// 4. Graceful handover: the serving indexer stops and releases.
	leaving := d.byID(second.ID)
	d.say("SIGTERM %q: it stops serving, releases its claim, and a follower takes over", leaving.id)
	sentAt := monoNow()
	if !leaving.p.Signal(syscall.SIGTERM) {
		return fmt.Errorf("%q exited before the signal: %v", leaving.id, leaving.p.Wait())
	}
	third, err := d.waitServing(ctx, second.Token)
	if err != nil {
		return err
	}
	handover := monoDuration(sentAt, third.Mono)
	d.say("%q took over (token %d), %v after the signal", third.ID, third.Token, handover.Round(time.Microsecond))
	d.timings = append(d.timings, fmt.Sprintf("graceful handover %v", handover.Round(time.Microsecond)))
	if err := leaving.p.Wait(); err != nil {
		d.fail("%q did not exit cleanly: %v", leaving.id, err)
	}
	leaving.exited = true
	d.showStatus()

	d.say("stopping the rest")
	d.stopAll()
	if _, err := d.drain(); err != nil {
		return err
	}
	d.check()
	return nil
}

// transfer asks the indexer serving in term cur to hand its claim to a
// follower named by its identity (POST /transfer), once that follower has
// seen cur's indexer lead; it waits for the next term and reports it, and
// how long the claim went without a leader, from the journal: from the
// old term's serve-stop to the new one's serve-start.
func (d *demo) transfer(ctx context.Context, cur record) (record, error) {
	leader := d.byID(cur.ID)
	var target *child
	for _, c := range d.procs {
		if c != leader && !c.exited {
			target = c // the follower started last
		}
	}
	if leader == nil || target == nil {
		return record{}, fmt.Errorf("no follower to hand %q's claim to", cur.ID)
	}
	if err := d.waitLeaderSeen(ctx, target, cur.ID); err != nil {
		return record{}, err
	}
	d.say("POST /transfer?to=%s to %q: it stops serving and releases its claim reserved for %q, which takes it; nothing is killed",
		url.QueryEscape(target.id), leader.id, target.id)
	askedAt := monoNow()
	hc := &http.Client{Timeout: d.ttl + 10*time.Second}
	resp, err := hc.Post("http://"+leader.addr+"/transfer?to="+url.QueryEscape(target.id), "", nil)
	if err != nil {
		return record{}, fmt.Errorf("transfer from %q: %w", leader.id, err)
	}
	var a transferAnswer
	err = json.NewDecoder(resp.Body).Decode(&a)
	resp.Body.Close()
	switch {
	case err != nil:
		return record{}, fmt.Errorf("transfer from %q: %s: %w", leader.id, resp.Status, err)
	case resp.StatusCode != http.StatusOK:
		return record{}, fmt.Errorf("transfer from %q: %s: %s", leader.id, resp.Status, a.Err)
	}
	next, err := d.waitServing(ctx, cur.Token)
	if err != nil {
		return record{}, err
	}
	stops, err := d.waitFor(ctx, d.ttl+10*time.Second, func(r record) bool {
		return r.Event == "serve-stop" && r.Token == cur.Token
	}, 1)
	if err != nil {
		return record{}, fmt.Errorf("%q did not record the end of its term: %w", cur.ID, err)
	}
	h := &transferOutcome{from: cur, stop: stops[0], to: target.id, next: next}
	d.handed = h
	gap := monoDuration(h.stop.Mono, next.Mono)
	d.say("%q serves now (token %d > %d), %v after the request; no indexer served for %v",
		next.ID, next.Token, cur.Token, monoDuration(askedAt, next.Mono).Round(time.Microsecond), gap.Round(time.Microsecond))
	d.timings = append(d.timings, fmt.Sprintf("transfer        %v without a leader (serve-stop to serve-start), %v from the request",
		gap.Round(time.Microsecond), monoDuration(askedAt, next.Mono).Round(time.Microsecond)))
	// Every indexer reports the new leader before their status is shown.
	d.say("the others, %q among them, follow: they learn who leads when they try again, once the transfer's bound (one TTL) has passed", leader.id)
	for _, c := range d.procs {
		if !c.exited {
			if err := d.waitLeaderSeen(ctx, c, next.ID); err != nil {
				return record{}, err
			}
		}
	}
	if st, err := d.status(leader); err == nil && st.ID == leader.id && !st.Serving {
		h.follows = true
	}
	d.showStatus()
	return next, nil
}

// waitLeaderSeen polls c's /status until it reports id as the leader, so
// that a transfer to c goes to a follower that has seen the claim held.
func (d *demo) waitLeaderSeen(ctx context.Context, c *child, id string) error {
	ctx, cancel := d.clk.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := d.clk.Ticker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, err := d.status(c); err == nil && st.Leader == id {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%q did not see %q lead: %w", c.id, id, ctx.Err())
		case <-tick.C:
		}
	}
}

func (d *demo) spawn(id, jpath string) error {
	c := &child{id: id, log: filepath.Join(d.dir, fmt.Sprintf("indexer-%d.log", len(d.procs)+1))}
	// A child must not outlive the demo, whatever happens to the demo
	// (package childproc).
	p, err := childproc.Start(childproc.Spec{
		Argv: []string{d.exe, "serve",
			"--store", "file://" + filepath.Join(d.dir, "store") + "?create=true",
			"--group", d.group, "--id", id, "--http", "127.0.0.1:0",
			"--ttl", d.ttl.String(), "--journal", jpath},
		Log: c.log,
	})
	if err != nil {
		return fmt.Errorf("start %q: %w", id, err)
	}
	c.p = p
	d.procs = append(d.procs, c)
	d.say("started %q (pid %d)", id, p.Pid())
	return nil
}

func (d *demo) byID(id string) *child {
	for _, c := range d.procs {
		if c.id == id {
			return c
		}
	}
	return nil
}

// drain reads what the journal gained and remembers it.
func (d *demo) drain() ([]record, error) {
	recs, err := d.reader.next()
	for _, r := range recs {
		if r.Event == "listening" {
			for _, c := range d.procs {
				if c.p.Pid() == r.PID {
					c.addr = r.Addr
				}
			}
		}
	}
	d.seen = append(d.seen, recs...)
	return recs, err
}

// waitFor polls the journal until n records match, or timeout passes.
func (d *demo) waitFor(ctx context.Context, timeout time.Duration, match func(record) bool, n int) ([]record, error) {
	ctx, cancel := d.clk.WithTimeout(ctx, timeout)
	defer cancel()
	tick := d.clk.Ticker(5 * time.Millisecond)
	defer tick.Stop()
	var got []record
	for _, r := range d.seen {
		if match(r) {
			got = append(got, r)
		}
	}
	for len(got) < n {
		select {
		case <-ctx.Done():
			return got, fmt.Errorf("waited %v: %w", timeout, ctx.Err())
		case <-tick.C:
		}
		recs, err := d.drain()
		if err != nil {
			return got, err
		}
		for _, r := range recs {
			if match(r) {
				got = append(got, r)
			}
		}
	}
	return got, nil
}

// waitServing waits for an indexer to start serving with a token above
// after.
func (d *demo) waitServing(ctx context.Context, after int64) (record, error) {
	recs, err := d.waitFor(ctx, d.ttl+10*time.Second, func(r record) bool {
		return r.Event == "serve-start" && r.Token > after
	}, 1)
	if err != nil {
		return record{}, fmt.Errorf("no indexer started serving: %w", err)
	}
	return recs[0], nil
}

// status asks c for its GET /status.
func (d *demo) status(c *child) (status, error) {
	var st status
	if c.exited || c.addr == "" {
		return st, fmt.Errorf("%q is gone", c.id)
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get("http://" + c.addr + "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

func (d *demo) showStatus() {
	for _, c := range d.procs {
		if c.exited || c.addr == "" {
			fmt.Fprintf(d.out, "           %-10s  (gone)\n", c.id)
			continue
		}
		st, err := d.status(c)
		if err != nil {
			fmt.Fprintf(d.out, "           %-10s  status: %v\n", c.id, err)
			continue
		}
		serving := "following"
		if st.Serving {
			serving = "SERVING"
		}
		fmt.Fprintf(d.out, "           %-10s  %-9s state=%-9s leader=%q token=%d\n", st.ID, serving, st.State, st.Leader, st.Token)
	}
}

// staleWrite tries to publish an endpoint under the dead indexer's token,
// as that indexer would if it had only been paused, and expects the store to
// refuse it.
func (d *demo) staleWrite(ctx context.Context, dead record) error {
	store, err := filestore.Open(ctx, filepath.Join(d.dir, "store"))
	if err != nil {
		return err
	}
	defer store.Close()
	err = publish(ctx, store, endpointKey(d.group, dead.Slot), endpoint{ID: dead.ID, Addr: dead.Addr, Slot: dead.Slot, Token: dead.Token})
	if errors.Is(err, errStale) {
		d.say("a late write with %q's old token %d was refused by the store", dead.ID, dead.Token)
		return nil
	}
	d.fail("a write with the stale token %d was not refused (err %v)", dead.Token, err)
	return nil
}

func (d *demo) fail(format string, args ...any) {
	d.failed = append(d.failed, fmt.Sprintf(format, args...))
}

// stopAll sends SIGTERM to every indexer still running and waits for it.
func (d *demo) stopAll() {
	for _, c := range d.procs {
		if c.exited {
			continue
		}
		c.p.Signal(syscall.SIGTERM)
		if err := c.p.Wait(); err != nil {
			d.fail("%q did not exit cleanly: %v", c.id, err)
		}
		c.exited = true
	}
}

// interval is one term of serving as the journal shows it.
type interval struct {
	id         string
	token      int64
	start, end int64
}

// check verifies, from the journal alone, that no two indexers served at
// once and that tokens grew, and prints the verdict.
func (d *demo) check() {
	open := map[int64]*interval{}
	var terms []*interval
	for _, r := range d.seen {
		switch r.Event {
		case "serve-start":
			iv := &interval{id: r.ID, token: r.Token, start: r.Mono, end: -1}
			open[r.Token] = iv
			terms = append(terms, iv)
			if died, ok := d.killed[r.PID]; ok {
				iv.end = died
			}
		case "serve-stop":
			if iv := open[r.Token]; iv != nil {
				iv.end = r.Mono
			}
		}
	}
	sort.Slice(terms, func(i, j int) bool { return terms[i].start < terms[j].start })

	fmt.Fprintf(d.out, "\nchecks (from the indexers' own journal, CLOCK_MONOTONIC):\n")
	overlaps := 0
	for i, iv := range terms {
		if iv.end < 0 {
			d.fail("%q (token %d) never recorded the end of its serving", iv.id, iv.token)
			continue
		}
		if i > 0 && terms[i-1].end > iv.start {
			overlaps++
			d.fail("%q (token %d) started serving %v before %q (token %d) stopped",
				iv.id, iv.token, monoDuration(iv.start, terms[i-1].end), terms[i-1].id, terms[i-1].token)
		}
	}
	verdict(d.out, overlaps == 0 && len(terms) >= 4, fmt.Sprintf("never two serving at once (%d serving terms checked)", len(terms)))

	var tokens []string
	increasing := true
	for i, iv := range terms {
		tokens = append(tokens, fmt.Sprint(iv.token))
		if i > 0 && iv.token <= terms[i-1].token {
			increasing = false
		}
	}
	if !increasing {
		d.fail("tokens did not strictly increase: %s", strings.Join(tokens, ", "))
	}
	verdict(d.out, increasing, "tokens strictly increase: "+strings.Join(tokens, " < "))
	if h := d.handed; h != nil {
		ok := h.next.ID == h.to && h.next.Token > h.from.Token && h.stop.Mono <= h.next.Mono && h.follows
		switch {
		case h.next.ID != h.to:
			d.fail("the transfer to %q was taken by %q", h.to, h.next.ID)
		case h.next.Token <= h.from.Token:
			d.fail("the transfer to %q gave token %d, not above %d", h.to, h.next.Token, h.from.Token)
		case h.stop.Mono > h.next.Mono:
			d.fail("%q started serving %v before %q stopped, at the transfer", h.to, monoDuration(h.next.Mono, h.stop.Mono), h.from.ID)
		case !h.follows:
			d.fail("%q did not run on as a follower after the transfer", h.from.ID)
		}
		verdict(d.out, ok, fmt.Sprintf("a transfer hands the claim to the follower it names: %q (token %d) to %q (token %d), %v without a leader, and %q runs on",
			h.from.ID, h.from.Token, h.next.ID, h.next.Token, monoDuration(h.stop.Mono, h.next.Mono).Round(time.Microsecond), h.from.ID))
	} else {
		d.fail("no transfer was made")
		verdict(d.out, false, "a transfer hands the claim to the follower it names")
	}
	staleRefused := !d.hasFailure("stale token")
	verdict(d.out, staleRefused, "a write under a dead term's token is refused")
	for _, t := range d.timings {
		fmt.Fprintf(d.out, "  · %s\n", t)
	}
	if len(d.failed) == 0 {
		fmt.Fprintf(d.out, "\nall checks held\n")
		return
	}
	fmt.Fprintf(d.out, "\nFAILED:\n")
	for _, f := range d.failed {
		fmt.Fprintf(d.out, "  - %s\n", f)
	}
}

func (d *demo) hasFailure(substr string) bool {
	for _, f := range d.failed {
		if strings.Contains(f, substr) {
			return true
		}
	}
	return false
}

func verdict(w io.Writer, ok bool, what string) {
	mark := "ok  "
	if !ok {
		mark = "FAIL"
	}
	fmt.Fprintf(w, "  %s %s\n", mark, what)
}

func (d *demo) dumpChildren(w io.Writer) {
	for _, c := range d.procs {
		if b, err := os.ReadFile(c.log); err == nil && len(b) > 0 {
			fmt.Fprintf(w, "\n--- %s (stderr) ---\n%s", c.id, b)
		}
	}
}
