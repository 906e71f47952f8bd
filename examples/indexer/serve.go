package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/lifecycle"
	"github.com/tenure-go/tenure/slots"
	"github.com/tenure-go/tenure/storeurl"

	// The stores serve opens by URL. The etcd and Kubernetes stores would
	// work the same; they are left out so that the demo builds without
	// their clients (the tests link them in).
	_ "github.com/tenure-go/tenure/backends/filestore"
	_ "github.com/tenure-go/tenure/backends/memstore"
)

// openTimeout bounds opening the store: an unreachable server fails serve
// with an error that names it instead of hanging.
const openTimeout = 30 * time.Second

// serveConfig is the command line of serve.
type serveConfig struct {
	store   string
	group   string
	id      string
	http    string
	slots   int
	ttl     time.Duration
	journal string
}

func parseServe(args []string, stderr io.Writer) (serveConfig, error) {
	var c serveConfig
	fs := flag.NewFlagSet("indexer serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.store, "store", "", "store URL: "+storeurl.Forms())
	fs.StringVar(&c.group, "group", "indexers", "the group the indexers share")
	fs.StringVar(&c.id, "id", "", "this indexer's identity (may contain spaces)")
	fs.StringVar(&c.http, "http", "127.0.0.1:0", "address for GET /status")
	fs.IntVar(&c.slots, "slots", 1, "how many indexers may serve at once")
	fs.DurationVar(&c.ttl, "ttl", 3*time.Second, "lease TTL: how long a crashed indexer blocks the others")
	fs.StringVar(&c.journal, "journal", "", "append serving intervals to this file (used by demo)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.store == "":
		return c, errors.New("--store is required")
	case c.id == "":
		return c, errors.New("--id is required")
	}
	return c, nil
}

// indexer is one served indexer.
type indexer struct {
	cfg     serveConfig
	store   backends.Store
	group   backends.Locker
	journal *journal
	log     *slog.Logger
	clk     clock.Clock
	addr    string

	mu       sync.Mutex
	el       leadership              // the running or last Elector; guarded by mu
	quit     context.CancelCauseFunc // ends the running Elector; guarded by mu
	resigned string                  // why this indexer last ended a term itself; "" once it serves again; guarded by mu
	pausing  bool                    // between a resignation and the next campaign; guarded by mu

	serving  atomic.Bool  // true from publication to the end of the term's work
	slot     atomic.Int64 // the slot of the current or last term
	token    atomic.Int64 // the token of the current or last term
	stale    atomic.Int64 // publications refused because a later term had written
	failures atomic.Int64 // terms resigned in a row, for the pause before the next campaign
}

// leadership is what GET /status reads of the Elector, and what POST
// /transfer asks of it.
type leadership interface {
	IsLeader() bool
	State() lifecycle.State
	Leader() (elector.Leader, bool)
	Transfer(ctx context.Context, to string) error
}

func runServe(ctx context.Context, args []string, _, stderr io.Writer) int {
	cfg, err := parseServe(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "indexer serve: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("id", cfg.id)
	if err := serve(ctx, cfg, log); err != nil {
		fmt.Fprintf(stderr, "indexer serve: %v\n", err)
		return 1
	}
	return 0
}

// serve runs one indexer until ctx is cancelled, then stops it: the claim is
// released after the serving work has returned, so another indexer takes
// over at once.
func serve(ctx context.Context, cfg serveConfig, log *slog.Logger) error {
	openCtx, cancel := context.WithTimeout(ctx, openTimeout)
	store, err := storeurl.Open(openCtx, cfg.store)
	cancel()
	if err != nil {
		return err
	}
	defer store.Close()
	group, err := newLocker(store, cfg.slots)
	if err != nil {
		return err
	}
	j, err := openJournal(cfg.journal)
	if err != nil {
		return err
	}
	defer j.Close()

	ln, err := net.Listen("tcp", cfg.http)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.http, err)
	}
	ix := &indexer{cfg: cfg, store: store, group: group, journal: j, log: log, clk: clock.New(), addr: ln.Addr().String()}
	ix.slot.Store(-1)
	el, err := ix.newElector()
	if err != nil {
		ln.Close()
		return err
	}

	srv := &http.Server{Handler: ix.routes(), ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("status server", "err", err)
		}
	})
	j.write(record{Event: "listening", ID: cfg.id, Addr: ix.addr})

	runErr := ix.campaign(ctx, el)

	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	wg.Wait()
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	return nil
}

