package slots

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/wire"
)

// MaxSize bounds N: a group's slots are scanned on every acquisition.
const MaxSize = 1024

// Config configures a Group.
type Config struct {
	// Size is the N recorded for a group the first time this Group uses it;
	// a group that already has a size in the store keeps it (see Resize).
	// Required: 1 ≤ Size ≤ MaxSize.
	Size int

	// Logger receives a warning, with the keys key, configured and stored,
	// the first time this Group finds a group's stored size differs from
	// Size (and again each time the stored size changes to another value
	// that differs). Default: discard.
	Logger *slog.Logger
}

// Validate reports what is wrong with c.
func (c Config) Validate() error {
	if c.Size < 1 || c.Size > MaxSize {
		return fmt.Errorf("slots: size %d out of range [1, %d]: %w", c.Size, MaxSize, backends.ErrInvalid)
	}
	return nil
}

// Group is a Locker over N-slot groups in one store. It is safe for
// concurrent use and keeps no per-group state beyond a per-holder lock and
// the last stored size it warned about.
type Group struct {
	store  backends.Store
	claims *backends.StoreLocker // renews, releases and watches slots by their store keys
	txn    backends.Txner        // nil unless the store declares and implements txn
	cfg    Config
	log    *slog.Logger

	mu      sync.Mutex                // guards holding, every holderLock.refs and warned
	holding map[holderKey]*holderLock // one per group and holder with an acquisition under way
	warned  map[string]int            // per group, the stored size last warned about
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
	_ backends.Locker       = (*Group)(nil)
	_ backends.ClaimWatcher = (*Group)(nil)
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
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	claims, err := backends.NewLocker(store)
	if err != nil {
		return nil, fmt.Errorf("slots: %w", err)
	}
	gr := &Group{store: store, claims: claims, cfg: cfg, log: log, holding: make(map[holderKey]*holderLock), warned: make(map[string]int)}
	if backends.Require(store, backends.CapTxn) == nil {
		gr.txn = store.(backends.Txner)
	}
	return gr, nil
}

// Store returns the store g runs over. An elector aligns the renewals of
// every claim over one store on one grid (see package elector).
func (g *Group) Store() backends.Store { return g.store }

// SlotKey is the store key of slot i of group.
func SlotKey(group string, i int) string { return wire.SlotKey(group, i) }

// SizeKey is the store key holding group's N. Its presence marks group as a
// slot group: a single claim (backends.NewLocker) on the same key is refused.
func SizeKey(group string) string { return wire.SizeKey(group) }

// Size returns group's N as recorded in the store, recording the configured
// size if the group has none yet.
func (g *Group) Size(ctx context.Context, group string) (int, error) {
	n, _, err := g.size(ctx, group)
	return n, err
}

// size returns group's N and the revision of its size entry, recording the
// configured size if the group has none yet.
func (g *Group) size(ctx context.Context, group string) (int, int64, error) {
	if err := backends.ValidateKey(SizeKey(group)); err != nil {
		return 0, 0, err
	}
	for {
		e, err := g.store.Get(ctx, SizeKey(group))
		if err == nil {
			n, err := decodeSize(group, e.Value)
			if err != nil {
				return 0, 0, err
			}
			g.noteStored(group, n)
			return n, e.Revision, nil
		}
		if !errors.Is(err, backends.ErrNotFound) {
			return 0, 0, fmt.Errorf("slots: size of %q: %w", group, err)
		}
		e, err = g.store.CreateIfAbsent(ctx, SizeKey(group), []byte(strconv.Itoa(g.cfg.Size)), 0)
		if err == nil {
			return g.cfg.Size, e.Revision, nil
		}
		if !errors.Is(err, backends.ErrExists) {
			return 0, 0, fmt.Errorf("slots: record size of %q: %w", group, err)
		}
		// Someone else recorded it first: read theirs.
	}
}

// noteStored warns, once per stored value, that group's stored size n is
// not the configured one: the process runs with n, which its operator may
// not expect.
func (g *Group) noteStored(group string, n int) {
	if n == g.cfg.Size {
		return
	}
	g.mu.Lock()
	last, seen := g.warned[group]
	g.warned[group] = n
	g.mu.Unlock()
	if seen && last == n {
		return
	}
	g.log.Warn(fmt.Sprintf("slots: group %q has size %d in the store, not the configured %d; the stored size applies (Resize changes it)", group, n, g.cfg.Size),
		"key", group, "configured", g.cfg.Size, "stored", n)
}

