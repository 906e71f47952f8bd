package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/storeurl"
)

func newWatchCmd(o *options) *cobra.Command {
	var store, key string
	var asJSON bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "watch --store URL --key KEY [--json] [--interval D]",
		Short: "Follow a claim and print every change of holder",
		Long: strings.TrimSpace(`
Watch prints the holders of KEY (a claim, or every slot of a slot group),
or "free" if nobody holds it, then one line each time a holder appears
("held") or goes ("gone": released or expired), with the time it saw the
change, until SIGINT or SIGTERM. Changes seen in one read are printed in
the order they happened: what went before what came (on a takeover, "gone"
the old holder, then "held" the new one).
It is told of changes by the store's watch, and reads the holders again
every --interval as well, which is what notices an expiry on a store whose
watch does not report expiries, or a watch that broke. It sees what the
store shows when it reads: a holder that came and went between two reads
is not shown. --json prints one JSON object per line.

A read that fails, or gets no answer within --timeout, prints one
"unknown" line with the store's error (the last holders printed are no
longer known to hold); the first read that succeeds after it prints the
whole state again, each holder as "held" (or "free"). A store that fails
fatally (removed, a permission withdrawn) ends watch.

On a store that judges expiry by local observation (Kubernetes, NATS,
PostgreSQL), the holders of the state watch starts from are marked
unverified (--json: "unverified": true): a holder that stopped renewing
long ago still reads as live until watch has seen its claim unchanged for
a TTL, and then shows as gone. watch never prints a time left.

Exit status: 0 after SIGINT, SIGTERM or SIGHUP; 2 for bad usage; 69 if the
store cannot be opened within --timeout (default 10s), or fails fatally.`),
		Example: examples(`
  tenure watch --store file:///var/lib/tenure --key indexer
  tenure watch --store etcd://10.0.0.1:2379/tenure --key workers --json | jq -c 'select(.event == "held")'`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			loc, err := parseReadStore(store)
			if err != nil {
				return err
			}
			if loc, err = o.withPassword(loc); err != nil {
				return err
			}
			if err := checkKey(key); err != nil {
				return err
			}
			if interval <= 0 {
				return usagef("--interval %v: want a positive duration", interval)
			}
			log, err := o.logger()
			if err != nil {
				return err
			}
			w := &watcher{o: o, log: log, key: key, json: asJSON, interval: interval, clock: clock.New()}
			code, err := w.run(loc)
			if err != nil {
				return err
			}
			return exitCode(code)
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp())
	f.StringVar(&key, "key", "", "claim key, or slot group key (required)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per line")
	f.DurationVar(&interval, "interval", time.Second, "read the holders at least this often")
	return cmd
}

// watcher follows one key.
type watcher struct {
	o        *options
	log      *slog.Logger
	key      string
	json     bool
	interval time.Duration
	clock    clock.Clock
	observed bool // the store judges expiry by local observation
}

// seat is what tells one holding apart from another: a new token in a
// slot is a new holding even for the same holder.
type seat struct {
	slot   int
	holder backends.Holder
	token  int64
}

// changeJSON is one line of watch --json.
type changeJSON struct {
	Time   time.Time `json:"time"`
	Event  string    `json:"event"` // held, gone; free: nobody holds the key (at the start, or once known again); unknown: the store cannot be read
	Error  string    `json:"error,omitempty"`
	Key    string    `json:"key"`
	Holder string    `json:"holder"`
	Nonce  string    `json:"nonce"`
	Slot   int       `json:"slot"`
	Token  int64     `json:"token"`
	// Advertised is the value the holder advertises (tenure run
	// --advertise); absent if none.
	Advertised string `json:"advertised,omitempty"`
	// Unverified marks a holder of the state watch starts from (or
	// returns to after unknown) on a store that judges expiry by local
	// observation: it may have stopped renewing long ago, which shows as
	// gone within a TTL.
	Unverified bool `json:"unverified,omitempty"`
}

