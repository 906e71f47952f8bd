package shards

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// ErrResizing is returned by Resize when another change of the group's
// count is in flight: a group changes its count once at a time.
var ErrResizing = errors.New("shards: another change of the shard count is in flight")

// layout is a group's count as recorded at G/count: the shard count of
// its current generation and, while a change is in flight, the count of
// the generation before it, whose shard claims are still being sealed.
//
// Stored forms: "S" for generation 0 (the form every earlier release
// wrote, and the only one it reads: a member of an earlier release
// refuses the others with ErrCountMismatch instead of campaigning under
// a count it does not know), "S gN" once generation N ≥ 1 is the only
// one, and "S gN from P" while the claims of generation N-1, which had P
// shards, are being sealed.
type layout struct {
	gen   int // the current generation
	count int // its shard count
	from  int // the previous generation's count while a change is in flight; 0 otherwise
}

func (l layout) changing() bool { return l.from != 0 }

func (l layout) String() string {
	switch {
	case l.gen == 0:
		return strconv.Itoa(l.count)
	case l.from == 0:
		return fmt.Sprintf("%d g%d", l.count, l.gen)
	default:
		return fmt.Sprintf("%d g%d from %d", l.count, l.gen, l.from)
	}
}

// parseLayout reads a stored count in any of layout's forms.
func parseLayout(v []byte) (layout, bool) {
	count := func(s string) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 1 && n <= MaxCount && strconv.Itoa(n) == s
	}
	f := strings.Split(string(v), " ")
	var l layout
	var ok bool
	if l.count, ok = count(f[0]); !ok {
		return layout{}, false
	}
	if len(f) == 1 {
		return l, true
	}
	g, found := strings.CutPrefix(f[1], "g")
	if !found {
		return layout{}, false
	}
	gen, err := strconv.Atoi(g)
	if err != nil || gen < 1 || strconv.Itoa(gen) != g {
		return layout{}, false
	}
	l.gen = gen
	switch {
	case len(f) == 2:
		return l, true
	case len(f) == 4 && f[2] == "from":
		if l.from, ok = count(f[3]); ok {
			return l, true
		}
	}
	return layout{}, false
}

// genShardKey is the claim key of shard in generation gen of group g:
// G/shard/<i> in generation 0, as every earlier release has it, and
// G/shard/g<N>/<i> in generation N. No key of a group nested under
// G/shard/ takes either form (theirs continue with /count, /member/ or
// /shard/), so the generations' keys never meet another group's.
func genShardKey(g string, gen, shard int) string {
	if gen == 0 {
		return shardKey(g, shard)
	}
	return genShardPrefix(g, gen) + strconv.Itoa(shard)
}

// genShardPrefix is the prefix of generation gen's shard keys; in
// generation 0 it is also the prefix of every later generation's.
func genShardPrefix(g string, gen int) string {
	if gen == 0 {
		return shardPrefix(g)
	}
	return shardPrefix(g) + "g" + strconv.Itoa(gen) + "/"
}

// parseShardKey reads key as a shard key of group g in generation gen
// with count shards.
func parseShardKey(g string, gen, count int, key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, genShardPrefix(g, gen))
	if !ok {
		return 0, false
	}
	shard, err := strconv.Atoi(rest)
	if err != nil || shard < 0 || shard >= count || genShardKey(g, gen, shard) != key {
		return 0, false
	}
	return shard, true
}

// sealValue is the value of a sealed claim key of the generation before
// gen: a permanent entry, which no claim decodes, so that no elector of
// that generation takes the key again (its create finds the key present
// and its read finds no claim there). It is the same whoever writes it.
func sealValue(gen int) []byte { return []byte("sealed by g" + strconv.Itoa(gen)) }

// isSeal reports whether v seals a claim key of a generation before gen.
func isSeal(v []byte, gen int) bool {
	g, ok := bytes.CutPrefix(v, []byte("sealed by g"))
	if !ok {
		return false
	}
	n, err := strconv.Atoi(string(g))
	return err == nil && n >= gen
}