func decodeSize(group string, v []byte) (int, error) {
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 || n > MaxSize {
		return 0, fmt.Errorf("slots: size of %q is %q: %w", group, v, backends.ErrCorrupt)
	}
	return n, nil
}

// Resize sets group's N to n. Once it has returned, no slot at or above n
// is acquired or renewed (see the package documentation for what a reader
// may see meanwhile on a store without transactions). Lowering N makes the
// holders of slots at or above n step down at their next renewal.
func (g *Group) Resize(ctx context.Context, group string, n int) error {
	if err := (Config{Size: n}).Validate(); err != nil {
		return err
	}
	for {
		cur, rev, err := g.size(ctx, group)
		if err != nil {
			return err
		}
		if cur == n {
			return nil
		}
		if _, err = g.store.CompareAndSet(ctx, SizeKey(group), rev, []byte(strconv.Itoa(n)), 0); err == nil {
			return nil
		}
		if !errors.Is(err, backends.ErrConflict) {
			return fmt.Errorf("slots: resize %q: %w", group, err)
		}
	}
}

// errResized reports that the group's size entry changed between the read
// that chose a slot and the write that took it.
var errResized = errors.New("slots: size changed during the acquisition")

// TryAcquire takes a free slot of group for holder. If every slot below the
// group's size is held, or holder already holds one, the error is a
// *backends.HeldError listing the live holders. A slot of holder's at or
// above the size (one Renew refused after a resize) is released first: call
// TryAcquire again only once you have stopped acting on that lease, as an
// elector does.
//
// The slot is created only while the size read for choosing it is still
// current: in one transaction with a compare on the size entry where the
// store has transactions, and otherwise by reading the size again after the
// create and releasing a slot that is no longer below it.
//
// A key held as a single claim (backends.NewLocker) is refused with an
// error wrapping backends.ErrInvalid.
func (g *Group) TryAcquire(ctx context.Context, group string, holder backends.Holder, ttl time.Duration) (backends.Claim, error) {
	if ttl <= 0 {
		return backends.Claim{}, fmt.Errorf("slots: acquire %q: ttl %v must be positive: %w", group, ttl, backends.ErrInvalid)
	}
	if err := wire.ValidateID(holder.ID); err != nil {
		return backends.Claim{}, fmt.Errorf("slots: acquire %q: %v: %w", group, err, backends.ErrInvalid)
	}
	unlock := g.lockHolder(group, holder)
	defer unlock()
	for {
		l, err := g.tryAcquire(ctx, group, holder, ttl)
		if !errors.Is(err, errResized) {
			return l, err
		}
		if err := ctx.Err(); err != nil {
			return backends.Claim{}, fmt.Errorf("slots: acquire %q: %w", group, err)
		}
	}
}

// tryAcquire is one attempt of TryAcquire; errResized means try again with
// the new size.
func (g *Group) tryAcquire(ctx context.Context, group string, holder backends.Holder, ttl time.Duration) (backends.Claim, error) {
	// The size entry exists from here on; checking for a single claim only
	// after that is what keeps a claim and a group on one key from both
	// leading (see backends.StoreLocker.TryAcquire).
	n, sizeRev, err := g.size(ctx, group)
	if err != nil {
		return backends.Claim{}, err
	}
	live, err := g.Holders(ctx, group)
	if err != nil {
		return backends.Claim{}, err
	}
	taken := make(map[int]bool, len(live))
	for _, l := range live {
		if l.Holder != holder {
			taken[l.Slot] = true
			continue
		}
		if l.Slot < n {
			return backends.Claim{}, &backends.HeldError{Key: group, Holders: live}
		}
		// Ours, refused by Renew after a resize: give it up now.
		if err := g.Release(ctx, l); err != nil {
			return backends.Claim{}, fmt.Errorf("slots: acquire %q: release retired slot %d: %w", group, l.Slot, err)
		}
	}
	live = withoutHolder(live, holder)
	if g.txn == nil {
		if err := g.checkNoClaim(ctx, group); err != nil {
			return backends.Claim{}, err
		}
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
		l, err := g.acquireSlot(ctx, group, i, sizeRev, holder, ttl)
		var held *backends.HeldError
		switch {
		case err == nil:
			return l, nil
		case errors.As(err, &held):
			live = append(live, held.Holders...)
			continue
		}
		return backends.Claim{}, err
	}
	sort.Slice(live, func(a, b int) bool { return live[a].Slot < live[b].Slot })
	return backends.Claim{}, &backends.HeldError{Key: group, Holders: live}
}

