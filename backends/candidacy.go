package backends

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tenure-go/tenure/internal/wire"
)

// Candidate is a candidacy entry: a holder declaring that it campaigns for
// a claim, with the priority its preference policy gives it. Candidates
// are visible to the claim's leader only while their entry lives; an
// entry expires like a claim unless it is renewed.
type Candidate struct {
	Key    string // the claim key
	Holder Holder // identity, nonce and advertised value
	// Priority orders candidates: a leader transfers its claim to a
	// candidate whose priority is higher than its own.
	Priority int64
	// Revision is the entry's current revision, which RenewCandidacy and
	// WithdrawCandidacy compare against.
	Revision int64
	TTL      time.Duration
	// Remaining is Entry.Remaining of the entry: a hint, never a safety
	// bound.
	Remaining time.Duration
}

// Candidacies is implemented by Lockers that keep candidacy entries beside
// their claims. StoreLocker implements it over every Store, at the store
// keys wire.CandidateKey(key, nonce): one per candidate instance, written
// with a TTL, so a store that renews many entries at once (a shared lease,
// a session) renews a candidacy with the claims it renews anyway.
type Candidacies interface {
	// DeclareCandidacy writes holder's candidacy for claim key with
	// priority and ttl, replacing an earlier one of the same holder.
	DeclareCandidacy(ctx context.Context, key string, holder Holder, priority int64, ttl time.Duration) (Candidate, error)

	// RenewCandidacy extends c by its TTL if it is unchanged; else an
	// error of class lost (the entry expired or was replaced).
	RenewCandidacy(ctx context.Context, c Candidate) (Candidate, error)

	// WithdrawCandidacy deletes c if it is unchanged. An entry already
	// gone is not an error.
	WithdrawCandidacy(ctx context.Context, c Candidate) error

	// Candidates lists the live candidacies for claim key, by descending
	// priority, then by identity and nonce, and the pending transfer
	// request, if any (nil otherwise), read in the same listing.
	Candidates(ctx context.Context, key string) ([]Candidate, *TransferRequest, error)

	// RequestTransfer asks the leader of claim key, whoever it is, to
	// transfer the claim to the candidate with identity to, or to its
	// best candidate if to is empty. The request lives for within; a
	// leader that keeps candidacies (elector.Config.Candidacy) acts on it
	// at its next renewal and deletes it.
	RequestTransfer(ctx context.Context, key, to string, within time.Duration) (TransferRequest, error)

	// ClearTransferRequest deletes r if it is unchanged. A request
	// already gone is not an error.
	ClearTransferRequest(ctx context.Context, r TransferRequest) error
}

// TransferRequest is a pending request that a claim's leader transfer it.
type TransferRequest struct {
	Key string
	// To is the identity to transfer to; empty means the candidate of
	// highest priority.
	To        string
	Revision  int64
	Remaining time.Duration
}

var _ Candidacies = (*StoreLocker)(nil)

// candidateKey is the store key of holder's candidacy for key, checked.
func candidateKey(key string, holder Holder) (string, error) {
	if holder.Nonce == "" || wire.CandidateKey(key, holder.Nonce) == wire.TransferRequestKey(key) {
		return "", fmt.Errorf("backends: candidacy %q: holder %s has no nonce a candidacy can be kept under: %w", key, holder, ErrInvalid)
	}
	k := wire.CandidateKey(key, holder.Nonce)
	if err := ValidateKey(k); err != nil {
		return "", fmt.Errorf("backends: candidacy %q: the key is too long to hold candidacies beside it: %w", key, err)
	}
	return k, nil
}

// DeclareCandidacy implements Candidacies.
func (l *StoreLocker) DeclareCandidacy(ctx context.Context, key string, holder Holder, priority int64, ttl time.Duration) (Candidate, error) {
	if err := validateHolder(holder); err != nil {
		return Candidate{}, err
	}
	if err := claimTTL(ttl); err != nil {
		return Candidate{}, fmt.Errorf("backends: candidacy %q: %w", key, err)
	}
	ck, err := candidateKey(key, holder)
	if err != nil {
		return Candidate{}, err
	}
	value := wire.EncodeCandidacy(wire.Claim{ID: holder.ID, Nonce: holder.Nonce, Advertised: holder.Advertised}, priority)
	e, err := l.store.CreateIfAbsent(ctx, ck, value, ttl)
	var ce *ConflictError
	if errors.As(err, &ce) && ce.Found {
		// An earlier declaration of this instance (an answer lost, a new
		// priority): replace it.
		e, err = l.store.CompareAndSet(ctx, ck, ce.Current.Revision, value, ttl)
	}
	if err != nil {
		return Candidate{}, fmt.Errorf("backends: candidacy %q: declare: %w", key, err)
	}
	return Candidate{Key: key, Holder: holder, Priority: priority, Revision: e.Revision, TTL: e.TTL, Remaining: e.Remaining}, nil
}

