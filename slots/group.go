package slots

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// MaxSize bounds N: a group's slots are scanned on every acquisition.
const MaxSize = 1024

// Config configures a Group.
type Config struct {
	// Size is the N recorded for a group the first time this Group uses it;
	// a group that already has a size in the store keeps it (see Resize).
	// Required: 1 ≤ Size ≤ MaxSize.
	Size int
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	if c.Size < 1 || c.Size > MaxSize {
		return fmt.Errorf("slots: size %d out of range [1, %d]: %w", c.Size, MaxSize, backends.ErrInvalid)
	}
	return nil
}

// Group is a Locker over N-slot groups in one store. It is safe for
// concurrent use and keeps no per-group state beyond a per-holder lock.
type Group struct {
	store backends.Store
	cfg   Config

	mu      sync.Mutex                // guards holding and every holderLock.refs
	holding map[holderKey]*holderLock // one per group and holder with an acquisition under way
}

// holderLock serializes the acquisitions of one holder in one group.
type holderLock struct {
	sync.Mutex
	refs int // goroutines using this lock; guarded by Group.mu
}

type holderKey struct {
	group  string
	holder backends.Holder
}

var (
	_ backends.Locker        = (*Group)(nil)
	_ backends.ExpiryWatcher = (*Group)(nil)
)

// New returns a Group over store. It fails closed, with an error wrapping
// backends.ErrUnsupported, unless the store enforces create-if-absent,
// compare-and-set, compare-and-delete and keep-alive atomically.
func New(store backends.Store, cfg Config) (*Group, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := backends.Require(store, backends.CapClaims|backends.CapCompareAndSet); err != nil {
		return nil, fmt.Errorf("slots: %w", err)
	}
	return &Group{store: store, cfg: cfg, holding: make(map[holderKey]*holderLock)}, nil
}

// SlotKey is the store key of slot i of group.
func SlotKey(group string, i int) string { return group + "/slot-" + strconv.Itoa(i) }

// SizeKey is the store key holding group's N.
func SizeKey(group string) string { return group + "/size" }

func slotPrefix(group string) string { return group + "/slot-" }

// slotIndex parses a store key of group back to its slot index.
func slotIndex(group, key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, slotPrefix(group))
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || strconv.Itoa(i) != rest {
		return 0, false
	}
	return i, true
}

// Size returns group's N as recorded in the store, recording the configured
// size if the group has none yet.
func (g *Group) Size(ctx context.Context, group string) (int, error) {
	if err := backends.ValidateKey(SizeKey(group)); err != nil {
		return 0, err
	}
	for {
		e, err := g.store.Get(ctx, SizeKey(group))
		if err == nil {
			return decodeSize(group, e.Value)
		}
		if !errors.Is(err, backends.ErrNotFound) {
			return 0, fmt.Errorf("slots: size of %q: %w", group, err)
		}
		_, err = g.store.CreateIfAbsent(ctx, SizeKey(group), []byte(strconv.Itoa(g.cfg.Size)), 0)
		if err == nil {
			return g.cfg.Size, nil
		}
		if !errors.Is(err, backends.ErrExists) {
			return 0, fmt.Errorf("slots: record size of %q: %w", group, err)
		}
		// Someone else recorded it first: read theirs.
	}
}

func decodeSize(group string, v []byte) (int, error) {
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 || n > MaxSize {
		return 0, fmt.Errorf("slots: size of %q is %q: %w", group, v, backends.ErrCorrupt)
	}
	return n, nil
}

// Resize sets group's N to n. Lowering it makes the holders of slots at or
// above n step down at their next renewal.
func (g *Group) Resize(ctx context.Context, group string, n int) error {
	if err := (Config{Size: n}).Validate(); err != nil {
		return err
	}
	for {
		cur, err := g.Size(ctx, group)
		if err != nil {
			return err
		}
		if cur == n {
			return nil
		}
		e, err := g.store.Get(ctx, SizeKey(group))
		if err != nil {
			return fmt.Errorf("slots: resize %q: %w", group, err)
		}
		if _, err = g.store.CompareAndSet(ctx, SizeKey(group), e.Revision, []byte(strconv.Itoa(n)), 0); err == nil {
			return nil
		}
		if !errors.Is(err, backends.ErrConflict) {
			return fmt.Errorf("slots: resize %q: %w", group, err)
		}
	}
}