// withoutHolder removes h's leases from live, in place.
func withoutHolder(live []backends.Claim, h backends.Holder) []backends.Claim {
	out := live[:0]
	for _, l := range live {
		if l.Holder != h {
			out = append(out, l)
		}
	}
	return out
}

// checkNoClaim returns an error wrapping backends.ErrInvalid if group is held
// as a single claim.
func (g *Group) checkNoClaim(ctx context.Context, group string) error {
	e, err := g.store.Get(ctx, group)
	switch {
	case errors.Is(err, backends.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("slots: acquire %q: check for a single claim: %w", group, err)
	}
	return claimErr(group, e)
}

func claimErr(group string, e backends.Entry) error {
	who := "a foreign value"
	if c, err := wire.DecodeClaim(e.Value); err == nil {
		who = fmt.Sprintf("%s (token %d)", backends.Holder{ID: c.ID, Nonce: c.Nonce}, e.CreateRevision)
	}
	return fmt.Errorf("slots: acquire %q: the key is held as a single claim by %s; a slot group cannot share its key: %w", group, who, backends.ErrInvalid)
}

// acquireSlot creates slot i of group for holder while the size entry is
// still at sizeRev. A slot already held gives a *backends.HeldError; a size
// that changed gives errResized.
func (g *Group) acquireSlot(ctx context.Context, group string, i int, sizeRev int64, holder backends.Holder, ttl time.Duration) (backends.Claim, error) {
	key := SlotKey(group, i)
	value := wire.EncodeClaim(wire.Claim{ID: holder.ID, Nonce: holder.Nonce, Advertised: holder.Advertised})
	var (
		e   backends.Entry
		err error
	)
	if g.txn != nil {
		var res backends.TxnResult
		res, err = g.txn.Txn(ctx,
			[]backends.Cond{{Key: key}, {Key: SizeKey(group), Revision: sizeRev}, {Key: group}},
			[]backends.Op{{Kind: backends.OpPut, Key: key, Value: value, TTL: ttl}})
		if err == nil {
			e = res.Entries[0]
		}
	} else {
		e, err = g.store.CreateIfAbsent(ctx, key, value, ttl)
	}
	var ce *backends.ConflictError
	switch {
	case err == nil:
	case !errors.As(err, &ce):
		return backends.Claim{}, fmt.Errorf("slots: acquire %q slot %d: %w", group, i, err)
	case ce.Found && (ce.Key == key || g.txn == nil):
		cur, err := claimOf(group, i, ce.Current)
		if err != nil {
			return backends.Claim{}, err
		}
		return backends.Claim{}, &backends.HeldError{Key: group, Holders: []backends.Claim{cur}}
	case ce.Key == SizeKey(group):
		return backends.Claim{}, errResized
	case ce.Key == group && ce.Found:
		return backends.Claim{}, claimErr(group, ce.Current)
	default:
		return backends.Claim{}, fmt.Errorf("slots: acquire %q slot %d: %w", group, i, err)
	}
	l := backends.Claim{Key: group, Slot: i, Holder: holder, Token: e.CreateRevision, Revision: e.Revision, TTL: e.TTL, Remaining: e.Remaining, Recorded: e.Recorded}
	if g.txn != nil {
		return l, nil
	}
	// No transaction: the size may have changed since it was read. Read it
	// again now that the slot exists, and give up a slot it no longer
	// covers; its holder never gets a lease for it.
	n, _, err := g.size(ctx, group)
	if err == nil && i < n {
		return l, nil
	}
	if err == nil {
		err = errResized
	}
	if rerr := g.Release(ctx, l); rerr != nil {
		return backends.Claim{}, fmt.Errorf("slots: acquire %q slot %d: size changed or unknown (%w), and releasing the slot failed, it will expire: %w", group, i, err, rerr)
	}
	return backends.Claim{}, err
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
// group's size. A slot at or above the size is refused with an error of
// class lost wrapping backends.ErrNotHolder; the slot is left in the store
// (its holder may still be acting on it until it has stepped down) and is
// released by the holder's next TryAcquire, or by Release.
//
// The size is read after the keep-alive, so a renewal that took effect
// after a Resize returned is refused: the keep-alive may have extended the
// slot's entry, but the holder gets no lease for it.
func (g *Group) Renew(ctx context.Context, lease backends.Claim) (backends.Claim, error) {
	if lease.TTL <= 0 {
		return backends.Claim{}, fmt.Errorf("slots: renew %q: ttl %v must be positive: %w", lease.Key, lease.TTL, backends.ErrInvalid)
	}
	got, err := g.claims.Renew(ctx, slotClaim(lease))
	if err != nil {
		return backends.Claim{}, err
	}
	got.Key, got.Slot = lease.Key, lease.Slot
	n, err := g.Size(ctx, lease.Key)
	if err != nil {
		return backends.Claim{}, err
	}
	if lease.Slot >= n {
		return backends.Claim{}, fmt.Errorf("slots: renew %q slot %d: group resized to %d: %w", lease.Key, lease.Slot, n, backends.ErrNotHolder)
	}
	return got, nil
}

// Release gives lease's slot up. A slot that already expired is not an
// error; one taken over by another holder gives an error wrapping
// backends.ErrNotHolder.
func (g *Group) Release(ctx context.Context, lease backends.Claim) error {
	return g.claims.Release(ctx, slotClaim(lease))
}

// slotClaim is lease, a claim on a slot of a group, as a claim on the slot's
// store key, which is how the store's Locker renews and releases it.
func slotClaim(lease backends.Claim) backends.Claim {
	lease.Key, lease.Slot = SlotKey(lease.Key, lease.Slot), 0
	return lease
}

// Holders lists the live holders of group, by slot. It includes holders of
// slots at or above a lowered size until they step down. A single claim on
// the key group itself is not listed: it is not a slot.
func (g *Group) Holders(ctx context.Context, group string) ([]backends.Claim, error) {
	prefix := wire.SlotPrefix(group)
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("slots: holders of %q: %w", group, err)
	}
	entries, err := g.store.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("slots: holders of %q: %w", group, err)
	}
	var out []backends.Claim
	for _, e := range entries {
		i, ok := wire.Slot(group, e.Key)
		if !ok {
			continue // a key of a nested group, not one of ours
		}
		c, err := claimOf(group, i, e)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Slot < out[b].Slot })
	return out, nil
}

