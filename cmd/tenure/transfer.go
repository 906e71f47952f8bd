package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/slots"
	"github.com/tenure-go/tenure/storeurl"
)

// transferPoll is how often transfer reads the claim while it waits for
// the leader to hand it over.
const transferPoll = 100 * time.Millisecond

func newTransferCmd(o *options) *cobra.Command {
	var store, key, to string
	var within time.Duration
	cmd := &cobra.Command{
		Use:   "transfer --store URL --key KEY [--to ID] [--within D]",
		Short: "Ask the leader of a claim to hand it to another candidate",
		Long: strings.TrimSpace(`
Transfer asks the leader of KEY to hand its claim over: to the candidate
whose identity is ID, or, without --to, to the candidate of highest
priority. It leaves a request beside the claim; the leader acts on it at
its next renewal, as a planned handover: it stops acting first (its
command gets SIGTERM and is waited for, as at any end of a term), then
releases the claim reserved for the target, which takes it at a higher
token; no other candidate can take it in between. Transfer waits until
the claim has a new holder and prints it.

Only a leader that keeps candidacies acts on requests: tenure run with
--priority (and programs whose elector sets Config.Candidacy). Without
--to, only candidates that keep candidacies can be chosen.

Exit status: 0 once the claim has a new holder; 1 if KEY has no holder,
is a slot group, or was not handed over within --within (the request is
then withdrawn); 2 for bad usage; 69 if the store cannot be opened within
--timeout, read or written.`),
		Example: examples(`
  tenure holders --store file:///var/lib/tenure --key nightly
  tenure transfer --store file:///var/lib/tenure --key nightly --to host8:977`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			loc, err := parseExistingStore(store)
			if err != nil {
				return err
			}
			if loc, err = o.withPassword(loc); err != nil {
				return err
			}
			if err := checkKey(key); err != nil {
				return err
			}
			if cmd.Flags().Changed("to") {
				if _, err := backends.NewHolder(to); err != nil {
					return usagef("--to %q: %v", to, err)
				}
			}
			if within <= 0 || within > backends.MaxTTL {
				return usagef("--within %v must be above 0 and at most %v", within, backends.MaxTTL)
			}
			log, err := o.logger()
			if err != nil {
				return err
			}
			from, next, err := transfer(context.Background(), log, loc, key, to, within, o.timeout)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.stdout, "transferred %q: from %q (token %d) to %q (token %d)\n", key, from.Holder.ID, from.Token, next.Holder.ID, next.Token)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp())
	f.StringVar(&key, "key", "", "claim key (required)")
	f.StringVar(&to, "to", "", "identity of the candidate to hand the claim to (default: the candidate of highest priority)")
	f.DurationVar(&within, "within", time.Minute, "how long the request stands, and transfer waits for the new holder")
	return cmd
}

// transfer leaves a transfer request for the leader of key and waits, at
// most within, until the claim has a new holder; it returns the holder it
// read first and the new one.
func transfer(ctx context.Context, log *slog.Logger, loc *storeurl.Location, key, to string, within, timeout time.Duration) (from, next backends.Claim, err error) {
	s, err := openStore(ctx, log, loc, timeout)
	if err != nil {
		return from, next, storeError{err}
	}
	defer s.Close()
	l, err := backends.NewLocker(s)
	if err != nil {
		return from, next, storeError{fmt.Errorf("store %s: %w", loc, err)}
	}
	holders := func() ([]backends.Claim, error) {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		hs, err := l.Holders(rctx, key)
		if err != nil {
			return nil, storeError{fmt.Errorf("read holders of %q in %s: %w", key, loc, err)}
		}
		return hs, nil
	}
	hs, err := holders()
	if err != nil {
		return from, next, err
	}
	switch {
	case len(hs) == 0:
		return from, next, failure{fmt.Errorf("transfer %q: the claim has no holder (tenure holders lists who holds what)", key)}
	case len(hs) > 1 || hs[0].Key != key || isGroup(ctx, s, key, timeout):
		return from, next, failure{fmt.Errorf("transfer %q: a slot group's slots cannot be transferred", key)}
	}
	from = hs[0]
	wctx, cancel := context.WithTimeout(ctx, timeout)
	req, err := l.RequestTransfer(wctx, key, to, within)
	cancel()
	if err != nil {
		return from, next, storeError{fmt.Errorf("transfer %q in %s: %w", key, loc, err)}
	}
	log.Info("transfer requested", "key", key, "holder", from.Holder, "token", from.Token, "to", to)
	clk := clock.New()
	deadline := clk.Now().Add(within)
	tick := clk.Ticker(transferPoll)
	defer tick.Stop()
	for clk.Now().Before(deadline) {
		<-tick.C
		hs, err := holders()
		if err != nil {
			log.Warn("transfer: reading the claim failed; trying again", "err", err)
			continue
		}
		if len(hs) == 1 && hs[0].Token > from.Token {
			return from, hs[0], nil
		}
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := l.ClearTransferRequest(cctx, req); err != nil && !errors.Is(err, backends.ErrConflict) {
		log.Warn("transfer: the request could not be withdrawn; it expires on its own", "err", err)
	}
	return from, next, failure{fmt.Errorf("transfer %q: %q (token %d) did not hand the claim over within %v; does it keep candidacies (tenure run --priority)?", key, from.Holder.ID, from.Token, within)}
}

// isGroup reports whether key is a slot group's key.
func isGroup(ctx context.Context, s backends.Store, key string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := s.Get(ctx, slots.SizeKey(key))
	return err == nil
}
