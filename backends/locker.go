package backends

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/tenure-go/tenure/internal/wire"
)

// Holder identifies one claimant: the configured identity plus a nonce drawn
// once per instance. Two processes configured with the same ID are two
// holders; neither can renew or release the other's claim.
type Holder struct {
	ID    string
	Nonce string

	// Advertised is what the holder tells every reader of its claim, such
	// as the address it serves at: empty, or at most MaxAdvertisedBytes as
	// ValidateAdvertised states. Every Locker stores it with the claim and
	// reports it with the holder; a claim written without it (by an
	// earlier version) reads as advertising nothing. It is fixed for the
	// holder's life: to advertise another value, make another holder.
	Advertised string
}

// MaxAdvertisedBytes is the largest value a holder may advertise: 256
// bytes hold any host and port, and a URL on any DNS name (at most 253
// bytes), while keeping every claim small and the value fit to print in
// one column and to carry as a metric label.
const MaxAdvertisedBytes = wire.MaxAdvertisedBytes

// ValidateAdvertised checks a value a holder would advertise: at most
// MaxAdvertisedBytes of valid UTF-8 with no control characters (line
// breaks, tabs, NUL and the like). The empty value advertises nothing.
// The error wraps ErrInvalid. Every Locker and the elector's
// configuration check an advertised value by this one rule.
func ValidateAdvertised(v string) error {
	if err := wire.ValidateAdvertised(v); err != nil {
		return fmt.Errorf("backends: %v: %w", err, ErrInvalid)
	}
	return nil
}

// Advertising returns h advertising v, or an error wrapping ErrInvalid if
// v breaks ValidateAdvertised's rule.
func (h Holder) Advertising(v string) (Holder, error) {
	if err := ValidateAdvertised(v); err != nil {
		return Holder{}, err
	}
	h.Advertised = v
	return h, nil
}

// NewHolder returns a Holder for id with a fresh random nonce. id may contain
// any Unicode, spaces and slashes, but must be non-empty valid UTF-8 of at
// most MaxKeyBytes; otherwise the error wraps ErrInvalid. Every Locker and
// the elector's configuration check an identity by this one rule.
func NewHolder(id string) (Holder, error) {
	if err := validateID(id); err != nil {
		return Holder{}, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Holder{}, fmt.Errorf("backends: holder nonce: %w", err)
	}
	return Holder{ID: id, Nonce: hex.EncodeToString(b[:])}, nil
}

// validateID applies the identity rule NewHolder states.
func validateID(id string) error {
	if err := wire.ValidateID(id); err != nil {
		return fmt.Errorf("backends: %v: %w", err, ErrInvalid)
	}
	return nil
}

// validateHolder checks h's identity and advertised value.
func validateHolder(h Holder) error {
	if err := validateID(h.ID); err != nil {
		return err
	}
	return ValidateAdvertised(h.Advertised)
}

// String is the form used in logs and errors: the quoted ID, then the nonce.
func (h Holder) String() string {
	if h.Nonce == "" {
		return fmt.Sprintf("%q", h.ID)
	}
	return fmt.Sprintf("%q#%s", h.ID, h.Nonce)
}

// LogValue logs h as its id and nonce (and the value it advertises, if
// any), so that a JSON log shows the id as written rather than the quoted
// form String gives it.
func (h Holder) LogValue() slog.Value {
	if h.Advertised != "" {
		return slog.GroupValue(slog.String("id", h.ID), slog.String("nonce", h.Nonce), slog.String("advertised", h.Advertised))
	}
	return slog.GroupValue(slog.String("id", h.ID), slog.String("nonce", h.Nonce))
}

// encodeClaim is the value a Locker writes for h.
func encodeClaim(h Holder) []byte {
	return wire.EncodeClaim(wire.Claim{ID: h.ID, Nonce: h.Nonce, Advertised: h.Advertised})
}

