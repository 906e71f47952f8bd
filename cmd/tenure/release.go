package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/slots"
	"github.com/tenure-go/tenure/storeurl"
)

// errNoClaim is a release of a holder that holds no claim of the key.
var errNoClaim = errors.New("holds no claim of the key (tenure holders lists who does)")

func newReleaseCmd(o *options) *cobra.Command {
	var store, key, holder string
	var slot int
	var force bool
	cmd := &cobra.Command{
		Use:   "release --store URL --key KEY --holder ID --force [--slot N]",
		Short: "End a stuck claim by hand (an operator's escape hatch)",
		Long: strings.TrimSpace(`
Release deletes the claim of KEY held by the identity ID (as tenure holders
prints it), so that another tenure can take it at once instead of waiting
for its TTL: for a claim left with a long TTL by a holder that is gone. In
a slot group, --slot N picks the slot when ID holds several.

The store cannot tell a holder that is gone from one that runs: a listed
claim may belong to a term still running, whose holder renews it. So
release refuses without --force. With --force it deletes the claim as it
read it (a claim renewed or taken over since is left alone), and the holder,
if it still runs, learns of it only at its next renewal: until then two
holders may act at once. Fencing still protects what checks it: the next
holder's TENURE_TOKEN is higher, so a resource that rejects tokens lower
than the highest it has seen refuses the old holder's writes; anything that
does not check the token is not protected. Stop the holder first where you
can (tenure releases its claim itself on SIGTERM).

Exit status: 0 once released; 1 if ID holds no claim of KEY, or the claim
changed since it was read; 2 for bad usage, without --force included; 69 if
the store cannot be opened within --timeout, read or written.`),
		Example: examples(`
  tenure holders --store file:///var/lib/tenure --key nightly
  tenure release --store file:///var/lib/tenure --key nightly --holder host7:4121 --force`),
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
			if holder == "" {
				return usagef("--holder is required: the identity tenure holders prints")
			}
			log, err := o.logger()
			if err != nil {
				return err
			}
			slotSet := cmd.Flags().Changed("slot")
			c, err := release(context.Background(), log, loc, key, holder, slot, slotSet, force, o.timeout)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.stdout, "released %q: holder %q, slot %d, token %d\n", key, c.Holder.ID, c.Slot, c.Token)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp())
	f.StringVar(&key, "key", "", "claim key, or slot group key (required)")
	f.StringVar(&holder, "holder", "", "identity of the holder whose claim to end, as tenure holders prints it (required)")
	f.IntVar(&slot, "slot", 0, "the slot, in a slot group where the holder holds several")
	f.BoolVar(&force, "force", false, "release although the holder's term may still be running (required: see above)")
	return cmd
}

// release deletes the claim of key that holder holds, after the checks
// newReleaseCmd describes, and returns it.
func release(ctx context.Context, log *slog.Logger, loc *storeurl.Location, key, holder string, slot int, slotSet, force bool, timeout time.Duration) (backends.Claim, error) {
	s, err := openStore(ctx, log, loc, timeout)
	if err != nil {
		return backends.Claim{}, storeError{err}
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var l backends.Locker
	if e, err := s.Get(ctx, slots.SizeKey(key)); err == nil {
		// A slot's claim is released through its group, which knows the
		// slot's store key; the group's size does not matter here.
		size := 0
		fmt.Sscan(string(e.Value), &size)
		l, err = slots.New(s, slots.Config{Size: max(size, 1), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return backends.Claim{}, storeError{fmt.Errorf("store %s: %w", loc, err)}
		}
	} else if errors.Is(err, backends.ErrNotFound) {
		if l, err = backends.NewLocker(s); err != nil {
			return backends.Claim{}, storeError{fmt.Errorf("store %s: %w", loc, err)}
		}
	} else {
		return backends.Claim{}, storeError{fmt.Errorf("read %q in %s: %w", key, loc, err)}
	}
	claims, err := l.Holders(ctx, key)
	if err != nil {
		return backends.Claim{}, storeError{fmt.Errorf("read holders of %q in %s: %w", key, loc, err)}
	}
	var mine []backends.Claim
	for _, c := range claims {
		if c.Holder.ID == holder && (!slotSet || c.Slot == slot) {
			mine = append(mine, c)
		}
	}
	switch {
	case len(mine) == 0:
		return backends.Claim{}, failure{fmt.Errorf("release %q: holder %q %w", key, holder, errNoClaim)}
	case len(mine) > 1:
		return backends.Claim{}, usagef("holder %q holds %d slots of %q: add --slot N", holder, len(mine), key)
	}
	c := mine[0]
	if !force {
		return backends.Claim{}, usagef("holder %q's term (slot %d, token %d) may still be running: the store cannot tell; to end it anyway, add --force (see tenure release --help for what fencing still protects)", holder, c.Slot, c.Token)
	}
	if err := l.Release(ctx, c); err != nil {
		if backends.Classify(err) == backends.ClassLost {
			return backends.Claim{}, failure{fmt.Errorf("release %q: the claim changed since it was read, nothing released: %w", key, err)}
		}
		return backends.Claim{}, storeError{fmt.Errorf("release %q in %s: %w", key, loc, err)}
	}
	log.Warn("released by hand", "key", key, "holder", holder, "slot", c.Slot, "token", c.Token)
	return c, nil
}
