package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/storeurl"
)

// clientConfig is the command line of client.
type clientConfig struct {
	store    string
	group    string
	slots    int
	requests int
	every    time.Duration
}

func parseClient(args []string, stderr io.Writer) (clientConfig, error) {
	var c clientConfig
	fs := flag.NewFlagSet("indexer client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.store, "store", "", "store URL: "+storeurl.Forms())
	fs.StringVar(&c.group, "group", "indexers", "the group the indexers share")
	fs.IntVar(&c.slots, "slots", 1, "the group's number of slots, as given to serve")
	fs.IntVar(&c.requests, "requests", 10, "how many requests to send; 0 sends until interrupted")
	fs.DurationVar(&c.every, "every", 500*time.Millisecond, "time between requests")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	case c.store == "":
		return c, errors.New("--store is required")
	case c.requests < 0:
		return c, fmt.Errorf("--requests %d is negative", c.requests)
	case c.every <= 0:
		return c, fmt.Errorf("--every %v must be positive", c.every)
	}
	return c, nil
}

func runClient(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseClient(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "indexer client: %v\n", err)
		return 2
	}
	if err := client(ctx, cfg, stdout); err != nil {
		fmt.Fprintf(stderr, "indexer client: %v\n", err)
		return 1
	}
	return 0
}

// client sends cfg.requests requests, each to the indexer that serves
// now: it follows the group's claim with elector.Observe and sends each
// request to the address the serving indexer advertises with its claim.
// The request carries the token the observer reported, and the indexer
// answers it only while it serves at that token (GET /query), so a
// request that reaches an indexer whose term has ended is refused, not
// answered by it; the client then waits for the observer's next report.
func client(ctx context.Context, cfg clientConfig, out io.Writer) error {
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
	octx, stop := context.WithCancel(ctx)
	defer stop()
	obs, err := elector.Observe(octx, group, elector.ObserverConfig{Key: cfg.group})
	if err != nil {
		return err
	}
	defer func() {
		stop()
		for range obs { // the observer has ended once its channel is closed
		}
	}()
	hc := &http.Client{Timeout: 5 * time.Second}
	var cur elector.Observation // the latest observation
	tick := time.NewTicker(cfg.every)
	defer tick.Stop()
	for i := 1; cfg.requests == 0 || i <= cfg.requests; {
		select {
		case <-ctx.Done():
			return nil
		case o, ok := <-obs:
			if !ok {
				return ctx.Err()
			}
			cur = o
			fmt.Fprintf(out, "observed: %s\n", describe(o))
			continue
		case <-tick.C:
		}
		if len(cur.Leaders) == 0 {
			fmt.Fprintf(out, "request %d: no serving indexer (%s); not sent\n", i, cur.State)
			i++
			continue
		}
		// With several slots, spread the requests over the serving
		// indexers.
		ld := cur.Leaders[(i-1)%len(cur.Leaders)]
		answer, err := query(ctx, hc, ld)
		if err != nil {
			fmt.Fprintf(out, "request %d: %s at %s (token %d) did not answer: %v\n", i, ld.Holder.ID, ld.Holder.Advertised, ld.Token, err)
		} else {
			fmt.Fprintf(out, "request %d: %s\n", i, answer)
		}
		i++
	}
	return nil
}

// describe is one line about an observation.
func describe(o elector.Observation) string {
	switch o.State {
	case elector.ClaimHeld:
		s := ""
		for i, ld := range o.Leaders {
			if i > 0 {
				s += ", "
			}
			s += fmt.Sprintf("%s at %s (slot %d, token %d)", ld.Holder.ID, ld.Holder.Advertised, ld.Slot, ld.Token)
		}
		return "serving: " + s
	case elector.ClaimFree:
		return "no indexer serves"
	}
	return fmt.Sprintf("unknown: %v", o.Err)
}

// queryAnswer is the body of GET /query.
type queryAnswer struct {
	ID     string `json:"id"`
	Token  int64  `json:"token"`
	Slot   int    `json:"slot"`
	Answer string `json:"answer,omitempty"`
	// Refused says why the indexer did not answer: it does not serve at
	// the token the request carries.
	Refused string `json:"refused,omitempty"`
}

// query sends one request to ld at the address it advertises and
// describes the outcome.
func query(ctx context.Context, hc *http.Client, ld elector.Leader) (string, error) {
	if ld.Holder.Advertised == "" {
		return "", errors.New("it advertises no address")
	}
	url := fmt.Sprintf("http://%s/query?token=%d", ld.Holder.Advertised, ld.Token)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var a queryAnswer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return "", fmt.Errorf("%s: %w", resp.Status, err)
	}
	if a.Refused != "" {
		return fmt.Sprintf("refused by %s (token %d): %s", a.ID, ld.Token, a.Refused), nil
	}
	return fmt.Sprintf("answered by %s (slot %d, token %d): %s", a.ID, a.Slot, a.Token, a.Answer), nil
}