// Claim is a held claim as a Locker reports it.
type Claim struct {
	Key    string // the claim key (the group key for slot groups)
	Slot   int    // the slot index; 0 for a singleton claim
	Holder Holder

	// Token is the fencing token: the CreateRevision of the entry. It is
	// strictly greater than every token issued before for the same slot.
	Token int64
	// Revision is the entry's current revision, which Renew and Release
	// compare against.
	Revision int64

	TTL time.Duration
	// Remaining estimates the claim's time left as the backend judged it at
	// the last read; a hint for scheduling, never a safety bound. On a store
	// with Capabilities.ObservedExpiry it is the reading process's own wait
	// (the full TTL for a claim it has not seen change yet), not the time
	// its holder has left: never show it as that.
	Remaining time.Duration
	// Recorded is Entry.Recorded of the claim's entry: its last write or
	// keep-alive as the store recorded it, zero where the store records
	// none; for display only, never for judging expiry.
	Recorded time.Time
}

// Locker is the claim level the elector runs on. Implementations are safe for
// concurrent use.
//
// A Claim is a capability: Renew and Release act on the claim it names, by
// its revision, and cannot tell who passes it. Claims listed by Holders or in
// a HeldError describe other holders' claims too; a caller passes to Renew or
// Release only claims whose Holder is its own. The elector does exactly
// that, which is what keeps two holders with one identity apart. Renew
// checks the holder the store returns and reports a mismatch as lost.
type Locker interface {
	// TryAcquire takes the claim key for holder if it is free, without
	// waiting. If it is held the error is a *HeldError listing the holders.
	TryAcquire(ctx context.Context, key string, holder Holder, ttl time.Duration) (Claim, error)

	// Renew extends the claim by its TTL if it is still the caller's; else an
	// error of class lost.
	Renew(ctx context.Context, c Claim) (Claim, error)

	// Release gives the claim up if it is still the caller's. Releasing a
	// claim that has already expired is not an error; one taken over by
	// another holder gives an error wrapping ErrNotHolder.
	Release(ctx context.Context, c Claim) error

	// Holders lists the live holders of key: for a slot group, the holder
	// of every live slot, by slot.
	Holders(ctx context.Context, key string) ([]Claim, error)
}

// ClaimWatcher is implemented by Lockers that can signal changes to a claim.
type ClaimWatcher interface {
	// WatchClaim sends on the returned channel (coalescing: buffered, never
	// blocking the sender) whenever claim key may have changed; the consumer
	// re-reads Holders. The channel is closed when the watch ends (ctx done,
	// the store closed or its stream broke). A Locker whose store cannot
	// watch returns an error wrapping ErrUnsupported.
	WatchClaim(ctx context.Context, key string) (<-chan struct{}, error)

	// ExpiryEvents reports whether a WatchClaim channel also signals when a
	// holder's claim expires, as Capabilities.ExpiryEvents says of a
	// store's watch. A follower that watches such a Locker needs no timer
	// of its own for the holder's expiry and sends no request while the
	// holder renews. A Locker that cannot promise it reports false.
	ExpiryEvents() bool
}

// StoreLocker is the Locker over any Store, one key per claim.
type StoreLocker struct {
	store Store
	txn   Txner // nil unless the store declares CapTxn

	// reserved holds, per claim key, the reservation (a transfer's) the
	// last event of a WatchClaim showed written. It is a hint, never a
	// reason to refuse or to take a claim: an acquisition refused by one
	// reads it first, and one that ends it is conditioned on its revision
	// (see readAhead).
	mu       sync.Mutex
	reserved map[string]Entry // guarded by mu
	// kept holds, per claim key, the reservation a target's acquisition
	// found for itself on a store without CapTxn and left in place: its
	// release deletes it first (see Release). Guarded by mu.
	kept map[string]keptReservation
}

// keptReservation is a reservation a target left in place: the claim's
// token and the reservation's revision.
type keptReservation struct {
	token, rev int64
}

var (
	_ Locker       = (*StoreLocker)(nil)
	_ ClaimWatcher = (*StoreLocker)(nil)
)

// NewLocker returns a Locker over s. It fails closed, with an error wrapping
// ErrUnsupported, unless s enforces create-if-absent, compare-and-delete and
// keep-alive atomically.
func NewLocker(s Store) (*StoreLocker, error) {
	if err := Require(s, CapClaims); err != nil {
		return nil, fmt.Errorf("backends: locker: %w", err)
	}
	l := &StoreLocker{store: s}
	if Require(s, CapTxn) == nil {
		l.txn, _ = s.(Txner)
	}
	return l, nil
}

// Store returns the store l runs over. An elector aligns the renewals of
// every claim over one store on one grid (see elector.Config.RenewPeriod).
func (l *StoreLocker) Store() Store { return l.store }

