package backends

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/internal/wire"
)

// Transferer is implemented by Lockers that can hand a claim to a named
// candidate. StoreLocker implements it over every Store.
type Transferer interface {
	// Transfer gives up c, which must be the caller's, and reserves its key
	// for the candidate with identity to for the time within, counted and
	// judged as a TTL is: until then only a holder with that identity can
	// take the claim (with TryAcquire, at a token greater than c's), others
	// get a *ReservedError; after it, or once the target has taken the
	// claim, the key is open to all again. The caller must have stopped
	// acting under c first: Transfer is a release.
	//
	// A claim that is no longer the caller's gives an error wrapping
	// ErrNotHolder and reserves nothing. An error of another class leaves
	// the outcome unknown: the claim may be released and reserved, or
	// still held (then it expires), never held by two.
	Transfer(ctx context.Context, c Claim, to string, within time.Duration) error
}

var _ Transferer = (*StoreLocker)(nil)

// transferAttempts bounds how often Transfer tries again when it met a
// reservation other than the one it expected (one left by an earlier
// transfer, or changed meanwhile).
const transferAttempts = 3

// Transfer implements Transferer. The reservation is the store key
// wire.TransferKey(c.Key), naming the target; a holder whose own claim is
// c (its identity and nonce) is never its target, so a holder cannot take
// back what it gave away, even when to is its own identity.
//
// On a store that declares CapTxn, the reservation's write and the claim's
// delete are one transaction conditioned on the claim's revision, so it
// happens only while c is the caller's. On other stores the reservation is
// written first and the claim deleted second (by its revision); if the
// delete finds the claim no longer the caller's, the reservation is deleted
// again. A candidate that takes the claim reads the reservation after its
// create (see TryAcquire), so no interleaving lets a third candidate lead
// in between, and none makes two holders: the claim itself is still taken
// only by create-if-absent.
func (l *StoreLocker) Transfer(ctx context.Context, c Claim, to string, within time.Duration) error {
	if err := validateID(to); err != nil {
		return fmt.Errorf("backends: transfer %q: target: %w", c.Key, err)
	}
	if err := claimTTL(within); err != nil {
		return fmt.Errorf("backends: transfer %q: reservation %w", c.Key, err)
	}
	tkey := wire.TransferKey(c.Key)
	if err := ValidateKey(tkey); err != nil {
		return fmt.Errorf("backends: transfer %q: the key is too long to hold a transfer beside it: %w", c.Key, err)
	}
	if c.Revision <= 0 {
		return fmt.Errorf("backends: transfer %q: no revision in the claim: %w", c.Key, ErrInvalid)
	}
	value := wire.EncodeTransfer(to, c.Holder.ID, c.Holder.Nonce, c.Token)
	var err error
	// Most often no reservation is left, or the one this claim's take
	// left in place (see checkTransfer): try with that, and on a conflict,
	// again at the revision the conflict reports.
	rev := l.keptRev(c)
	for range transferAttempts {
		if l.txn != nil {
			err = l.transferTxn(ctx, c, tkey, rev, value, within)
		} else {
			err = l.transferSteps(ctx, c, tkey, rev, value, within)
		}
		var ce *ConflictError
		if !errors.As(err, &ce) || ce.Key != tkey {
			if err == nil {
				l.takeKept(c) // replaced by the transfer's own
			}
			return err
		}
		if rev = 0; ce.Found {
			rev = ce.Current.Revision
		}
	}
	return fmt.Errorf("backends: transfer %q: the reservation kept changing: %w", c.Key, &ClassError{Class: ClassTransient, Err: err})
}

