package backends

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Holder identifies one claimant: the configured identity plus a nonce drawn
// once per instance. Two processes configured with the same ID are two
// holders; neither can renew or release the other's claim.
type Holder struct {
	ID    string
	Nonce string
}

// NewHolder returns a Holder for id with a fresh random nonce. id may contain
// any Unicode, spaces and slashes, but must be non-empty valid UTF-8.
func NewHolder(id string) (Holder, error) {
	if err := validateHolderID(id); err != nil {
		return Holder{}, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Holder{}, fmt.Errorf("backends: holder nonce: %w", err)
	}
	return Holder{ID: id, Nonce: hex.EncodeToString(b[:])}, nil
}

// ValidateHolder returns an error wrapping ErrInvalid unless h's ID is one
// NewHolder accepts. Lockers that write claims without AcquireKey check it.
func ValidateHolder(h Holder) error { return validateHolderID(h.ID) }

func validateHolderID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("backends: empty holder id: %w", ErrInvalid)
	case !utf8.ValidString(id):
		return fmt.Errorf("backends: holder id %q is not valid UTF-8: %w", id, ErrInvalid)
	case len(id) > MaxKeyBytes:
		return fmt.Errorf("backends: holder id of %d bytes exceeds %d: %w", len(id), MaxKeyBytes, ErrInvalid)
	}
	return nil
}

// String is the form used in logs and errors: the quoted ID, then the nonce.
func (h Holder) String() string {
	if h.Nonce == "" {
		return fmt.Sprintf("%q", h.ID)
	}
	return fmt.Sprintf("%q#%s", h.ID, h.Nonce)
}

// claim is the value a Locker writes for a holder.
type claim struct {
	V     int    `json:"v"`
	ID    string `json:"id"`
	Nonce string `json:"nonce,omitempty"`
}

// EncodeClaim is the value Lockers store for h. Backends that synthesize
// claims from foreign objects (e.g. a Lease written by another library) use
// it so that every Locker reads them alike.
func EncodeClaim(h Holder) []byte {
	b, _ := json.Marshal(claim{V: 1, ID: h.ID, Nonce: h.Nonce}) // cannot fail for strings
	return b
}

// DecodeClaim parses a value written by EncodeClaim. Anything else is an error
// wrapping ErrCorrupt: a claim key holding a foreign value is never read as
// free.
func DecodeClaim(value []byte) (Holder, error) {
	var c claim
	if err := json.Unmarshal(value, &c); err != nil {
		return Holder{}, fmt.Errorf("backends: decode claim: %w: %v", ErrCorrupt, err)
	}
	if c.V != 1 || c.ID == "" {
		return Holder{}, fmt.Errorf("backends: decode claim: %w: version %d, id %q", ErrCorrupt, c.V, c.ID)
	}
	return Holder{ID: c.ID, Nonce: c.Nonce}, nil
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
	// the last read; a hint for scheduling, never a safety bound.
	Remaining time.Duration
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
}

// ExpiryWatcher is a ClaimWatcher that can promise more: when SignalsExpiry
// reports true, a WatchClaim channel also signals when a holder's claim
// expires (its store declares Capabilities.ExpiryEvents), so a follower that
// watches needs no timer of its own for the holder's expiry and sends no
// request while the holder renews.
type ExpiryWatcher interface {
	ClaimWatcher
	SignalsExpiry() bool
}

// SignalsExpiry reports whether s's watch delivers expiry events: it
// declares CapWatch, implements Watcher and declares ExpiryEvents.
func SignalsExpiry(s Store) bool {
	return s != nil && s.Capabilities().ExpiryEvents && Require(s, CapWatch) == nil
}

// StoreLocker is the Locker over any Store, one key per claim.
type StoreLocker struct {
	store Store
}

var (
	_ Locker        = (*StoreLocker)(nil)
	_ ExpiryWatcher = (*StoreLocker)(nil)
)

// NewLocker returns a Locker over s. It fails closed, with an error wrapping
// ErrUnsupported, unless s enforces create-if-absent, compare-and-delete and
// keep-alive atomically.
func NewLocker(s Store) (*StoreLocker, error) {
	if err := Require(s, CapClaims); err != nil {
		return nil, fmt.Errorf("backends: locker: %w", err)
	}
	return &StoreLocker{store: s}, nil
}

// Store returns the store the locker writes to.
func (l *StoreLocker) Store() Store { return l.store }

