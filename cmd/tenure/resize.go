package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/slots"
	"github.com/tenure-go/tenure/storeurl"
)

func newResizeCmd(o *options) *cobra.Command {
	var store, key string
	var size int
	cmd := &cobra.Command{
		Use:   "resize --store URL --key KEY --slots N",
		Short: "Change how many holders a slot group allows",
		Long: strings.TrimSpace(`
Resize sets the size of the slot group KEY, which tenure run --slots
created, to N. The size is kept in the store and shared by every tenure
using the group: the first one records its --slots, and later ones, whatever
their --slots, use the stored size (and log a warning when it differs).
Resize is the way to change it. Once it has returned, no slot at or above N
is taken or renewed: lowering N makes the holders of those slots end their
terms at their next renewal (their commands get SIGTERM).

It refuses a key that is not a slot group: tenure run --slots N with N above
1 makes one.

Exit status: 0 when the group has size N; 2 for bad usage, a KEY that is
not a slot group included; 69 if the store cannot be opened within
--timeout, read or written.`),
		Example: examples(`
  tenure resize --store file:///var/lib/tenure --key workers --slots 5`),
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
			if size < 1 || size > slots.MaxSize {
				return usagef("--slots %d: want 1 to %d", size, slots.MaxSize)
			}
			log, err := o.logger()
			if err != nil {
				return err
			}
			from, err := resize(context.Background(), log, loc, key, size, o.timeout)
			if err != nil {
				return err
			}
			if from == size {
				fmt.Fprintf(o.stdout, "group %q: size %d, unchanged\n", key, size)
			} else {
				fmt.Fprintf(o.stdout, "group %q: size %d, was %d\n", key, size, from)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp())
	f.StringVar(&key, "key", "", "slot group key (required)")
	f.IntVar(&size, "slots", 0, "the group's new size (required)")
	return cmd
}

// errNotGroup is a resize of a key that is no slot group.
var errNotGroup = errors.New("not a slot group (no size in the store); tenure run --slots N makes one")

// resize sets the size of group key to n and returns the size it had.
// Opening the store, then the resize, may each take up to timeout.
func resize(ctx context.Context, log *slog.Logger, loc *storeurl.Location, key string, n int, timeout time.Duration) (int, error) {
	s, err := openStore(ctx, log, loc, timeout)
	if err != nil {
		return 0, storeError{err}
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	e, err := s.Get(ctx, slots.SizeKey(key))
	if errors.Is(err, backends.ErrNotFound) {
		return 0, usageError{fmt.Errorf("resize %q: %w", key, errNotGroup)}
	}
	if err != nil {
		return 0, storeError{fmt.Errorf("resize %q in %s: %w", key, loc, err)}
	}
	from, _ := strconv.Atoi(string(e.Value))
	g, err := slots.New(s, slots.Config{Size: n, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return 0, storeError{fmt.Errorf("store %s: %w", loc, err)}
	}
	if err := g.Resize(ctx, key, n); err != nil {
		return 0, storeError{fmt.Errorf("resize %q in %s: %w", key, loc, err)}
	}
	log.Info("resized", "key", key, "from", from, "to", n)
	return from, nil
}
