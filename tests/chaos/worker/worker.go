package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/slots"
	"github.com/tenure-go/tenure/storeurl"
	"github.com/tenure-go/tenure/tests/chaos/journal"

	// The stores a worker opens by URL.
	_ "github.com/tenure-go/tenure/backends/dynamodb"
	_ "github.com/tenure-go/tenure/backends/etcd"
	_ "github.com/tenure-go/tenure/backends/filestore"
	_ "github.com/tenure-go/tenure/backends/kube"
	_ "github.com/tenure-go/tenure/backends/nats"
	_ "github.com/tenure-go/tenure/backends/postgres"
)

// The ways a worker can be broken on purpose, to show the checker catches
// each (see the tests).
const (
	brokenNone    = ""
	BrokenLate    = "late"    // keeps acting for a TTL after its term ended
	BrokenNoToken = "notoken" // writes with a token it was not granted
	BrokenRelease = "release" // at shutdown, releases the claim first and drains its work after
)

// workerConfig is what a worker process is told by its flags.
type workerConfig struct {
	store   string        // store URL (package storeurl)
	key     string        // claim key
	id      string        // identity
	ttl     time.Duration // claim TTL
	slots   int           // 0: one claim (backends.NewLocker); N: a slot group of N
	fence   string        // the fenced resource's write URL
	journal string        // journal path
	work    time.Duration // time between checking the term and writing
	broken  string        // one of the broken* modes
	// transfers: 0 for none; else a leader hands its claim, about this
	// long into its term, to another worker whose candidacy it reads.
	transfers time.Duration
}

func workerFlags(args []string) (workerConfig, error) {
	var c workerConfig
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.StringVar(&c.store, "store", "", "store URL")
	fs.StringVar(&c.key, "key", "chaos", "claim key")
	fs.StringVar(&c.id, "id", "", "identity")
	fs.DurationVar(&c.ttl, "ttl", 2*time.Second, "claim TTL")
	fs.IntVar(&c.slots, "slots", 0, "slot group size (0: a single claim)")
	fs.StringVar(&c.fence, "fence", "", "fenced resource URL")
	fs.StringVar(&c.journal, "journal", "", "journal file")
	fs.DurationVar(&c.work, "work", 40*time.Millisecond, "work between check and write")
	fs.StringVar(&c.broken, "broken", "", "misbehave on purpose: late, notoken or release")
	fs.DurationVar(&c.transfers, "transfers", 0, "hand the claim, this long (jittered) into each term, to another worker that declared its candidacy (0: never)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.transfers < 0 || (c.transfers > 0 && c.slots > 0) {
		return c, errors.New("chaos worker: -transfers must be positive and needs a single claim (-slots 0)")
	}
	if c.store == "" || c.id == "" || c.fence == "" || c.journal == "" {
		return c, errors.New("chaos worker: -store, -id, -fence and -journal are required")
	}
	switch c.broken {
	case brokenNone, BrokenLate, BrokenNoToken, BrokenRelease:
	default:
		return c, fmt.Errorf("chaos worker: unknown -broken %q", c.broken)
	}
	return c, nil
}