// TryAcquire implements Locker. A key that is a slot group (its size entry
// wire.SizeKey(key) exists) is refused with an error wrapping ErrUsage (and
// so ErrInvalid): a single claim and a slot group never share a key, and
// the size entry is never deleted, so no retry can succeed. Of a claim and
// a group started at once on one key at most one leads, on every store.
//
// A claim that a transfer reserves for another candidate (see Transfer)
// is refused with a *ReservedError. The target's acquisition ends the
// reservation, on a store with CapTxn in the same transaction; on one
// without, the target leaves it in place while it holds the claim, and its
// Release or Transfer ends it (docs/transfer.md has the steps).
//
// On a store without CapTxn, a claim refused either way is released at
// once; until then a reader may see it, and its holder never gets a lease
// for it. There the checks cost two reads after each successful
// acquisition (the size entry, the transfer), and if one fails, the claim
// is released and the read's error returned. On a store with CapTxn they
// are conditions of the acquiring transaction, and a target's acquisition
// is a second transaction. docs/safety.md describes how the check is made
// on each kind of store.
func (l *StoreLocker) TryAcquire(ctx context.Context, key string, holder Holder, ttl time.Duration) (Claim, error) {
	if err := ValidateKey(wire.SizeKey(key)); err != nil {
		// Too long to be a group's key: no group can exist.
		return acquireKey(ctx, l.store, key, holder, ttl)
	}
	r, err := l.readAhead(ctx, key, holder)
	if err != nil {
		return Claim{}, err
	}
	if l.txn != nil {
		return l.acquireTxn(ctx, key, holder, ttl, r)
	}
	lease, err := acquireKey(ctx, l.store, key, holder, ttl)
	if err != nil {
		return Claim{}, err
	}
	size, err := l.store.Get(ctx, wire.SizeKey(key))
	switch {
	case errors.Is(err, ErrNotFound):
		var kept int64
		kept, err = l.checkTransfer(ctx, key, holder)
		if err == nil {
			if kept != 0 {
				l.keep(key, lease.Token, kept)
			}
			return lease, nil
		}
	case err == nil:
		err = slotGroupKey(key, size)
	default:
		err = fmt.Errorf("backends: acquire %q: check for a slot group: %w", key, err)
	}
	// Not known to be a single claim's key, or reserved for another
	// candidate: give the claim up unused.
	if rerr := releaseKey(ctx, l.store, key, lease); rerr != nil {
		return Claim{}, fmt.Errorf("%w (and the claim was not released, it will expire: %v)", err, rerr)
	}
	return Claim{}, err
}

// claimTTL checks a claim's TTL: positive (a claim always expires) and at
// most MaxTTL.
func claimTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("ttl %v must be positive: %w", ttl, ErrInvalid)
	}
	if err := ValidateTTL(ttl); err != nil {
		return fmt.Errorf("ttl %v exceeds the maximum of %v: %w", ttl, MaxTTL, ErrInvalid)
	}
	return nil
}

// readAhead looks at the reservation of claim key before an acquisition
// writes anything, if a watch last showed one written (see reserved). One
// for holder, as the watch showed it, is returned, so that the acquiring
// transaction can end it in its first attempt (conditioned on its
// revision: if it changed since, the transaction fails on it and is tried
// again as without a hint). One for another candidate is read again, and
// if the store confirms it, refuses the acquisition with a *ReservedError
// at the cost of that read, instead of a write (and, on a store without
// CapTxn, a release). Otherwise, and if the read fails, it returns nil and
// the acquisition goes on as without a hint, making every check itself.
func (l *StoreLocker) readAhead(ctx context.Context, key string, holder Holder) (*Entry, error) {
	tkey := wire.TransferKey(key)
	l.mu.Lock()
	r, hinted := l.reserved[key]
	l.mu.Unlock()
	if !hinted || ValidateKey(tkey) != nil {
		return nil, nil
	}
	if reservedFor(key, holder, r) == nil {
		return &r, nil
	}
	r, err := l.store.Get(ctx, tkey)
	switch {
	case errors.Is(err, ErrNotFound):
		l.noteReservation(key, Event{Kind: EventDelete, Entry: Entry{Key: tkey}})
		return nil, nil
	case err != nil:
		return nil, nil
	}
	if err := l.reservedFor(key, holder, r); err != nil {
		return nil, err
	}
	return &r, nil
}