// run follows the key until a signal, and returns the exit status, or a
// storeError if the store cannot be opened.
func (w *watcher) run(loc *storeurl.Location) (int, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer onSignal(func(syscall.Signal) { cancel() }, endSignals(false)...)()

	store, err := openStore(ctx, w.log, loc, w.o.timeout)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil
		}
		return 0, storeError{err}
	}
	defer store.Close()
	l, err := backends.NewLocker(store)
	if err != nil {
		return 0, storeError{fmt.Errorf("store %s: %w", loc, err)}
	}

	w.observed = store.Capabilities().ObservedExpiry
	seen := map[seat]bool{}
	started := false            // a read succeeded and printed the state it starts from
	unknown := false            // the last read failed: an "unknown" line was printed
	var changes <-chan struct{} // nil while no watch runs
	tick := w.clock.Ticker(w.interval)
	defer tick.Stop()
	for first := true; ; first = false {
		if changes == nil {
			if ch, err := l.WatchClaim(ctx, w.key); err == nil {
				changes = ch
			} else if ctx.Err() == nil {
				w.log.Debug("watch", "key", w.key, "err", err)
			}
		}
		// The watch is set up before the read, so no change after the
		// read goes unsignalled. A read is bounded by --timeout, so that
		// a store that does not answer is reported as unknown.
		rctx, rcancel := context.WithTimeout(ctx, w.o.timeout)
		err := w.read(rctx, l, seen, !started || unknown)
		rcancel()
		switch {
		case ctx.Err() != nil:
			return 0, nil
		case err == nil:
			started, unknown = true, false
		case backends.Classify(err) == backends.ClassFatal:
			// Retrying will not help (a store removed, a permission
			// taken away): a watch that went on would go stale.
			return 0, storeError{fmt.Errorf("watch %q in %s: %w", w.key, loc, err)}
		default:
			w.log.Warn("holders", "key", w.key, "err", err)
			if !unknown {
				w.printUnknown(w.clock.Now(), err)
				unknown = true
			}
		}
		if first {
			w.log.Debug("watching", "key", w.key, "watch", changes != nil)
		}
		select {
		case <-ctx.Done():
			return 0, nil
		case _, ok := <-changes:
			if !ok {
				changes = nil
			}
		case <-tick.C:
		}
	}
}

// read lists the holders and prints what changed since seen, which it
// updates: first the holdings that went, then those that came, each in
// slot order, since a holding can only come after the one before it in
// its slot went. A full read (the first, and the first after an unknown
// state) prints the whole state as well: a line for every holder, or
// "free" when nobody holds the key.
func (w *watcher) read(ctx context.Context, l backends.Locker, seen map[seat]bool, full bool) error {
	claims, err := l.Holders(ctx, w.key)
	if err != nil {
		return err
	}
	now := w.clock.Now()
	current := map[seat]bool{}
	var came []seat
	for _, c := range claims {
		s := seat{slot: c.Slot, holder: c.Holder, token: c.Token}
		current[s] = true
		if full || !seen[s] {
			came = append(came, s)
		}
	}
	var went []seat
	for s := range seen {
		if !current[s] {
			went = append(went, s)
		}
	}
	bySlot := func(a, b seat) int { return cmp.Or(cmp.Compare(a.slot, b.slot), cmp.Compare(a.token, b.token)) }
	slices.SortFunc(went, bySlot)
	slices.SortFunc(came, bySlot)
	for _, s := range went {
		w.print(now, "gone", s)
		delete(seen, s)
	}
	for _, s := range came {
		if full && w.observed {
			w.print(now, "held unverified", s)
		} else {
			w.print(now, "held", s)
		}
		seen[s] = true
	}
	if full && len(claims) == 0 {
		w.print(now, "free", seat{})
	}
	return nil
}

// printUnknown prints that the holders cannot be read now, and why.
func (w *watcher) printUnknown(now time.Time, err error) {
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	if w.json {
		b, _ := json.Marshal(changeJSON{Time: now.UTC(), Event: "unknown", Key: w.key, Error: msg})
		fmt.Fprintf(w.o.stdout, "%s\n", b)
		return
	}
	fmt.Fprintf(w.o.stdout, "%s unknown key=%q err=%q\n", now.UTC().Format(time.RFC3339Nano), w.key, msg)
}

func (w *watcher) print(now time.Time, event string, s seat) {
	unverified := false
	if e, ok := strings.CutSuffix(event, " unverified"); ok {
		event, unverified = e, true
	}
	if w.json {
		b, _ := json.Marshal(changeJSON{Time: now.UTC(), Event: event, Key: w.key, Holder: s.holder.ID, Nonce: s.holder.Nonce, Slot: s.slot, Token: s.token, Advertised: s.holder.Advertised, Unverified: unverified})
		fmt.Fprintf(w.o.stdout, "%s\n", b)
		return
	}
	if event == "free" {
		fmt.Fprintf(w.o.stdout, "%s %s key=%q\n", now.UTC().Format(time.RFC3339Nano), event, w.key)
		return
	}
	mark := ""
	if v := s.holder.Advertised; v != "" {
		mark = fmt.Sprintf(" advertised=%q", v)
	}
	if unverified {
		mark += " unverified"
	}
	fmt.Fprintf(w.o.stdout, "%s %s holder=%q slot=%d token=%d%s\n", now.UTC().Format(time.RFC3339Nano), event, s.holder.ID, s.slot, s.token, mark)
}