// RenewCandidacy implements Candidacies.
func (l *StoreLocker) RenewCandidacy(ctx context.Context, c Candidate) (Candidate, error) {
	if err := claimTTL(c.TTL); err != nil {
		return Candidate{}, fmt.Errorf("backends: candidacy %q: renew: %w", c.Key, err)
	}
	ck, err := candidateKey(c.Key, c.Holder)
	if err != nil {
		return Candidate{}, err
	}
	e, err := l.store.KeepAlive(ctx, ck, c.Revision, c.TTL)
	if err != nil {
		return Candidate{}, fmt.Errorf("backends: candidacy %q: renew: %w", c.Key, err)
	}
	c.Revision, c.TTL, c.Remaining = e.Revision, e.TTL, e.Remaining
	return c, nil
}

// WithdrawCandidacy implements Candidacies.
func (l *StoreLocker) WithdrawCandidacy(ctx context.Context, c Candidate) error {
	ck, err := candidateKey(c.Key, c.Holder)
	if err != nil {
		return err
	}
	err = l.store.CompareAndDelete(ctx, ck, c.Revision)
	var ce *ConflictError
	switch {
	case err == nil, errors.As(err, &ce) && !ce.Found:
		return nil
	case err != nil && errors.As(err, &ce):
		return fmt.Errorf("backends: candidacy %q: withdraw: now at revision %d: %w", c.Key, ce.Current.Revision, ErrNotHolder)
	}
	return fmt.Errorf("backends: candidacy %q: withdraw: %w", c.Key, err)
}

// Candidates implements Candidacies. An entry that is not a candidacy is
// an error wrapping ErrCorrupt.
func (l *StoreLocker) Candidates(ctx context.Context, key string) ([]Candidate, *TransferRequest, error) {
	prefix := wire.CandidatePrefix(key)
	if err := ValidatePrefix(prefix); err != nil {
		return nil, nil, fmt.Errorf("backends: candidates %q: %w", key, err)
	}
	entries, err := l.store.List(ctx, prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("backends: candidates %q: %w", key, err)
	}
	out := make([]Candidate, 0, len(entries))
	var req *TransferRequest
	for _, e := range entries {
		if strings.Contains(e.Key[len(prefix):], "/") {
			continue // a key of a claim nested under key
		}
		if e.Key == wire.TransferRequestKey(key) {
			to, err := wire.DecodeTransferRequest(e.Value)
			if err != nil {
				return nil, nil, fmt.Errorf("backends: candidates %q (store key %q): %v: %w", key, e.Key, err, ErrCorrupt)
			}
			req = &TransferRequest{Key: key, To: to, Revision: e.Revision, Remaining: e.Remaining}
			continue
		}
		c, prio, err := wire.DecodeCandidacy(e.Value)
		if err != nil {
			return nil, nil, fmt.Errorf("backends: candidates %q (store key %q): %v: %w", key, e.Key, err, ErrCorrupt)
		}
		if e.Key != wire.CandidateKey(key, c.Nonce) {
			return nil, nil, fmt.Errorf("backends: candidates %q: store key %q holds the candidacy of nonce %q: %w", key, e.Key, c.Nonce, ErrCorrupt)
		}
		out = append(out, Candidate{
			Key: key, Holder: Holder{ID: c.ID, Nonce: c.Nonce, Advertised: c.Advertised},
			Priority: prio, Revision: e.Revision, TTL: e.TTL, Remaining: e.Remaining,
		})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		if a.Holder.ID != b.Holder.ID {
			return a.Holder.ID < b.Holder.ID
		}
		return a.Holder.Nonce < b.Holder.Nonce
	})
	return out, req, nil
}

// RequestTransfer implements Candidacies. A pending request is replaced.
func (l *StoreLocker) RequestTransfer(ctx context.Context, key, to string, within time.Duration) (TransferRequest, error) {
	if to != "" {
		if err := validateID(to); err != nil {
			return TransferRequest{}, fmt.Errorf("backends: transfer request %q: target: %w", key, err)
		}
	}
	if err := claimTTL(within); err != nil {
		return TransferRequest{}, fmt.Errorf("backends: transfer request %q: %w", key, err)
	}
	rk := wire.TransferRequestKey(key)
	if err := ValidateKey(rk); err != nil {
		return TransferRequest{}, fmt.Errorf("backends: transfer request %q: the key is too long to hold a request beside it: %w", key, err)
	}
	value := wire.EncodeTransferRequest(to)
	e, err := l.store.CreateIfAbsent(ctx, rk, value, within)
	var ce *ConflictError
	if errors.As(err, &ce) && ce.Found {
		e, err = l.store.CompareAndSet(ctx, rk, ce.Current.Revision, value, within)
	}
	if err != nil {
		return TransferRequest{}, fmt.Errorf("backends: transfer request %q: %w", key, err)
	}
	return TransferRequest{Key: key, To: to, Revision: e.Revision, Remaining: e.Remaining}, nil
}

// ClearTransferRequest implements Candidacies.
func (l *StoreLocker) ClearTransferRequest(ctx context.Context, r TransferRequest) error {
	err := l.store.CompareAndDelete(ctx, wire.TransferRequestKey(r.Key), r.Revision)
	var ce *ConflictError
	switch {
	case err == nil, errors.As(err, &ce) && !ce.Found:
		return nil
	case errors.As(err, &ce):
		return fmt.Errorf("backends: transfer request %q: clear: replaced (now at revision %d): %w", r.Key, ce.Current.Revision, ErrConflict)
	}
	return fmt.Errorf("backends: transfer request %q: clear: %w", r.Key, err)
}