// noteReservation records what a watch (or a read) last showed of claim
// key's reservation.
func (l *StoreLocker) noteReservation(key string, ev Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ev.Kind != EventPut {
		delete(l.reserved, key)
		return
	}
	if l.reserved == nil {
		l.reserved = make(map[string]Entry)
	}
	l.reserved[key] = ev.Entry
}

// acquireTxn takes key for holder in one transaction: create key if it is
// absent and the slot group's size entry is absent too. If key is held,
// the error is a *HeldError listing its holder. r, if not nil, is the
// reservation for holder readAhead found: the first attempt ends it.
func (l *StoreLocker) acquireTxn(ctx context.Context, key string, holder Holder, ttl time.Duration, r *Entry) (Claim, error) {
	if err := validateHolder(holder); err != nil {
		return Claim{}, err
	}
	if err := claimTTL(ttl); err != nil {
		return Claim{}, fmt.Errorf("backends: acquire %q: %w", key, err)
	}
	sizeKey := wire.SizeKey(key)
	conds := []Cond{{Key: key}, {Key: sizeKey}}
	ops := []Op{{Kind: OpPut, Key: key, Value: encodeClaim(holder), TTL: ttl}}
	tkey := wire.TransferKey(key)
	transfers := ValidateKey(tkey) == nil
	if transfers {
		conds = append(conds, Cond{Key: tkey})
	}
	take := func(rev int64) (TxnResult, error) {
		conds[len(conds)-1].Revision = rev
		if rev == 0 {
			return l.txn.Txn(ctx, conds, ops)
		}
		// Free, but a transfer reserves it: only its target takes it,
		// and its take ends the reservation in the same step.
		return l.txn.Txn(ctx, conds, append(slices.Clip(ops), Op{Kind: OpDelete, Key: tkey}))
	}
	var rev int64
	if transfers && r != nil {
		rev = r.Revision
	}
	res, err := take(rev)
	var ce *ConflictError
	if transfers && errors.As(err, &ce) && ce.Key == tkey && (ce.Found || rev != 0) {
		// The reservation is not what the attempt expected: one was
		// written, or the one read ahead is gone (its target took the
		// claim and gave it up, or it expired). Try once more with what
		// the conflict reports.
		rev = 0
		if ce.Found {
			if rerr := l.reservedFor(key, holder, ce.Current); rerr != nil {
				return Claim{}, rerr
			}
			rev = ce.Current.Revision
		}
		res, err = take(rev)
	}
	if err != nil {
		return Claim{}, l.refused(key, err)
	}
	if len(res.Entries) == 0 {
		return Claim{}, fmt.Errorf("backends: acquire %q: the transaction reported no entry for its write: %w", key, ErrCorrupt)
	}
	e := res.Entries[0]
	return Claim{Key: key, Holder: holder, Token: e.CreateRevision, Revision: e.Revision, TTL: e.TTL, Remaining: e.Remaining}, nil
}

// refused is the error of an acquisition of key whose transaction failed
// with err: a *HeldError if key is held, ErrUsage if it is a slot group.
func (l *StoreLocker) refused(key string, err error) error {
	var ce *ConflictError
	switch {
	case errors.As(err, &ce) && ce.Found && ce.Key == key:
		cur, derr := claimOf(key, 0, ce.Current)
		if derr != nil {
			return derr
		}
		return &HeldError{Key: key, Holders: []Claim{cur}}
	case errors.As(err, &ce) && ce.Found && ce.Key == wire.SizeKey(key):
		return slotGroupKey(key, ce.Current)
	case errors.As(err, &ce) && ce.Key == wire.TransferKey(key):
		// The reservation changed between the two steps (its target took
		// the claim, or it expired): the next attempt reads it again.
		return fmt.Errorf("backends: acquire %q: the transfer changed meanwhile: %w", key, &ClassError{Class: ClassTransient, Err: err})
	}
	return fmt.Errorf("backends: acquire %q: %w", key, err)
}