// TryAcquire implements Locker. A key that is a slot group (its size entry
// GroupSizeKey(key) exists) is refused with an error wrapping ErrInvalid: a
// single claim and a slot group never share a key.
//
// The claim is taken first and the size entry read after, and a slot group
// checks for a live claim only after its size entry exists (package
// slots), so of a claim and a group started at once on one key at most
// one leads, on every store. A claim refused that way is released at once;
// until then a reader may see it, and its holder never gets a lease for it.
// The check costs one read after each successful acquisition; if that read
// fails, the claim is released and the read's error returned.
func (l *StoreLocker) TryAcquire(ctx context.Context, key string, holder Holder, ttl time.Duration) (Claim, error) {
	lease, err := AcquireKey(ctx, l.store, key, key, 0, holder, ttl)
	if err != nil {
		return Claim{}, err
	}
	if err := ValidateKey(GroupSizeKey(key)); err != nil {
		return lease, nil // too long to be a group's key: no group can exist
	}
	size, err := l.store.Get(ctx, GroupSizeKey(key))
	switch {
	case errors.Is(err, ErrNotFound):
		return lease, nil
	case err == nil:
		err = fmt.Errorf("backends: acquire %q: the key is a slot group (size %q in %q); a single claim cannot share its key: %w",
			key, size.Value, GroupSizeKey(key), ErrInvalid)
	default:
		err = fmt.Errorf("backends: acquire %q: check for a slot group: %w", key, err)
	}
	// Not known to be a single claim's key: give the claim up unused.
	if rerr := ReleaseKey(ctx, l.store, key, lease); rerr != nil {
		return Claim{}, fmt.Errorf("%w (and the claim was not released, it will expire: %v)", err, rerr)
	}
	return Claim{}, err
}

// Renew implements Locker.
func (l *StoreLocker) Renew(ctx context.Context, lease Claim) (Claim, error) {
	return RenewKey(ctx, l.store, lease.Key, lease)
}

// Release implements Locker.
func (l *StoreLocker) Release(ctx context.Context, lease Claim) error {
	return ReleaseKey(ctx, l.store, lease.Key, lease)
}

// AcquireKey takes the store key storeKey for holder with create-if-absent
// and reports it as slot slot of claim key. If storeKey is held, the error
// is a *HeldError listing its holder. Lockers built over several store keys
// (slot groups) share it with StoreLocker.
func AcquireKey(ctx context.Context, s Store, storeKey, key string, slot int, holder Holder, ttl time.Duration) (Claim, error) {
	if err := validateHolderID(holder.ID); err != nil {
		return Claim{}, err
	}
	if ttl <= 0 {
		return Claim{}, fmt.Errorf("backends: acquire %q: ttl %v must be positive: %w", storeKey, ttl, ErrInvalid)
	}
	e, err := s.CreateIfAbsent(ctx, storeKey, EncodeClaim(holder), ttl)
	if err != nil {
		var ce *ConflictError
		if errors.As(err, &ce) && ce.Found {
			cur, derr := LeaseOf(key, slot, ce.Current)
			if derr != nil {
				return Claim{}, derr
			}
			return Claim{}, &HeldError{Key: key, Holders: []Claim{cur}}
		}
		return Claim{}, fmt.Errorf("backends: acquire %q: %w", storeKey, err)
	}
	return Claim{Key: key, Slot: slot, Holder: holder, Token: e.CreateRevision, Revision: e.Revision, TTL: e.TTL, Remaining: e.Remaining}, nil
}

// RenewKey keeps lease, held in the store key storeKey, alive by its TTL if
// it is still the holder's; otherwise the error is of class lost.
func RenewKey(ctx context.Context, s Store, storeKey string, lease Claim) (Claim, error) {
	if lease.TTL <= 0 {
		return Claim{}, fmt.Errorf("backends: renew %q: ttl %v must be positive: %w", storeKey, lease.TTL, ErrInvalid)
	}
	e, err := s.KeepAlive(ctx, storeKey, lease.Revision, lease.TTL)
	if err != nil {
		return Claim{}, fmt.Errorf("backends: renew %q: %w", storeKey, err)
	}
	got, err := LeaseOf(lease.Key, lease.Slot, e)
	if err != nil {
		return Claim{}, err
	}
	if got.Holder != lease.Holder || got.Token != lease.Token {
		return Claim{}, fmt.Errorf("backends: renew %q: held by %s (token %d), not %s: %w", storeKey, got.Holder, got.Token, lease.Holder, ErrNotHolder)
	}
	return got, nil
}