// sources lists the shards of a group of from shards whose keys a shard
// of a group of count shards draws on: a key k is in shard
// h(k) mod count, so it can come from shard s of the old count only if
// s ≡ shard (mod gcd(from, count)). Doubling draws each new shard from one
// old shard, halving from two.
func sources(from, count, shard int) []int {
	g := gcd(from, count)
	var out []int
	for s := shard % g; s < from; s += g {
		out = append(out, s)
	}
	return out
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Resize changes the shard count of group, whose members run over store,
// to count, while they run, and returns once the change is done: every
// shard claim of the old count has ended and been sealed, and the group's
// record names count alone. It returns nil at once if the group's count
// is count already.
//
// Members follow the change as their watch (or their next read of the
// group) shows it: each stops its shards of the old count, draining and
// releasing them as at any handover, and campaigns for its shards of the
// new count under new claim keys; a member takes a shard of the new count
// only once every shard of the old count whose keys it draws on has been
// released or has expired and been sealed, so no key ever has an owner
// under each count at once (the package documentation has the steps and
// what a key is routed to meanwhile). Resize itself seals the old claim
// keys that no claim holds, so a group whose members are all gone changes
// too, and it finishes a change an earlier call began (towards the same
// count) and did not finish.
//
// It fails with ErrResizing while a change towards another count is in
// flight, with an error wrapping backends.ErrNotFound if the group has no
// recorded count (no member has started), and with one wrapping
// backends.ErrInvalid if count is out of [1, MaxCount] or makes a key the
// store refuses. Members of a release without changes of count refuse to
// start on a changed group (ErrCountMismatch), and running ones keep
// their shards of the old count until they stop: the change waits for
// them. Cancelling ctx leaves the change in flight; the members go on
// with it, and a later Resize to the same count finishes it.
func Resize(ctx context.Context, store backends.Store, group string, count int) error {
	if count < 1 || count > MaxCount {
		return fmt.Errorf("shards: resize %q: count %d out of range [1, %d]: %w", group, count, MaxCount, backends.ErrInvalid)
	}
	if err := backends.ValidateKey(countKey(group)); err != nil {
		return fmt.Errorf("shards: resize %q: %w", group, err)
	}
	key := countKey(group)
	for {
		e, err := store.Get(ctx, key)
		if errors.Is(err, backends.ErrNotFound) {
			return fmt.Errorf("shards: resize %q: the group has no recorded count (no member has started): %w", group, err)
		}
		if err != nil {
			return fmt.Errorf("shards: resize %q: read the count: %w", group, err)
		}
		cur, ok := parseLayout(e.Value)
		if !ok {
			return fmt.Errorf("shards: resize %q: stored count %q is not one this release writes: %w", group, storedCount(e.Value), backends.ErrCorrupt)
		}
		switch {
		case cur.changing() && cur.count != count:
			return fmt.Errorf("shards: resize %q to %d: the change from %d to %d: %w", group, count, cur.from, cur.count, ErrResizing)
		case cur.changing():
			return finishResize(ctx, store, group, cur, e.Revision)
		case cur.count == count:
			return nil
		}
		next := layout{gen: cur.gen + 1, count: count, from: cur.count}
		if err := backends.ValidateKey(genShardKey(group, next.gen, count-1)); err != nil {
			return fmt.Errorf("shards: resize %q: %w", group, err)
		}
		ne, err := store.CompareAndSet(ctx, key, e.Revision, []byte(next.String()), 0)
		if errors.Is(err, backends.ErrConflict) {
			continue // changed meanwhile: read it again
		}
		if err != nil {
			return fmt.Errorf("shards: resize %q: record the change: %w", group, err)
		}
		return finishResize(ctx, store, group, next, ne.Revision)
	}
}

// finishResize seals every claim key of the generation before l's as its
// claim ends (the members seal those their new shards draw on first),
// then records l's count alone at revision rev of the group's record.
func finishResize(ctx context.Context, store backends.Store, group string, l layout, rev int64) error {
	old := l.gen - 1
	seal := sealValue(l.gen)
	var wake <-chan backends.Event
	if w, ok := store.(backends.Watcher); ok && backends.Require(store, backends.CapWatch) == nil {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if ch, err := w.Watch(wctx, genShardPrefix(group, old)); err == nil {
			wake = ch
		}
	}
	for {
		entries, err := store.List(ctx, genShardPrefix(group, old))
		if err != nil {
			return fmt.Errorf("shards: resize %q: list the shards of the old count: %w", group, err)
		}
		present := make([]bool, l.from)
		open := 0 // old claims still held
		next := resizePoll
		for _, e := range entries {
			shard, ok := parseShardKey(group, old, l.from, e.Key)
			if !ok {
				continue
			}
			present[shard] = true
			if !isSeal(e.Value, l.gen) {
				open++
				if e.Remaining > 0 && e.Remaining < next {
					next = e.Remaining
				}
			}
		}
		for shard, ok := range present {
			if ok {
				continue
			}
			_, err := store.CreateIfAbsent(ctx, genShardKey(group, old, shard), seal, 0)
			switch {
			case err == nil:
			case errors.Is(err, backends.ErrExists):
				open++ // taken meanwhile: the next round looks again
			default:
				return fmt.Errorf("shards: resize %q: seal shard %d of the old count: %w", group, shard, err)
			}
		}
		if open == 0 {
			break
		}
		// The watch cuts a wait short, but rounds are resizePollMin apart
		// at least: in a large group every handover is an event, and each
		// round lists every shard of the old count.
		wait := min(max(next, resizePollMin), resizePoll)
		round := time.Now()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("shards: resize %q: %d shards of the old count still held: %w", group, open, context.Cause(ctx))
		case _, ok := <-wake:
			if !ok {
				wake = nil // the watch ended: poll
			}
			if rest := resizePollMin - time.Since(round); rest > 0 {
				t.Reset(rest)
				select {
				case <-ctx.Done():
					t.Stop()
					return fmt.Errorf("shards: resize %q: %d shards of the old count still held: %w", group, open, context.Cause(ctx))
				case <-t.C:
				}
			}
		case <-t.C:
		}
		t.Stop()
		for drained := false; !drained && wake != nil; { // what the round after this one lists anyway
			select {
			case _, ok := <-wake:
				if !ok {
					wake = nil
				}
			default:
				drained = true
			}
		}
	}
	done := layout{gen: l.gen, count: l.count}
	_, err := store.CompareAndSet(ctx, countKey(group), rev, []byte(done.String()), 0)
	if err == nil {
		return nil
	}
	if errors.Is(err, backends.ErrConflict) {
		// Another call finished it first, or began another change since.
		e, gerr := store.Get(ctx, countKey(group))
		if gerr == nil {
			if cur, ok := parseLayout(e.Value); ok && cur.gen >= l.gen {
				return nil
			}
		}
	}
	return fmt.Errorf("shards: resize %q: record the count: %w", group, err)
}

// The waits of Resize between its looks at the old count's claims, which
// its watch of them (where the store watches) cuts short: at most
// resizePoll, and as long as the nearest claim's remaining time, but not
// under resizePollMin.
const (
	resizePoll    = time.Second
	resizePollMin = 100 * time.Millisecond
)

// StoredCount returns the shard count group's record in store names: the
// count its members route by, the new one while a change is in flight. It
// fails with an error wrapping backends.ErrNotFound if no member of group
// has started, and with one wrapping backends.ErrCorrupt if the record is
// in no form this release writes.
func StoredCount(ctx context.Context, store backends.Store, group string) (int, error) {
	e, err := store.Get(ctx, countKey(group))
	if err != nil {
		return 0, fmt.Errorf("shards: read the count of %q: %w", group, err)
	}
	l, ok := parseLayout(e.Value)
	if !ok {
		return 0, fmt.Errorf("shards: group %q: stored count %q is not one this release writes: %w", group, storedCount(e.Value), backends.ErrCorrupt)
	}
	return l.count, nil
}