// newLocker returns the Locker of a group of n indexers over store: a
// single claim for n = 1, which Elector.Transfer can hand to a named
// indexer, and an n-slot group above, whose slots cannot be transferred
// (as tenure run chooses between them by --slots).
func newLocker(store backends.Store, n int) (backends.Locker, error) {
	if n == 1 {
		return backends.NewLocker(store)
	}
	return slots.New(store, slots.Config{Size: n})
}

// newElector returns a fresh Elector for the indexer's group and makes it
// the one /status reads. An Elector cannot be started again once stopped,
// so every campaign after a resignation gets a new one (and so a new
// holder nonce).
func (ix *indexer) newElector() (*elector.Elector, error) {
	el, err := elector.New(ix.group, elector.Config{
		Key:       ix.cfg.group,
		Identity:  ix.cfg.id,
		Advertise: ix.addr, // where clients send their requests (see client)
		TTL:       ix.cfg.ttl,
		Clock:     ix.clk,
		Logger:    ix.log,
		OnElected: ix.onElected,
	})
	if err != nil {
		return nil, err
	}
	ix.mu.Lock()
	ix.el = el
	ix.mu.Unlock()
	return el, nil
}

// errResigned is the cause with which a leader that cannot serve ends its
// Elector's Run.
var errResigned = errors.New("indexer: resigned: cannot serve")

// pauseAfter is the pause between a resignation and the next campaign: one
// TTL after the first term resigned in a row, doubling with each next one,
// at most 8 TTLs.
func pauseAfter(ttl time.Duration, resigned int64) time.Duration {
	return ttl << (min(max(resigned, 1), 4) - 1)
}

// campaign runs el until ctx is cancelled. A leader that cannot serve
// resigns (see resign): its Elector stops, which releases the claim once
// onElected has returned, so another indexer can take over; after a pause
// this indexer campaigns again with a new Elector, in case what stopped it
// was its own (a record it cannot read, written by a newer version).
func (ix *indexer) campaign(ctx context.Context, el *elector.Elector) error {
	for {
		runCtx, quit := context.WithCancelCause(ctx)
		ix.mu.Lock()
		ix.quit, ix.pausing = quit, false
		ix.mu.Unlock()
		err := el.Run(runCtx)
		quit(nil)
		if ctx.Err() != nil || err != nil || !errors.Is(context.Cause(runCtx), errResigned) {
			// Stopped, or the Elector ended with an error (for example a
			// stop that timed out while the leader's work still ran: never
			// campaign again beside it).
			return err
		}
		pause := pauseAfter(ix.cfg.ttl, ix.failures.Load())
		ix.mu.Lock()
		ix.pausing = true
		ix.mu.Unlock()
		ix.log.Warn("term resigned; campaigning again after a pause", "pause", pause.String())
		timer := ix.clk.Timer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		if el, err = ix.newElector(); err != nil {
			return err
		}
	}
}

// onElected is the indexer's serving work: publish the endpoint under the
// term's token, then serve until the term ends. A term that cannot publish
// is resigned, not held.
func (ix *indexer) onElected(ctx context.Context, t elector.Term) {
	ix.slot.Store(int64(t.Slot))
	ix.token.Store(t.Token)
	if err := ix.publish(ctx, t); err != nil {
		if ctx.Err() == nil { // else the term ended by itself
			ix.resign(t, err)
		}
		return
	}
	ix.failures.Store(0)
	ix.mu.Lock()
	ix.resigned = ""
	ix.mu.Unlock()
	ix.serving.Store(true)
	ix.journal.write(record{Event: "serve-start", ID: ix.cfg.id, Token: t.Token, Slot: t.Slot, Addr: ix.addr})
	<-ctx.Done() // serve until the term ends
	ix.serving.Store(false)
	ix.journal.write(record{Event: "serve-stop", ID: ix.cfg.id, Token: t.Token, Slot: t.Slot})
}