// Run is the worker process: it campaigns through the public API and,
// while it leads, acts in a loop, each act a check of its term followed,
// after some work, by a write to the fenced resource carrying its token.
// SIGTERM stops it as an operator would (the claim is released).
func Run(args []string) error {
	c, err := workerFlags(args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	j, err := journal.Open(c.journal)
	if err != nil {
		return err
	}
	defer j.Close()
	w := &worker{cfg: c, j: j, pid: os.Getpid(), http: &http.Client{Timeout: 5 * time.Second}, shutdown: ctx.Done()}
	defer w.work.Wait()
	j.Write(journal.Record{Ev: journal.EvStart, Worker: c.id, PID: w.pid})

	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	store, err := storeurl.Open(openCtx, c.store)
	cancel()
	if err != nil {
		return err
	}
	store = &recorder{Store: store, j: j, worker: c.id, pid: w.pid, key: c.key}
	defer store.Close()
	var locker backends.Locker
	if c.slots > 0 {
		locker, err = slots.New(store, slots.Config{Size: c.slots})
	} else {
		locker, err = backends.NewLocker(store)
	}
	if err != nil {
		return err
	}
	e, err := elector.New(locker, elector.Config{
		Key:       c.key,
		Identity:  c.id,
		TTL:       c.ttl,
		Candidacy: c.transfers > 0,
		OnElected: w.lead,
		OnDemoted: func(t elector.Term, cause elector.Cause) {
			j.Write(journal.Record{Ev: journal.EvDemoted, Worker: c.id, PID: w.pid, Tok: t.Token, Slot: t.Slot, Reason: cause.Reason.String()})
		},
	})
	if err != nil {
		return err
	}
	if c.transfers > 0 {
		w.el, w.cands = e, locker.(backends.Candidacies)
	}
	return e.Run(ctx)
}

type worker struct {
	cfg      workerConfig
	j        *journal.Journal
	pid      int
	http     *http.Client
	shutdown <-chan struct{} // closed when the process was told to stop
	work     sync.WaitGroup  // work that outlives OnElected (brokenRelease, a pending transfer)

	el    *elector.Elector     // with -transfers: the worker's elector
	cands backends.Candidacies // and its candidacies
}

// lead is OnElected: the leader's work.
func (w *worker) lead(ctx context.Context, t elector.Term) {
	w.j.Write(journal.Record{Ev: journal.EvElected, Worker: w.cfg.id, PID: w.pid, Tok: t.Token, Slot: t.Slot})
	if w.el != nil {
		w.work.Add(1)
		go func() {
			defer w.work.Done()
			w.transferLater(ctx)
		}()
	}
	switch w.cfg.broken {
	case BrokenRelease:
		// The work runs beside the callback, which returns as soon as the
		// term ends; the process drains the work only after the elector
		// has stopped, so at shutdown the claim is released under it.
		w.work.Add(1)
		go func() {
			defer w.work.Done()
			for {
				now := journal.MonoNow()
				select {
				case <-w.shutdown:
					w.actUntil(t, w.cfg.ttl)
					return
				default:
				}
				if ctx.Err() != nil {
					return
				}
				w.act(now, t)
			}
		}()
		<-ctx.Done()
	case BrokenLate:
		// It acts on for a TTL after its term has ended.
		w.actWhile(ctx, t)
		w.actUntil(t, w.cfg.ttl)
	default:
		w.actWhile(ctx, t)
	}
}

// actWhile acts as long as the term lasts. The clock is read before the
// term is checked, so the instant journaled is one at which the worker
// still held the term by its own clock; the write that follows may land
// much later (a pause), which is what the fenced resource is for.
func (w *worker) actWhile(ctx context.Context, t elector.Term) {
	for {
		now := journal.MonoNow()
		if ctx.Err() != nil {
			return
		}
		w.act(now, t)
	}
}

// actUntil acts for d whatever the term says: a broken worker.
func (w *worker) actUntil(t elector.Term, d time.Duration) {
	end := journal.MonoNow() + int64(d)
	for now := journal.MonoNow(); now < end; now = journal.MonoNow() {
		w.act(now, t)
	}
}

// act journals an act at now, works, and writes to the fenced resource.
func (w *worker) act(now int64, t elector.Term) {
	tok := t.Token
	if w.cfg.broken == BrokenNoToken {
		tok += 1 << 30
	}
	w.j.Write(journal.Record{Ev: journal.EvAct, T: now, Worker: w.cfg.id, PID: w.pid, Tok: tok, Slot: t.Slot})
	time.Sleep(w.cfg.work) // the work: a pause here is a pause after the check
	form := url.Values{
		"w":    {w.cfg.id},
		"pid":  {strconv.Itoa(w.pid)},
		"tok":  {strconv.FormatInt(tok, 10)},
		"slot": {strconv.Itoa(t.Slot)},
		"act":  {strconv.FormatInt(now, 10)},
	}
	resp, err := w.http.PostForm(w.cfg.fence, form)
	ok := false
	if err == nil {
		ok = resp.StatusCode == http.StatusNoContent
		_ = resp.Body.Close()
	}
	w.j.Write(journal.Record{Ev: journal.EvWrite, Worker: w.cfg.id, PID: w.pid, Tok: tok, Slot: t.Slot, Act: now, OK: ok})
	time.Sleep(w.cfg.work / 8)
}

// transferLater waits about cfg.transfers (jittered by half either way)
// into the term that ctx belongs to, then hands the claim to another
// worker whose candidacy is listed, chosen at random. Transfer must not
// be called from OnElected, which it waits for: this runs beside it. A
// transfer that fails leaves the claim as Stop would; the elector
// campaigns again either way.
func (w *worker) transferLater(ctx context.Context) {
	d := w.cfg.transfers/2 + rand.N(w.cfg.transfers)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	lctx, cancel := context.WithTimeout(ctx, w.cfg.ttl)
	cs, _, err := w.cands.Candidates(lctx, w.cfg.key)
	cancel()
	if err != nil {
		return
	}
	var others []string
	for _, c := range cs {
		if c.Holder.ID != w.cfg.id {
			others = append(others, c.Holder.ID)
		}
	}
	if len(others) == 0 {
		return
	}
	to := others[rand.N(len(others))]
	tctx, cancel := context.WithTimeout(context.Background(), 2*w.cfg.ttl)
	defer cancel()
	_ = w.el.Transfer(tctx, to)
}
