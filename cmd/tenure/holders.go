package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/benbjohnson/clock"
	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/wire"
	"github.com/tenure-go/tenure/slots"
	"github.com/tenure-go/tenure/storeurl"
)

func newHoldersCmd(o *options) *cobra.Command {
	var store, key, prefix string
	var asJSON, wait bool
	cmd := &cobra.Command{
		Use:   "holders --store URL (--key KEY | --prefix P) [--json] [--wait]",
		Short: "Print the holders of a claim or of a slot group",
		Long: strings.TrimSpace(`
Holders prints the live holders of KEY, one line each: identity, slot,
fencing token, the time left to the claim as the store judged it when it
was read (a hint, never a safety bound), and the time of its last write or
keep-alive as the store recorded it, where it records one (for reading
only: it comes from another host's clock), and the value the holder
advertises (tenure run --advertise), such as its address. For a slot group (tenure run
--slots N) it prints the holder of every live slot. With --prefix P in
place of --key, it lists every live claim whose key begins with P, with its
key first (a file store's file names do not show their keys). --json
prints a JSON array instead.

On a store that judges expiry by local observation (Kubernetes, NATS,
PostgreSQL), a process that has just opened it cannot know how long a
claim has left: a holder that stopped renewing long ago reads as live
until this process has watched its claim unchanged for a TTL. There the
time left is shown as "unverified", never guessed. --wait watches for one
TTL and then answers for certain: a claim whose holder stopped renewing is
gone from the answer, and the others show the time left as this process
judged it. On the other stores (file, etcd) --wait changes nothing.

Exit status: 0, also when nobody holds the claim; 2 for bad usage; 69 if the
store cannot be opened within --timeout (default 10s) or read.`),
		Example: examples(`
  tenure holders --store file:///var/lib/tenure --key indexer
  tenure holders --store etcd://10.0.0.1:2379/tenure --key workers --json | jq '.[].token'
  tenure holders --store file:///var/lib/tenure --prefix nightly/
  tenure holders --store nats://10.0.0.1:4222/claims --key indexer --wait`),
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
			q := holdersQuery{key: key, prefix: prefix, wait: wait, timeout: o.timeout}
			claims, err := q.run(context.Background(), log, loc)
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
	f.BoolVar(&wait, "wait", false, "on a store that judges expiry by local observation, watch for one TTL and answer for certain")
	return cmd
}

// holdersQuery is what tenure holders was asked.
type holdersQuery struct {
	key, prefix string // one of them
	wait        bool
	timeout     time.Duration
}

// shownClaim is a claim as holders prints it.
type shownClaim struct {
	backends.Claim
	// verified: Remaining is the store's judgment. False on a store that
	// judges expiry by local observation, for a claim this process has
	// not watched for its TTL.
	verified bool
}

// run reads the live claims the query names. Opening the store, and then
// each read, may take up to q.timeout. With q.wait, on a store that judges
// expiry by local observation, it reads again once the longest TTL of the
// claims first read has passed, so that the store has watched each of them
// for its TTL: a claim still there then was renewed (verified), one gone
// was not.
func (q holdersQuery) run(ctx context.Context, log *slog.Logger, loc *storeurl.Location) ([]shownClaim, error) {
	s, err := openStore(ctx, log, loc, q.timeout)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	l, err := backends.NewLocker(s)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", loc, err)
	}
	read := func() ([]backends.Claim, error) {
		ctx, cancel := context.WithTimeout(ctx, q.timeout)
		defer cancel()
		if q.prefix != "" {
			return readPrefix(ctx, s, l, loc, q.prefix)
		}
		claims, err := l.Holders(ctx, q.key)
		if err != nil {
			return nil, fmt.Errorf("read holders of %q in %s: %w", q.key, loc, err)
		}
		return claims, nil
	}
	claims, err := read()
	if err != nil {
		return nil, err
	}
	observed := s.Capabilities().ObservedExpiry
	if !observed {
		return shown(claims, nil, true), nil
	}
	if !q.wait {
		if len(claims) > 0 {
			log.Info("this store judges expiry by local observation: a holder that stopped renewing reads as live until watched for a TTL; the time left is unverified (--wait watches for one TTL and answers for certain)")
		}
		return shown(claims, nil, false), nil
	}
	var longest time.Duration
	for _, c := range claims {
		longest = max(longest, c.TTL)
	}
	if longest == 0 {
		return shown(claims, nil, true), nil
	}
	// A margin past the TTL for the time the first read took to be
	// recorded as a sighting.
	d := longest + longest/20 + 100*time.Millisecond
	log.Info("watching the claims for one TTL", "wait", d.String())
	t := clock.New().Timer(d)
	<-t.C
	later, err := read()
	if err != nil {
		return nil, err
	}
	return shown(later, claims, false), nil
}