// resign ends term t because this indexer cannot serve in it: it says why
// (log, journal, /status) and ends the running Elector's Run, whose Stop
// releases the claim as soon as onElected has returned, which it does
// right after.
func (ix *indexer) resign(t elector.Term, err error) {
	ix.failures.Add(1)
	ix.log.Error("cannot serve; ending the term so another indexer can take over", "token", t.Token, "slot", t.Slot, "err", err)
	ix.journal.write(record{Event: "resign", ID: ix.cfg.id, Token: t.Token, Slot: t.Slot, Err: err.Error()})
	ix.mu.Lock()
	ix.resigned = fmt.Sprintf("term with token %d: %v", t.Token, err)
	quit := ix.quit
	ix.mu.Unlock()
	quit(fmt.Errorf("%w: %w", errResigned, err))
}

// publish writes the endpoint under t's token. Transient errors (the store
// briefly unavailable) are retried for at most one TTL; then, or at once
// for a fatal error or a record of a later term, it returns the error and
// this indexer must not serve. It returns ctx's error if the term ended
// first.
func (ix *indexer) publish(ctx context.Context, t elector.Term) error {
	ep := endpoint{ID: ix.cfg.id, Addr: ix.addr, Slot: t.Slot, Token: t.Token}
	retry := ix.clk.Ticker(200 * time.Millisecond)
	defer retry.Stop()
	giveUp := ix.clk.Timer(ix.cfg.ttl)
	defer giveUp.Stop()
	for {
		err := publish(ctx, ix.store, endpointKey(ix.cfg.group, t.Slot), ep)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, errStale):
			ix.stale.Add(1)
			ix.journal.write(record{Event: "stale-rejected", ID: ix.cfg.id, Token: t.Token, Slot: t.Slot})
			return fmt.Errorf("endpoint not published: a later term published: %w", err)
		case backends.Classify(err) == backends.ClassFatal:
			return fmt.Errorf("endpoint not published: %w", err)
		}
		ix.log.Warn("publish endpoint, retrying", "token", t.Token, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-giveUp.C:
			return fmt.Errorf("endpoint not published within %v: %w", ix.cfg.ttl, err)
		case <-retry.C:
		}
	}
}

// status is the body of GET /status. State and IsLeader are read together
// and never disagree: State is "leader" exactly when IsLeader is true.
type status struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	IsLeader bool   `json:"is_leader"`
	Serving  bool   `json:"serving"`
	Leader   string `json:"leader"`
	Token    int64  `json:"token"`
	Slot     int    `json:"slot"`
	Stale    int64  `json:"stale_rejected"`
	// Resigned says why this indexer last ended a term because it could
	// not serve; empty once it serves again.
	Resigned string `json:"resigned,omitempty"`
}

func (ix *indexer) status() status {
	ix.mu.Lock()
	el, resigned, pausing := ix.el, ix.resigned, ix.pausing
	ix.mu.Unlock()
	leading := el.IsLeader()
	st := status{
		ID:       ix.cfg.id,
		State:    stateName(el.State(), leading),
		IsLeader: leading,
		Serving:  ix.serving.Load() && leading,
		Token:    ix.token.Load(),
		Slot:     int(ix.slot.Load()),
		Stale:    ix.stale.Load(),
		Resigned: resigned,
	}
	if pausing && !leading {
		st.State = "resigned" // until the next campaign starts
	}
	if l, ok := el.Leader(); ok {
		st.Leader = l.Holder.ID
	}
	return st
}