// slotGroupKey is the error of a single claim asked on key, a slot group
// whose size entry is size.
func slotGroupKey(key string, size Entry) error {
	return fmt.Errorf("backends: acquire %q: the key is a slot group (size %q in %q); a single claim cannot share its key: %w",
		key, size.Value, wire.SizeKey(key), ErrUsage)
}

// Renew implements Locker. A claim is renewed by its revision at the store
// key c.Key; a slot group (package slots) renews a slot as a claim on the
// slot's store key.
func (l *StoreLocker) Renew(ctx context.Context, c Claim) (Claim, error) {
	if err := claimTTL(c.TTL); err != nil {
		return Claim{}, fmt.Errorf("backends: renew %q: %w", c.Key, err)
	}
	e, err := l.store.KeepAlive(ctx, c.Key, c.Revision, c.TTL)
	if err != nil {
		return Claim{}, fmt.Errorf("backends: renew %q: %w", c.Key, err)
	}
	got, err := claimOf(c.Key, c.Slot, e)
	if err != nil {
		return Claim{}, err
	}
	if got.Holder != c.Holder || got.Token != c.Token {
		return Claim{}, fmt.Errorf("backends: renew %q: held by %s (token %d), not %s: %w", c.Key, got.Holder, got.Token, c.Holder, ErrNotHolder)
	}
	return got, nil
}

// Release implements Locker, at the store key c.Key as Renew does.
//
// A claim taken as a transfer's target on a store without CapTxn carries
// the reservation it ended in place until then: Release deletes that
// reservation (by its revision; if that fails, it expires) before the
// claim, so that the claim is not freed reserved for its last holder.
func (l *StoreLocker) Release(ctx context.Context, c Claim) error {
	l.dropKept(ctx, c)
	return releaseKey(ctx, l.store, c.Key, c)
}

// keep records that the target's claim at token left its reservation at
// revision rev in place.
func (l *StoreLocker) keep(key string, token, rev int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kept == nil {
		l.kept = make(map[string]keptReservation)
	}
	l.kept[key] = keptReservation{token: token, rev: rev}
}

// keptRev is the revision of the reservation claim c left in place, or 0.
func (l *StoreLocker) keptRev(c Claim) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k, ok := l.kept[c.Key]; ok && k.token == c.Token {
		return k.rev
	}
	return 0
}

// takeKept forgets the reservation claim c left in place, and returns its
// revision, or 0.
func (l *StoreLocker) takeKept(c Claim) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	k, ok := l.kept[c.Key]
	if !ok || k.token != c.Token {
		return 0
	}
	delete(l.kept, c.Key)
	return k.rev
}

// dropKept deletes the reservation claim c left in place, if it did, and
// forgets it. A delete that fails leaves the reservation to expire.
func (l *StoreLocker) dropKept(ctx context.Context, c Claim) {
	if rev := l.takeKept(c); rev != 0 {
		_ = l.store.CompareAndDelete(ctx, wire.TransferKey(c.Key), rev)
	}
}

// acquireKey takes the store key key for holder with create-if-absent. If
// key is held, the error is a *HeldError listing its holder.
func acquireKey(ctx context.Context, s Store, key string, holder Holder, ttl time.Duration) (Claim, error) {
	if err := validateHolder(holder); err != nil {
		return Claim{}, err
	}
	if err := claimTTL(ttl); err != nil {
		return Claim{}, fmt.Errorf("backends: acquire %q: %w", key, err)
	}
	e, err := s.CreateIfAbsent(ctx, key, encodeClaim(holder), ttl)
	if err != nil {
		var ce *ConflictError
		if errors.As(err, &ce) && ce.Found {
			cur, derr := claimOf(key, 0, ce.Current)
			if derr != nil {
				return Claim{}, derr
			}
			return Claim{}, &HeldError{Key: key, Holders: []Claim{cur}}
		}
		return Claim{}, fmt.Errorf("backends: acquire %q: %w", key, err)
	}
	return Claim{Key: key, Holder: holder, Token: e.CreateRevision, Revision: e.Revision, TTL: e.TTL, Remaining: e.Remaining}, nil
}

