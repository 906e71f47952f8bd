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
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/slots"
)

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
	fs.StringVar(&c.store, "store", "", "store URL: file://DIR, etcd://HOST:PORT/PREFIX or kube://NAMESPACE?kubeconfig=PATH")
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
	el      *elector.Elector
	journal *journal
	log     *slog.Logger
	clk     clock.Clock
	addr    string

	serving atomic.Bool  // true from publication to the end of the term's work
	slot    atomic.Int64 // the slot of the current or last term
	token   atomic.Int64 // the token of the current or last term
	stale   atomic.Int64 // publications refused because a later term had written
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
	store, err := openStore(ctx, cfg.store)
	if err != nil {
		return err
	}
	defer store.Close()
	group, err := slots.New(store, slots.Config{Size: cfg.slots})
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
	ix := &indexer{cfg: cfg, store: store, journal: j, log: log, clk: clock.New(), addr: ln.Addr().String()}
	ix.slot.Store(-1)
	ix.el, err = elector.New(group, elector.Config{
		Key:       cfg.group,
		Identity:  cfg.id,
		TTL:       cfg.ttl,
		Clock:     ix.clk,
		Logger:    log,
		OnElected: ix.onElected,
	})
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

	runErr := ix.el.Run(ctx)

	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	wg.Wait()
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	return nil
}

// onElected is the indexer's serving work: publish the endpoint under the
// term's token, then serve until the term ends.
func (ix *indexer) onElected(ctx context.Context, t elector.Term) {
	ix.slot.Store(int64(t.Slot))
	ix.token.Store(t.Token)
	if !ix.publish(ctx, t) {
		return
	}
	ix.serving.Store(true)
	ix.journal.write(record{Event: "serve-start", ID: ix.cfg.id, Token: t.Token, Slot: t.Slot, Addr: ix.addr})
	<-ctx.Done() // serve until the term ends
	ix.serving.Store(false)
	ix.journal.write(record{Event: "serve-stop", ID: ix.cfg.id, Token: t.Token, Slot: t.Slot})
}

// publish writes the endpoint under t's token, retrying while the store is
// briefly unavailable. It reports false if the term ended first or a later
// term had already written: then this indexer must not serve.
func (ix *indexer) publish(ctx context.Context, t elector.Term) bool {
	ep := endpoint{ID: ix.cfg.id, Addr: ix.addr, Slot: t.Slot, Token: t.Token}
	retry := ix.clk.Ticker(200 * time.Millisecond)
	defer retry.Stop()
	for {
		err := publish(ctx, ix.store, endpointKey(ix.cfg.group, t.Slot), ep)
		switch {
		case err == nil:
			return true
		case errors.Is(err, errStale):
			ix.stale.Add(1)
			ix.journal.write(record{Event: "stale-rejected", ID: ix.cfg.id, Token: t.Token, Slot: t.Slot})
			ix.log.Warn("not serving: a later term published", "token", t.Token, "err", err)
			return false
		case backends.Classify(err) == backends.ClassFatal:
			ix.log.Error("not serving: endpoint not published", "token", t.Token, "err", err)
			return false
		}
		ix.log.Warn("publish endpoint, retrying", "token", t.Token, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-retry.C:
		}
	}
}

// status is the body of GET /status.
type status struct {
	ID      string `json:"id"`
	State   string `json:"state"`
	Serving bool   `json:"serving"`
	Leader  string `json:"leader"`
	Token   int64  `json:"token"`
	Slot    int    `json:"slot"`
	Stale   int64  `json:"stale_rejected"`
}

func (ix *indexer) status() status {
	st := status{
		ID:      ix.cfg.id,
		State:   ix.el.State().String(),
		Serving: ix.serving.Load() && ix.el.IsLeader(),
		Token:   ix.token.Load(),
		Slot:    int(ix.slot.Load()),
		Stale:   ix.stale.Load(),
	}
	if l, ok := ix.el.Leader(); ok {
		st.Leader = l.Holder.ID
	}
	return st
}

func (ix *indexer) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ix.status())
	})
	return mux
}