// stateName is the state /status shows, derived from leading (IsLeader,
// read first) so that the two never contradict each other: the lifecycle
// state says leader until the Elector's loop has demoted a term whose
// deadline passed, while IsLeader turns false at the deadline itself; such
// a term shows as "demoting". A state read after IsLeader returned true
// may already be past leader; the term was leading at the read.
func stateName(s lifecycle.State, leading bool) string {
	switch {
	case leading:
		return lifecycle.Leader.String()
	case s == lifecycle.Leader:
		return lifecycle.Demoting.String()
	}
	return s.String()
}

func (ix *indexer) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ix.status())
	})
	mux.HandleFunc("GET /query", ix.query)
	mux.HandleFunc("POST /transfer", ix.transfer)
	return mux
}

// transferAnswer is the body of POST /transfer's answer.
type transferAnswer struct {
	ID    string `json:"id"`
	To    string `json:"to"`
	Token int64  `json:"token"` // the token of the term handed over
	// Err says why the claim was not handed over; empty once it was
	// released and reserved for To.
	Err string `json:"error,omitempty"`
}

// transfer hands the claim this indexer leads to the indexer whose
// identity the request names (POST /transfer?to=ID), with
// Elector.Transfer: this indexer stops serving first, as at any end of a
// term, then releases the claim reserved for the target, which takes it
// at a greater token; no other indexer can take it in between. This one
// keeps running as a follower. The answer comes once the claim is
// released and reserved: 200; or 400 without a target, 409 if this
// indexer does not serve, 501 for a group of several slots (a slot cannot
// be transferred), 500 if the store failed (the term has ended all the
// same, and the claim was released plainly or left to expire).
func (ix *indexer) transfer(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	a := transferAnswer{ID: ix.cfg.id, To: r.URL.Query().Get("to"), Token: ix.token.Load()}
	if a.To == "" {
		a.Err = "the request names no target (POST /transfer?to=ID)"
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(a)
		return
	}
	ix.mu.Lock()
	el := ix.el
	ix.mu.Unlock()
	err := el.Transfer(r.Context(), a.To)
	switch {
	case err == nil:
		ix.log.Info("claim transferred", "token", a.Token, "to", a.To)
		_ = json.NewEncoder(w).Encode(a)
		return
	case errors.Is(err, elector.ErrNotLeader):
		w.WriteHeader(http.StatusConflict)
	case errors.Is(err, backends.ErrUnsupported):
		w.WriteHeader(http.StatusNotImplemented)
	case errors.Is(err, backends.ErrInvalid):
		w.WriteHeader(http.StatusBadRequest)
	default:
		ix.log.Warn("transfer failed", "token", a.Token, "to", a.To, "err", err)
		w.WriteHeader(http.StatusInternalServerError)
	}
	a.Err = err.Error()
	_ = json.NewEncoder(w).Encode(a)
}

// query answers a client's request, which carries the token of the term
// the client was told serves (GET /query?token=T): only while this
// indexer serves in that very term. A request routed by an observation
// that has gone stale (another term serves now, or none) is refused with
// 409 Conflict, so that no request is answered by an indexer whose term
// has ended.
func (ix *indexer) query(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	token, err := strconv.ParseInt(r.URL.Query().Get("token"), 10, 64)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(queryAnswer{ID: ix.cfg.id, Refused: "the request carries no token"})
		return
	}
	ix.mu.Lock()
	el := ix.el
	ix.mu.Unlock()
	serving, cur := ix.serving.Load() && el.IsLeader(), ix.token.Load()
	a := queryAnswer{ID: ix.cfg.id, Token: cur, Slot: int(ix.slot.Load())}
	switch {
	case !serving:
		a.Refused = fmt.Sprintf("not serving (the request carries token %d)", token)
	case cur != token:
		a.Refused = fmt.Sprintf("serving at token %d, not %d", cur, token)
	}
	if a.Refused != "" {
		w.WriteHeader(http.StatusConflict)
	} else {
		a.Answer = "ok"
	}
	_ = json.NewEncoder(w).Encode(a)
}