// claimOf decodes the entry of slot i of group. A value that is not a claim
// is an error wrapping backends.ErrCorrupt: a slot holding a foreign value is
// never read as free.
func claimOf(group string, i int, e backends.Entry) (backends.Claim, error) {
	c, err := wire.DecodeClaim(e.Value)
	if err != nil {
		return backends.Claim{}, fmt.Errorf("slots: %q slot %d (store key %q): %v: %w", group, i, e.Key, err, backends.ErrCorrupt)
	}
	h := backends.Holder{ID: c.ID, Nonce: c.Nonce, Advertised: c.Advertised}
	return backends.Claim{Key: group, Slot: i, Holder: h, Token: e.CreateRevision, Revision: e.Revision, TTL: e.TTL, Remaining: e.Remaining, Recorded: e.Recorded}, nil
}

// WatchClaim signals every change to group's slots or size (and to a single
// claim on the key group, which no slot group shares for long). It needs a
// store that watches; otherwise the error wraps backends.ErrUnsupported.
func (g *Group) WatchClaim(ctx context.Context, group string) (<-chan struct{}, error) {
	return g.claims.WatchClaim(ctx, group)
}

// ExpiryEvents implements backends.ClaimWatcher: true when the store's
// watch delivers expiry events, so a slot freed by expiry is signalled.
func (g *Group) ExpiryEvents() bool { return g.claims.ExpiryEvents() }