// ReleaseKey gives up lease, held in the store key storeKey. A claim that
// already expired is not an error; one taken over by another holder gives
// an error wrapping ErrNotHolder.
func ReleaseKey(ctx context.Context, s Store, storeKey string, lease Claim) error {
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
// entry GroupSizeKey(key) exists and there is no claim at key itself) it
// lists the group's live slot holders, by slot, as slots.Group.Holders does.
func (l *StoreLocker) Holders(ctx context.Context, key string) ([]Claim, error) {
	e, err := l.store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return l.groupHolders(ctx, key)
	}
	if err != nil {
		return nil, fmt.Errorf("backends: holders %q: %w", key, err)
	}
	le, err := LeaseOf(key, 0, e)
	if err != nil {
		return nil, err
	}
	return []Claim{le}, nil
}

// groupHolders lists the slot holders of key if it is a slot group, and
// nothing otherwise.
func (l *StoreLocker) groupHolders(ctx context.Context, key string) ([]Claim, error) {
	if ValidateKey(GroupSizeKey(key)) != nil {
		return nil, nil
	}
	_, err := l.store.Get(ctx, GroupSizeKey(key))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("backends: holders %q: %w", key, err)
	}
	return GroupHolders(ctx, l.store, key)
}

// GroupHolders lists the live holders of slot group key in s, by slot: the
// claims at GroupSlotKey(key, i). Keys of nested groups are not holders.
func GroupHolders(ctx context.Context, s Store, key string) ([]Claim, error) {
	prefix := key + groupSlotInfix
	if err := ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	entries, err := s.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("backends: holders of group %q: %w", key, err)
	}
	var out []Claim
	for _, e := range entries {
		i, ok := GroupSlot(key, e.Key)
		if !ok {
			continue // a key of a nested group, not one of ours
		}
		le, err := LeaseOf(key, i, e)
		if err != nil {
			return nil, err
		}
		out = append(out, le)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Slot < out[b].Slot })
	return out, nil
}

// A slot group (package slots) on claim key K lives in the store keys
// K + "/size" (its N, written once and never deleted) and K + "/slot-<i>"
// (one claim per slot). The names are part of the contract so that a
// single claim on K can tell that K is a group, and refuse it.
const (
	groupSizeSuffix = "/size"
	groupSlotInfix  = "/slot-"
)

// GroupSizeKey is the store key holding the size of slot group key. Its
// presence marks key as a slot group.
func GroupSizeKey(key string) string { return key + groupSizeSuffix }

// GroupSlotKey is the store key of slot i of slot group key.
func GroupSlotKey(key string, i int) string { return key + groupSlotInfix + strconv.Itoa(i) }

// GroupSlot parses storeKey back to a slot index of group key. It reports
// false for any other key, including those of groups nested under key.
func GroupSlot(key, storeKey string) (int, bool) {
	rest, ok := strings.CutPrefix(storeKey, key+groupSlotInfix)
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || strconv.Itoa(i) != rest {
		return 0, false
	}
	return i, true
}

// WatchClaim implements ClaimWatcher.
func (l *StoreLocker) WatchClaim(ctx context.Context, key string) (<-chan struct{}, error) {
	return WatchKeys(ctx, l.store, key, func(k string) bool { return k == key })
}

// SignalsExpiry implements ExpiryWatcher: true when the store's watch
// delivers expiry events.
func (l *StoreLocker) SignalsExpiry() bool { return SignalsExpiry(l.store) }

// WatchKeys watches prefix on s and signals (coalescing) for every event
// whose key passes match. It is the building block of ClaimWatcher
// implementations. The returned channel is closed when the underlying watch
// ends; the goroutine it starts exits then too.
func WatchKeys(ctx context.Context, s Store, prefix string, match func(key string) bool) (<-chan struct{}, error) {
	if err := Require(s, CapWatch); err != nil {
		return nil, err
	}
	events, err := s.(Watcher).Watch(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make(chan struct{}, 1)
	go func() {
		defer close(out)
		for ev := range events {
			if !match(ev.Entry.Key) {
				continue
			}
			select {
			case out <- struct{}{}:
			default: // a signal is already pending
			}
		}
	}()
	return out, nil
}

// LeaseOf decodes a claim entry into a Claim for claim key and slot. Lockers
// built over several store keys (slot groups) use it too.
func LeaseOf(key string, slot int, e Entry) (Claim, error) {
	h, err := DecodeClaim(e.Value)
	if err != nil {
		return Claim{}, fmt.Errorf("backends: claim %q (store key %q): %w", key, e.Key, err)
	}
	return Claim{Key: key, Slot: slot, Holder: h, Token: e.CreateRevision, Revision: e.Revision, TTL: e.TTL, Remaining: e.Remaining}, nil
}
