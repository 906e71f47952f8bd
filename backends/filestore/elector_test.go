package filestore

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
)

const (
	electionKey = "service/leader"
	electionTTL = time.Second
)

// childElector runs an Elector over the store in envDir until its stdin
// closes, then stops it. It reports, on stdout:
//
//	elected <token>
//	demoted <token> <reason>
//	lead <token> <now> <deadline>   every 2ms while IsLeader holds (wall ns)
//
// The samples let the parent check that no two processes lead at once.
func childElector() error {
	s, err := Open(context.Background(), os.Getenv(envDir), WithCreate())
	if err != nil {
		return err
	}
	defer s.Close()
	locker, err := backends.NewLocker(s)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex // guards out
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	wall := clock.New()
	e, err := elector.New(locker, elector.Config{
		Key:      electionKey,
		Identity: os.Getenv(envID),
		TTL:      electionTTL,
		Clock:    wall,
		OnElected: func(ctx context.Context, t elector.Term) {
			say("elected %d", t.Token)
			<-ctx.Done()
		},
		OnDemoted: func(t elector.Term, c elector.Cause) { say("demoted %d %v", t.Token, c.Reason) },
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := e.Start(ctx); err != nil {
		return err
	}
	sampling := make(chan struct{})
	go func() {
		defer close(sampling)
		tick := wall.Ticker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if t, ok := e.Term(); ok {
				say("lead %d %d %d", t.Token, wall.Now().UnixNano(), t.Deadline.UnixNano())
			}
		}
	}()
	io.Copy(io.Discard, os.Stdin)
	stopCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	err = e.Stop(stopCtx)
	cancel()
	<-sampling
	return err
}

// tenure is what the parent saw of one term.
type tenure struct {
	proc         int
	first, last  int64 // wall ns of the first and last "lead" sample
	lastDeadline int64 // the local deadline in the last sample
}

// TestElectorAcrossProcesses runs three processes electing a leader over one
// store directory. The leader is SIGKILLed, twice: each time another process
// takes over once the dead leader's TTL has run out, with a higher token,
// and at no instant do two processes report leading. The last leader stops
// gracefully and reports its demotion.
func TestElectorAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	ctx := ctxT(t)
	const procs = 3
	cs := make([]*child, procs)
	for i := range cs {
		cs[i] = startChild(t, "elector", nil, envDir+"="+dir, envID+"=node-"+strconv.Itoa(i))
	}

	// One goroutine per child collects its lines into a shared log.
	type line struct {
		proc int
		f    []string
	}
	lines := make(chan line, 1024)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range c.lines {
				lines <- line{i, strings.Fields(l)}
			}
		}()
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.stdin.Close()
			c.cmd.Process.Kill()
		}
		go func() {
			for range lines {
			}
		}()
		wg.Wait()
		close(lines)
	})

	terms := map[int64]*tenure{}
	elected := map[int64]int{}
	var demoted []string
	// await reads lines until cond holds.
	await := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case l := <-lines:
				switch {
				case len(l.f) == 2 && l.f[0] == "elected":
					tok, _ := strconv.ParseInt(l.f[1], 10, 64)
					elected[tok] = l.proc
				case len(l.f) == 3 && l.f[0] == "demoted":
					demoted = append(demoted, fmt.Sprintf("node-%d token %s: %s", l.proc, l.f[1], l.f[2]))
				case len(l.f) == 4 && l.f[0] == "lead":
					tok, _ := strconv.ParseInt(l.f[1], 10, 64)
					now, _ := strconv.ParseInt(l.f[2], 10, 64)
					dl, _ := strconv.ParseInt(l.f[3], 10, 64)
					tn := terms[tok]
					if tn == nil {
						tn = &tenure{proc: l.proc, first: now}
						terms[tok] = tn
					}
					if tn.proc != l.proc {
						t.Fatalf("token %d reported by node-%d and node-%d", tok, tn.proc, l.proc)
					}
					tn.last, tn.lastDeadline = now, dl
				default:
					t.Fatalf("node-%d said %q", l.proc, l.f)
				}
			case <-ctx.Done():
				t.Fatalf("%s: not before the test deadline", what)
			}
		}
	}
	leaderOtherThan := func(gone map[int]bool) (int64, bool) {
		for tok, tn := range terms {
			if !gone[tn.proc] {
				return tok, true
			}
		}
		return 0, false
	}

	killed := map[int]bool{}
	wall := clock.New()
	var tokens []int64
	for round := range procs - 1 {
		var tok int64
		await(fmt.Sprintf("round %d: a leader", round), func() bool {
			var ok bool
			tok, ok = leaderOtherThan(killed)
			return ok
		})
		tokens = append(tokens, tok)
		victim := terms[tok].proc
		killedAt := wall.Now()
		cs[victim].cmd.Process.Kill()
		killed[victim] = true
		var next int64
		await(fmt.Sprintf("round %d: a new leader after node-%d was killed", round, victim), func() bool {
			var ok bool
			next, ok = leaderOtherThan(killed)
			return ok
		})
		t.Logf("round %d: node-%d (token %d) killed; node-%d took over with token %d after %v",
			round, victim, tok, terms[next].proc, next, time.Duration(terms[next].first-killedAt.UnixNano()).Round(time.Millisecond))
	}
	last, _ := leaderOtherThan(killed)
	tokens = append(tokens, last)
	// A few more samples of the last leader, then a graceful stop.
	seen := terms[last].last
	await("more samples of the last leader", func() bool { return terms[last].last > seen })
	lastProc := terms[last].proc
	cs[lastProc].stdin.Close()
	await("the last leader's demotion", func() bool { return len(demoted) > 0 })

	if !slices.IsSorted(tokens) || len(slices.Compact(slices.Clone(tokens))) != len(tokens) {
		t.Errorf("tokens in order of leadership = %v, want strictly increasing", tokens)
	}
	for i := 1; i < len(tokens); i++ {
		prev, cur := terms[tokens[i-1]], terms[tokens[i]]
		if cur.first <= prev.last {
			t.Errorf("token %d (node-%d) led from %d while token %d (node-%d) still led at %d",
				tokens[i], cur.proc, cur.first, tokens[i-1], prev.proc, prev.last)
		}
		if cur.first < prev.lastDeadline {
			t.Errorf("token %d (node-%d) led from %d, before the killed leader's deadline %d",
				tokens[i], cur.proc, cur.first, prev.lastDeadline)
		}
	}
	for tok, p := range elected {
		if _, ok := terms[tok]; !ok {
			t.Errorf("node-%d was elected with token %d but never reported leading", p, tok)
		}
	}
	if want := fmt.Sprintf("node-%d token %d: stopped", lastProc, last); len(demoted) != 1 || demoted[0] != want {
		t.Errorf("demotions = %q, want [%q]", demoted, want)
	}
}
