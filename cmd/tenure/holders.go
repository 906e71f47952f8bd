package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/slots"
	"github.com/tenure-go/tenure/storeurl"
)

func newHoldersCmd(o *options) *cobra.Command {
	var store, key, prefix string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "holders --store URL (--key KEY | --prefix P) [--json]",
		Short: "Print the holders of a claim or of a slot group",
		Long: strings.TrimSpace(`
Holders prints the live holders of KEY, one line each: identity, slot,
fencing token and the time left to the claim as the store judged it when it
was read (a hint, never a safety bound). For a slot group (tenure run
--slots N) it prints the holder of every live slot. With --prefix P in
place of --key, it lists every live claim whose key begins with P, with its
key first (a file store's file names do not show their keys). --json
prints a JSON array instead.

Exit status: 0, also when nobody holds the claim; 2 for bad usage; 69 if the
store cannot be opened within --timeout (default 10s) or read.`),
		Example: examples(`
  tenure holders --store file:///var/lib/tenure --key indexer
  tenure holders --store etcd://10.0.0.1:2379/tenure --key workers --json | jq '.[].token'
  tenure holders --store file:///var/lib/tenure --prefix nightly/`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			loc, err := parseReadStore(store)
			if err != nil {
				return err
			}
			if loc, err = o.withPassword(loc); err != nil {
				return err
			}
			switch {
			case prefix != "" && key != "":
				return usagef("--key and --prefix: give one of them")
			case prefix == "":
				if err := checkKey(key); err != nil {
					return err
				}
			}
			log, err := o.logger()
			if err != nil {
				return err
			}
			var claims []backends.Claim
			if prefix != "" {
				claims, err = readPrefix(context.Background(), log, loc, prefix, o.timeout)
			} else {
				claims, err = readHolders(context.Background(), log, loc, key, o.timeout)
			}
			if err != nil {
				return storeError{err}
			}
			if asJSON {
				err = printJSON(o, claims)
			} else {
				err = printTable(o, claims, prefix != "")
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
	f.StringVar(&key, "key", "", "claim key, or slot group key (this or --prefix is required)")
	f.StringVar(&prefix, "prefix", "", "list every claim whose key begins with this, with its key (\"/\" for every claim of the store's namespace)")
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

// readPrefix lists the live claims of every key that begins with prefix:
// single claims and the slots of slot groups, by key, then slot.
func readPrefix(ctx context.Context, log *slog.Logger, loc *storeurl.Location, prefix string, timeout time.Duration) ([]backends.Claim, error) {
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
	listPrefix := prefix
	if prefix == "/" {
		listPrefix = ""
	}
	entries, err := s.List(ctx, listPrefix)
	if err != nil {
		return nil, fmt.Errorf("list %q in %s: %w", prefix, loc, err)
	}
	// A slot group's store keys (its size, its slots) are read through
	// the group, by its key.
	keys := map[string]bool{}
	for _, e := range entries {
		keys[claimKeyOf(e.Key)] = true
	}
	var claims []backends.Claim
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		cs, err := l.Holders(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("read holders of %q in %s: %w", k, loc, err)
		}
		claims = append(claims, cs...)
	}
	return claims, nil
}

// claimKeyOf is the claim key a store key belongs to: the group's key for
// a slot group's size and slot keys, the key itself otherwise.
func claimKeyOf(storeKey string) string {
	if g, ok := strings.CutSuffix(storeKey, "/size"); ok && slots.SizeKey(g) == storeKey {
		return g
	}
	if i := strings.LastIndex(storeKey, "/slot-"); i > 0 {
		g := storeKey[:i]
		var n int
		if _, err := fmt.Sscanf(storeKey[i+len("/slot-"):], "%d", &n); err == nil && slots.SlotKey(g, n) == storeKey {
			return g
		}
	}
	return storeKey
}

func printTable(o *options, claims []backends.Claim, withKey bool) error {
	w := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
	if withKey {
		fmt.Fprint(w, "KEY\t")
	}
	fmt.Fprintln(w, "HOLDER\tSLOT\tTOKEN\tREMAINING")
	for _, c := range claims {
		if withKey {
			fmt.Fprintf(w, "%s\t", c.Key)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", c.Holder.ID, c.Slot, c.Token, c.Remaining.Round(time.Millisecond))
	}
	return w.Flush()
}

// holderJSON is one line of holders --json.
type holderJSON struct {
	Key              string  `json:"key"`
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
			Key: c.Key, Holder: c.Holder.ID, Nonce: c.Holder.Nonce, Slot: c.Slot, Token: c.Token,
			RemainingSeconds: c.Remaining.Seconds(),
		})
	}
	enc := json.NewEncoder(o.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
