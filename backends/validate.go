package backends

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of keys and values. Every backend accepts keys and values within
// them; the Validate functions reject anything beyond them, so a backend that
// validates with them accepts exactly these.
//
// The Validate functions are for whoever implements a Store, tenure's own
// backends and any other: a store that checks its arguments with them
// accepts exactly the inputs every other store accepts, which is what the
// conformance suite (package backendtest) checks. Each error wraps
// ErrInvalid.
const (
	MaxKeyBytes   = 512
	MaxValueBytes = 64 << 10
)

// ValidateKey checks a key against the limits every backend shares: non-empty,
// valid UTF-8, no NUL byte, at most MaxKeyBytes. Spaces, slashes and any other
// Unicode are allowed. The error wraps ErrInvalid.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("backends: empty key: %w", ErrInvalid)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("backends: key of %d bytes exceeds %d: %w", len(key), MaxKeyBytes, ErrInvalid)
	case !utf8.ValidString(key):
		return fmt.Errorf("backends: key %q is not valid UTF-8: %w", key, ErrInvalid)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("backends: key %q contains a NUL byte: %w", key, ErrInvalid)
	}
	return nil
}

// ValidatePrefix checks a List or Watch prefix: like a key, but may be empty.
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return ValidateKey(prefix)
}

// validateValue checks a value's size. Empty and nil values are allowed.
func validateValue(value []byte) error {
	if len(value) > MaxValueBytes {
		return fmt.Errorf("backends: value of %d bytes exceeds %d: %w", len(value), MaxValueBytes, ErrInvalid)
	}
	return nil
}

// ValidateTTL rejects a negative TTL. 0 means no expiry.
func ValidateTTL(ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("backends: negative ttl %v: %w", ttl, ErrInvalid)
	}
	return nil
}

// ValidateRevision rejects a revision below zero, or of zero when a positive
// one is required (CompareAndDelete, KeepAlive).
func ValidateRevision(rev int64, positive bool) error {
	if rev < 0 || (positive && rev == 0) {
		return fmt.Errorf("backends: revision %d out of range: %w", rev, ErrInvalid)
	}
	return nil
}

// ValidateWrite checks the arguments of a create or compare-and-set: the
// key, the revision, the value's size (at most MaxValueBytes; empty and nil
// are allowed) and the TTL.
func ValidateWrite(key string, rev int64, value []byte, ttl time.Duration) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := ValidateRevision(rev, false); err != nil {
		return err
	}
	if err := validateValue(value); err != nil {
		return err
	}
	return ValidateTTL(ttl)
}

// ValidateTxn checks a transaction's shape: valid keys, known op kinds, valid
// values and TTLs, and no key written twice.
func ValidateTxn(conds []Cond, ops []Op) error {
	for _, c := range conds {
		if err := ValidateKey(c.Key); err != nil {
			return err
		}
		if err := ValidateRevision(c.Revision, false); err != nil {
			return err
		}
	}
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		if err := ValidateKey(op.Key); err != nil {
			return err
		}
		if seen[op.Key] {
			return fmt.Errorf("backends: txn writes %q twice: %w", op.Key, ErrInvalid)
		}
		seen[op.Key] = true
		switch op.Kind {
		case OpPut:
			if err := validateValue(op.Value); err != nil {
				return err
			}
			if err := ValidateTTL(op.TTL); err != nil {
				return err
			}
		case OpDelete:
		default:
			return fmt.Errorf("backends: txn op on %q has unknown kind %d: %w", op.Key, op.Kind, ErrInvalid)
		}
	}
	return nil
}