// releaseKey gives up lease, held in the store key storeKey. A claim that
// already expired is not an error; one taken over by another holder gives
// an error wrapping ErrNotHolder.
func releaseKey(ctx context.Context, s Store, storeKey string, lease Claim) error {
	err := s.CompareAndDelete(ctx, storeKey, lease.Revision)
	var ce *ConflictError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce) && !ce.Found:
		return nil // already expired or deleted: nothing left to give up
	case errors.As(err, &ce):
		return fmt.Errorf("backends: release %q: now at revision %d: %w", storeKey, ce.Current.Revision, ErrNotHolder)
	}
	return fmt.Errorf("backends: release %q: %w", storeKey, err)
}

// Holders implements Locker. For a key that is a slot group (its size
// entry wire.SizeKey(key) exists and there is no claim at key itself) it
// lists the group's live slot holders, by slot, as slots.Group.Holders does.
func (l *StoreLocker) Holders(ctx context.Context, key string) ([]Claim, error) {
	e, err := l.store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return l.groupHolders(ctx, key)
	}
	if err != nil {
		return nil, fmt.Errorf("backends: holders %q: %w", key, err)
	}
	le, err := claimOf(key, 0, e)
	if err != nil {
		return nil, err
	}
	return []Claim{le}, nil
}

// groupHolders lists the slot holders of key if it is a slot group, and
// nothing otherwise.
func (l *StoreLocker) groupHolders(ctx context.Context, key string) ([]Claim, error) {
	if ValidateKey(wire.SizeKey(key)) != nil {
		return nil, nil
	}
	_, err := l.store.Get(ctx, wire.SizeKey(key))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("backends: holders %q: %w", key, err)
	}
	return slotHolders(ctx, l.store, key)
}

// slotHolders lists the live holders of slot group key in s, by slot: the
// claims at the group's slot keys. Keys of groups nested under key are not
// holders.
func slotHolders(ctx context.Context, s Store, key string) ([]Claim, error) {
	prefix := wire.SlotPrefix(key)
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	entries, err := s.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("backends: holders of group %q: %w", key, err)
	}
	var out []Claim
	for _, e := range entries {
		i, ok := wire.Slot(key, e.Key)
		if !ok {
			continue // a key of a nested group, not one of ours
		}
		le, err := claimOf(key, i, e)
		if err != nil {
			return nil, err
		}
		out = append(out, le)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Slot < out[b].Slot })
	return out, nil
}

// WatchClaim implements ClaimWatcher. Like Holders, it covers a slot group
// on key: it signals changes to key itself and to the group's size and
// slot keys, and a slot group (package slots) watches through it. The
// returned channel is closed when the store's watch ends; the goroutine it
// starts exits then too.
func (l *StoreLocker) WatchClaim(ctx context.Context, key string) (<-chan struct{}, error) {
	if err := Require(l.store, CapWatch); err != nil {
		return nil, err
	}
	match := func(k string) bool {
		_, slot := wire.Slot(key, k)
		return slot || k == key || k == wire.SizeKey(key) || k == wire.TransferKey(key)
	}
	events, err := l.store.(Watcher).Watch(ctx, key)
	if err != nil {
		return nil, err
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		tkey := wire.TransferKey(key)
		for ev := range events {
			if !match(ev.Entry.Key) {
				continue
			}
			if ev.Entry.Key == tkey {
				l.noteReservation(key, ev)
			}
			select {
			case out <- struct{}{}:
			default: // a signal is already pending
			}
		}
	}()
	return out, nil
}

// ExpiryEvents implements ClaimWatcher: true when the store declares
// CapWatch, implements Watcher and declares Capabilities.ExpiryEvents.
func (l *StoreLocker) ExpiryEvents() bool {
	return l.store.Capabilities().ExpiryEvents && Require(l.store, CapWatch) == nil
}

// claimOf decodes a claim entry into a Claim for claim key and slot. A value
// that is not a claim is an error wrapping ErrCorrupt: a claim key holding a
// foreign value is never read as free.
func claimOf(key string, slot int, e Entry) (Claim, error) {
	c, err := wire.DecodeClaim(e.Value)
	if err != nil {
		return Claim{}, fmt.Errorf("backends: claim %q (store key %q): %v: %w", key, e.Key, err, ErrCorrupt)
	}
	h := Holder{ID: c.ID, Nonce: c.Nonce, Advertised: c.Advertised}
	return Claim{Key: key, Slot: slot, Holder: h, Token: e.CreateRevision, Revision: e.Revision, TTL: e.TTL, Remaining: e.Remaining, Recorded: e.Recorded}, nil
}