// shown marks claims verified: all of them if all, else those also in
// first (the same slot and token): the store watched those for their TTL.
func shown(claims, first []backends.Claim, all bool) []shownClaim {
	type seat struct {
		key   string
		slot  int
		token int64
	}
	before := map[seat]bool{}
	for _, c := range first {
		before[seat{c.Key, c.Slot, c.Token}] = true
	}
	out := make([]shownClaim, 0, len(claims))
	for _, c := range claims {
		out = append(out, shownClaim{Claim: c, verified: all || before[seat{c.Key, c.Slot, c.Token}]})
	}
	return out
}

// readPrefix lists the live claims of every key that begins with prefix:
// single claims and the slots of slot groups, by key, then slot.
func readPrefix(ctx context.Context, s backends.Store, l backends.Locker, loc *storeurl.Location, prefix string) ([]backends.Claim, error) {
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
		keys[claimKeyOf(e)] = true
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

// claimKeyOf is the claim key the entry e belongs to: the group's key for
// a slot group's size and slot keys, the claim's key for its transfer
// reservation, candidacies and transfer request, the key itself
// otherwise.
func claimKeyOf(e backends.Entry) string {
	storeKey := e.Key
	if g, ok := strings.CutSuffix(storeKey, "/transfer"); ok && wire.TransferKey(g) == storeKey {
		if _, _, _, _, err := wire.DecodeTransfer(e.Value); err == nil {
			return g
		}
	}
	if i := strings.LastIndex(storeKey, "/candidate-"); i > 0 {
		g := storeKey[:i]
		if _, err := wire.DecodeTransferRequest(e.Value); err == nil && wire.TransferRequestKey(g) == storeKey {
			return g
		}
		if c, _, err := wire.DecodeCandidacy(e.Value); err == nil && wire.CandidateKey(g, c.Nonce) == storeKey {
			return g
		}
	}
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

// remaining is the REMAINING column of c: the time left as the store
// judged it, "unverified" where it did not.
func (c shownClaim) remaining() string {
	if !c.verified {
		return "unverified"
	}
	return c.Remaining.Round(time.Millisecond).String()
}

// recorded is the RECORDED column of c: its last write or keep-alive as
// the store recorded it, "-" where it records none.
func (c shownClaim) recorded() string {
	if c.Recorded.IsZero() {
		return "-"
	}
	return c.Recorded.UTC().Format(time.RFC3339Nano)
}

// advertised is the ADVERTISED column of c: the value its holder
// advertises, "-" where it advertises none. A value with spaces is
// quoted, so that the column stays one field, and so is one that breaks
// backends.ValidateAdvertised's rule (written by something other than
// tenure), so that a control character cannot break the table.
func (c shownClaim) advertised() string {
	v := c.Holder.Advertised
	switch {
	case v == "":
		return "-"
	case backends.ValidateAdvertised(v) != nil,
		strings.ContainsFunc(v, func(r rune) bool { return unicode.IsSpace(r) || r == '"' }):
		return strconv.Quote(v)
	}
	return v
}

func printTable(o *options, claims []shownClaim, withKey bool) error {
	w := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
	if withKey {
		fmt.Fprint(w, "KEY\t")
	}
	fmt.Fprintln(w, "HOLDER\tSLOT\tTOKEN\tREMAINING\tRECORDED\tADVERTISED")
	for _, c := range claims {
		if withKey {
			fmt.Fprintf(w, "%s\t", c.Key)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\n", c.Holder.ID, c.Slot, c.Token, c.remaining(), c.recorded(), c.advertised())
	}
	return w.Flush()
}

// holderJSON is one line of holders --json. RemainingSeconds is absent
// where the store did not judge the time left (Verified false); Recorded
// is absent where the store records no time, Advertised where the holder
// advertises nothing.
type holderJSON struct {
	Key              string     `json:"key"`
	Holder           string     `json:"holder"`
	Nonce            string     `json:"nonce"`
	Slot             int        `json:"slot"`
	Token            int64      `json:"token"`
	Verified         bool       `json:"verified"`
	RemainingSeconds *float64   `json:"remaining_seconds,omitempty"`
	Recorded         *time.Time `json:"recorded,omitempty"`
	Advertised       string     `json:"advertised,omitempty"`
}

func printJSON(o *options, claims []shownClaim) error {
	out := make([]holderJSON, 0, len(claims))
	for _, c := range claims {
		h := holderJSON{
			Key: c.Key, Holder: c.Holder.ID, Nonce: c.Holder.Nonce, Slot: c.Slot, Token: c.Token, Verified: c.verified,
			Advertised: c.Holder.Advertised,
		}
		if c.verified {
			secs := c.Remaining.Seconds()
			h.RemainingSeconds = &secs
		}
		if !c.Recorded.IsZero() {
			t := c.Recorded.UTC()
			h.Recorded = &t
		}
		out = append(out, h)
	}
	enc := json.NewEncoder(o.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
