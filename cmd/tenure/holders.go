package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"
)

func newHoldersCmd(o *options) *cobra.Command {
	var store, key string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "holders --store URL --key KEY [--json]",
		Short: "Print the holders of a claim or of a slot group",
		Long: strings.TrimSpace(`
Holders prints the live holders of KEY, one line each: identity, slot,
fencing token and the time left to the claim as the store judged it when it
was read (a hint, never a safety bound). For a slot group (tenure run
--slots N) it prints the holder of every live slot. --json prints a JSON
array instead.

Exit status: 0, also when nobody holds the claim; 2 for bad usage; 69 if the
store cannot be opened within --timeout (default 10s) or read.`),
		Example: strings.TrimSpace(`
  tenure holders --store file:///var/lib/tenure --key indexer
  tenure holders --store etcd://10.0.0.1:2379/tenure --key workers --json | jq '.[].token'`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			loc, err := parseReadStore(store)
			if err != nil {
				return err
			}
			if err := checkKey(key); err != nil {
				return err
			}
			log, err := o.logger()
			if err != nil {
				return err
			}
			claims, err := readHolders(context.Background(), log, loc, key, o.timeout)
			if err != nil {
				return storeError{err}
			}
			if asJSON {
				err = printJSON(o, claims)
			} else {
				err = printTable(o, claims)
			}
			if err != nil {
				log.Error("holders", "err", err)
				return exitCode(exitInternal)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp())
	f.StringVar(&key, "key", "", "claim key, or slot group key (required)")
	f.BoolVar(&asJSON, "json", false, "print a JSON array")
	return cmd
}

// readHolders lists the live holders of key; the generic Locker lists a
// slot group's slot holders as well as a single claim's holder. Opening
// the store, and then reading it, may each take up to timeout.
func readHolders(ctx context.Context, log *slog.Logger, loc *storeurl.Location, key string, timeout time.Duration) ([]backends.Claim, error) {
	s, err := openStore(ctx, log, loc, timeout)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	l, err := backends.NewLocker(s)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", loc, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	claims, err := l.Holders(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read holders of %q in %s: %w", key, loc, err)
	}
	return claims, nil
}

func printTable(o *options, claims []backends.Claim) error {
	w := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "HOLDER\tSLOT\tTOKEN\tREMAINING")
	for _, c := range claims {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", c.Holder.ID, c.Slot, c.Token, c.Remaining.Round(time.Millisecond))
	}
	return w.Flush()
}

// holderJSON is one line of holders --json.
type holderJSON struct {
	Holder           string  `json:"holder"`
	Nonce            string  `json:"nonce"`
	Slot             int     `json:"slot"`
	Token            int64   `json:"token"`
	RemainingSeconds float64 `json:"remaining_seconds"`
}

func printJSON(o *options, claims []backends.Claim) error {
	out := make([]holderJSON, 0, len(claims))
	for _, c := range claims {
		out = append(out, holderJSON{
			Holder: c.Holder.ID, Nonce: c.Holder.Nonce, Slot: c.Slot, Token: c.Token,
			RemainingSeconds: c.Remaining.Seconds(),
		})
	}
	enc := json.NewEncoder(o.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
