// Package check checks the arguments of a backends.Store call against the
// limits every backend shares, for whoever implements a Store: tenure's own
// backends and any other. A store that checks its arguments with it accepts
// exactly the inputs every other store accepts, which is what the
// conformance suite (package backendtest) checks. Keys and prefixes are
// checked with backends.ValidateKey and ValidatePrefix, which the runtime
// uses too.
//
// Each error wraps backends.ErrInvalid. The functions only look at their
// arguments: they keep no state and never block.
package check

import (
	"fmt"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// TTL rejects a negative TTL and one above backends.MaxTTL. 0 means no
// expiry.
func TTL(ttl time.Duration) error { return backends.ValidateTTL(ttl) }

// KeepAliveTTL rejects the TTL of a keep-alive unless it is positive and at
// most backends.MaxTTL: a keep-alive cannot make an entry permanent.
func KeepAliveTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("check: keep-alive ttl %v, want positive: %w", ttl, backends.ErrInvalid)
	}
	return TTL(ttl)
}

// Revision rejects a revision below zero, or of zero when a positive one is
// required (CompareAndDelete, KeepAlive).
func Revision(rev int64, positive bool) error {
	if rev < 0 || (positive && rev == 0) {
		return fmt.Errorf("check: revision %d out of range: %w", rev, backends.ErrInvalid)
	}
	return nil
}

// value checks a value's size. Empty and nil values are allowed.
func value(v []byte) error {
	if len(v) > backends.MaxValueBytes {
		return fmt.Errorf("check: value of %d bytes exceeds %d: %w", len(v), backends.MaxValueBytes, backends.ErrInvalid)
	}
	return nil
}

// Write checks the arguments of a create or compare-and-set: the key, the
// revision (0 for create-only), the value's size (at most
// backends.MaxValueBytes; empty and nil are allowed) and the TTL.
func Write(key string, rev int64, v []byte, ttl time.Duration) error {
	if err := backends.ValidateKey(key); err != nil {
		return err
	}
	if err := Revision(rev, false); err != nil {
		return err
	}
	if err := value(v); err != nil {
		return err
	}
	return TTL(ttl)
}

// Txn checks a transaction's shape: valid keys, known op kinds, valid
// values and TTLs, and no key written twice.
func Txn(conds []backends.Cond, ops []backends.Op) error {
	for _, c := range conds {
		if err := backends.ValidateKey(c.Key); err != nil {
			return err
		}
		if err := Revision(c.Revision, false); err != nil {
			return err
		}
	}
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		if err := backends.ValidateKey(op.Key); err != nil {
			return err
		}
		if seen[op.Key] {
			return fmt.Errorf("check: txn writes %q twice: %w", op.Key, backends.ErrInvalid)
		}
		seen[op.Key] = true
		switch op.Kind {
		case backends.OpPut:
			if err := value(op.Value); err != nil {
				return err
			}
			if err := TTL(op.TTL); err != nil {
				return err
			}
		case backends.OpDelete:
		default:
			return fmt.Errorf("check: txn op on %q has unknown kind %d: %w", op.Key, op.Kind, backends.ErrInvalid)
		}
	}
	return nil
}