// TryAcquire takes a free slot of group for holder. If every slot below the
// group's size is held, or holder already holds one, the error is a
// *backends.HeldError listing the live holders.
func (g *Group) TryAcquire(ctx context.Context, group string, holder backends.Holder, ttl time.Duration) (backends.Lease, error) {
	if ttl <= 0 {
		return backends.Lease{}, fmt.Errorf("slots: acquire %q: ttl %v must be positive: %w", group, ttl, backends.ErrInvalid)
	}
	if holder.ID == "" {
		return backends.Lease{}, fmt.Errorf("slots: acquire %q: empty holder id: %w", group, backends.ErrInvalid)
	}
	unlock := g.lockHolder(group, holder)
	defer unlock()

	n, err := g.Size(ctx, group)
	if err != nil {
		return backends.Lease{}, err
	}
	live, err := g.Holders(ctx, group)
	if err != nil {
		return backends.Lease{}, err
	}
	taken := make(map[int]bool, len(live))
	for _, l := range live {
		if l.Holder == holder {
			return backends.Lease{}, &backends.HeldError{Key: group, Holders: live}
		}
		taken[l.Slot] = true
	}
	// Start the scan at a random slot so that candidates racing for a
	// partly free group spread over its slots instead of colliding on the
	// lowest one.
	start := rand.IntN(n)
	for k := range n {
		i := (start + k) % n
		if taken[i] {
			continue
		}
		l, err := backends.AcquireKey(ctx, g.store, SlotKey(group, i), group, i, holder, ttl)
		var held *backends.HeldError
		switch {
		case err == nil:
			return l, nil
		case errors.As(err, &held):
			live = append(live, held.Holders...)
			continue
		}
		return backends.Lease{}, fmt.Errorf("slots: acquire %q slot %d: %w", group, i, err)
	}
	sort.Slice(live, func(a, b int) bool { return live[a].Slot < live[b].Slot })
	return backends.Lease{}, &backends.HeldError{Key: group, Holders: live}
}

// lockHolder serializes acquisitions of one holder in one group through this
// Group value, so that a holder never ends up with two slots.
func (g *Group) lockHolder(group string, holder backends.Holder) (unlock func()) {
	k := holderKey{group, holder}
	g.mu.Lock()
	h := g.holding[k]
	if h == nil {
		h = new(holderLock)
		g.holding[k] = h
	}
	h.refs++
	g.mu.Unlock()
	h.Lock()
	return func() {
		h.Unlock()
		g.mu.Lock()
		if h.refs--; h.refs == 0 {
			delete(g.holding, k)
		}
		g.mu.Unlock()
	}
}

// Renew keeps lease's slot if it is still the holder's and still below the
// group's size.
func (g *Group) Renew(ctx context.Context, lease backends.Lease) (backends.Lease, error) {
	if lease.TTL <= 0 {
		return backends.Lease{}, fmt.Errorf("slots: renew %q: ttl %v must be positive: %w", lease.Key, lease.TTL, backends.ErrInvalid)
	}
	n, err := g.Size(ctx, lease.Key)
	if err != nil {
		return backends.Lease{}, err
	}
	if lease.Slot >= n {
		return backends.Lease{}, fmt.Errorf("slots: renew %q slot %d: group resized to %d: %w", lease.Key, lease.Slot, n, backends.ErrNotHolder)
	}
	return backends.RenewKey(ctx, g.store, SlotKey(lease.Key, lease.Slot), lease)
}

// Release gives lease's slot up. A slot that already expired is not an
// error; one taken over by another holder gives an error wrapping
// backends.ErrNotHolder.
func (g *Group) Release(ctx context.Context, lease backends.Lease) error {
	return backends.ReleaseKey(ctx, g.store, SlotKey(lease.Key, lease.Slot), lease)
}

// Holders lists the live holders of group, by slot. It includes holders of
// slots at or above a lowered size until they step down.
func (g *Group) Holders(ctx context.Context, group string) ([]backends.Lease, error) {
	if err := backends.ValidateKey(slotPrefix(group)); err != nil {
		return nil, err
	}
	entries, err := g.store.List(ctx, slotPrefix(group))
	if err != nil {
		return nil, fmt.Errorf("slots: holders of %q: %w", group, err)
	}
	var out []backends.Lease
	for _, e := range entries {
		i, ok := slotIndex(group, e.Key)
		if !ok {
			continue // a key of a nested group, not one of ours
		}
		l, err := backends.LeaseOf(group, i, e)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Slot < out[b].Slot })
	return out, nil
}

// WatchClaim signals every change to group's slots or size. It needs a store
// that watches; otherwise the error wraps backends.ErrUnsupported.
func (g *Group) WatchClaim(ctx context.Context, group string) (<-chan struct{}, error) {
	return backends.WatchKeys(ctx, g.store, group+"/", func(key string) bool {
		_, ok := slotIndex(group, key)
		return ok || key == SizeKey(group)
	})
}

// SignalsExpiry implements backends.ExpiryWatcher: true when the store's
// watch delivers expiry events, so a slot freed by expiry is signalled.
func (g *Group) SignalsExpiry() bool { return backends.SignalsExpiry(g.store) }
