package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/shards"
	"github.com/tenure-go/tenure/slots"
	"github.com/tenure-go/tenure/storeurl"
)

func newResizeCmd(o *options) *cobra.Command {
	var store, key, group string
	var size, count int
	cmd := &cobra.Command{
		Use:   "resize --store URL (--key KEY --slots N | --group G --shards N)",
		Short: "Change how many holders a slot group allows, or how many shards a shard group has",
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

With --group and --shards, resize changes the shard count of the shard
group G (package shards) to N while its members run: each member drains
and releases its shards of the old count and takes those of the new one,
each new shard only once the old shards its keys come from have ended, so
no key has two owners. Resize returns once every shard of the old count
has ended; a change cut short by --timeout goes on, and the same command
finishes it.

Exit status: 0 when the group has size N (or N shards); 2 for bad usage, a
KEY that is not a slot group or a G that is no shard group included, and a
change of G's count towards another N in flight; 69 if the store cannot be
opened within --timeout, read or written, or the change is not done by
then.`),
		Example: examples(`
  tenure resize --store file:///var/lib/tenure --key workers --slots 5
  tenure resize --store etcd://10.0.0.1:2379 --group kv --shards 512`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			loc, err := parseExistingStore(store)
			if err != nil {
				return err
			}
			if loc, err = o.withPassword(loc); err != nil {
				return err
			}
			// Either form is a name checked as a key, a number in range, and
			// a change; they differ in what they change and how they say it.
			name, n, most, flag := key, size, slots.MaxSize, "--slots"
			change := resize
			now, same := "group %q: size %d", ", unchanged"
			if group != "" || count != 0 {
				if key != "" || size != 0 {
					return usagef("--group and --shards change a shard group, --key and --slots a slot group: give one pair")
				}
				name, n, most, flag = group, count, shards.MaxCount, "--shards"
				change = resizeShards
				now, same = "shard group %q: %d shards", ""
			}
			if err := checkKey(name); err != nil {
				return err
			}
			if n < 1 || n > most {
				return usagef("%s %d: want 1 to %d", flag, n, most)
			}
			log, err := o.logger()
			if err != nil {
				return err
			}
			// Opening the store, then the change, may each take up to --timeout.
			s, err := openStore(context.Background(), log, loc, o.timeout)
			if err != nil {
				return storeError{err}
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
			defer cancel()
			from, err := change(ctx, log, s, loc, name, n)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.stdout, now, name, n)
			if from == n {
				fmt.Fprint(o.stdout, same+"\n")
			} else {
				fmt.Fprintf(o.stdout, ", was %d\n", from)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&store, "store", "", storeFlagHelp())
	f.StringVar(&key, "key", "", "slot group key (required)")
	f.IntVar(&size, "slots", 0, "the slot group's new size (with --key)")
	f.StringVar(&group, "group", "", "shard group name (with --shards)")
	f.IntVar(&count, "shards", 0, "the shard group's new count (with --group)")
	return cmd
}

// errNotGroup is a resize of a key that is no slot group.
var errNotGroup = errors.New("not a slot group (no size in the store); tenure run --slots N makes one")

// resize sets the size of group key in s, the store at loc, to n and
// returns the size it had.
func resize(ctx context.Context, log *slog.Logger, s backends.Store, loc *storeurl.Location, key string, n int) (int, error) {
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

// errNotShardGroup is a resize of a group no shard member has started.
var errNotShardGroup = errors.New("not a shard group (no count in the store); its first member records one")

// resizeShards changes the shard count of group in s, the store at loc,
// to n and returns the count it had.
func resizeShards(ctx context.Context, log *slog.Logger, s backends.Store, loc *storeurl.Location, group string, n int) (int, error) {
	from, err := shards.StoredCount(ctx, s, group)
	if errors.Is(err, backends.ErrNotFound) {
		return 0, usageError{fmt.Errorf("resize %q: %w", group, errNotShardGroup)}
	}
	if err != nil {
		return 0, storeError{fmt.Errorf("resize %q in %s: %w", group, loc, err)}
	}
	err = shards.Resize(ctx, s, group, n)
	switch {
	case errors.Is(err, shards.ErrResizing):
		return 0, usageError{fmt.Errorf("resize %q in %s: %w", group, loc, err)}
	case errors.Is(err, context.DeadlineExceeded):
		return 0, storeError{fmt.Errorf("resize %q in %s: not done within --timeout, and going on (run the same command to finish it): %w", group, loc, err)}
	case err != nil:
		return 0, storeError{fmt.Errorf("resize %q in %s: %w", group, loc, err)}
	}
	log.Info("resized", "group", group, "from", from, "to", n)
	return from, nil
}