// transferTxn reserves and releases in one transaction.
func (l *StoreLocker) transferTxn(ctx context.Context, c Claim, tkey string, rev int64, value []byte, within time.Duration) error {
	_, err := l.txn.Txn(ctx,
		[]Cond{{Key: c.Key, Revision: c.Revision}, {Key: tkey, Revision: rev}},
		[]Op{{Kind: OpPut, Key: tkey, Value: value, TTL: within}, {Kind: OpDelete, Key: c.Key}})
	var ce *ConflictError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce) && ce.Key == c.Key:
		return fmt.Errorf("backends: transfer %q: %s: %w", c.Key, notHolder(ce), ErrNotHolder)
	case errors.As(err, &ce) && ce.Key == tkey:
		return err
	}
	return fmt.Errorf("backends: transfer %q: %w", c.Key, err)
}

// transferSteps reserves, then releases, on a store without transactions.
func (l *StoreLocker) transferSteps(ctx context.Context, c Claim, tkey string, rev int64, value []byte, within time.Duration) error {
	r, err := l.store.CompareAndSet(ctx, tkey, rev, value, within)
	var ce *ConflictError
	switch {
	case errors.As(err, &ce):
		return err
	case err != nil:
		return fmt.Errorf("backends: transfer %q: reserve: %w", c.Key, err)
	}
	err = l.store.CompareAndDelete(ctx, c.Key, c.Revision)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		// Not ours any more: take the reservation back, so that it does
		// not stand in the way of the claim's new holder's successors.
		// If that fails it expires.
		_ = l.store.CompareAndDelete(ctx, tkey, r.Revision)
		return fmt.Errorf("backends: transfer %q: %s: %w", c.Key, notHolder(ce), ErrNotHolder)
	}
	return fmt.Errorf("backends: transfer %q: release after reserving: %w", c.Key, err)
}

// notHolder says why a compare on a claim failed.
func notHolder(ce *ConflictError) string {
	if !ce.Found {
		return "the claim has expired"
	}
	return fmt.Sprintf("the claim is now at revision %d", ce.Current.Revision)
}

// reservedFor reports whether holder may take claim key under the
// reservation r: nil if r names holder's identity and holder is not the
// one that transferred it, else a *ReservedError (or an error wrapping
// ErrCorrupt for a value that is not a reservation).
func reservedFor(key string, holder Holder, r Entry) error {
	to, from, fromNonce, token, err := wire.DecodeTransfer(r.Value)
	if err != nil {
		return fmt.Errorf("backends: claim %q (store key %q): %v: %w", key, r.Key, err, ErrCorrupt)
	}
	fromHolder := Holder{ID: from, Nonce: fromNonce}
	if holder.ID == to && (holder.ID != from || holder.Nonce != fromNonce) {
		return nil
	}
	return &ReservedError{Key: key, To: to, From: fromHolder, Token: token, Remaining: r.Remaining}
}

// reservedFor is reservedFor, noting a reservation that refuses holder
// (see reserved): the next attempt reads it before it writes anything,
// even if no watch showed it.
func (l *StoreLocker) reservedFor(key string, holder Holder, r Entry) error {
	err := reservedFor(key, holder, r)
	var re *ReservedError
	if errors.As(err, &re) {
		l.noteReservation(key, Event{Kind: EventPut, Entry: r})
	}
	return err
}

// checkTransfer runs after holder created claim key on a store without
// transactions: it reads the reservation, if any. A reservation for holder
// is left in place, and its revision returned: the target holds the claim
// now, so no one else can take it, and deleting the reservation at once
// would put one more write between the old leader's work and the new
// one's (Release deletes it). One for another candidate is a
// *ReservedError, and the caller gives the claim up unused.
func (l *StoreLocker) checkTransfer(ctx context.Context, key string, holder Holder) (int64, error) {
	tkey := wire.TransferKey(key)
	if ValidateKey(tkey) != nil {
		return 0, nil // too long to have a reservation beside it
	}
	r, err := l.store.Get(ctx, tkey)
	switch {
	case errors.Is(err, ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("backends: acquire %q: check for a transfer: %w", key, err)
	}
	if err := l.reservedFor(key, holder, r); err != nil {
		return 0, err
	}
	return r.Revision, nil
}
