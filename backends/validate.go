package backends

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of keys and values. Every backend accepts keys and values within
// them and refuses anything beyond them with an error wrapping ErrInvalid;
// package backends/check checks a Store call's arguments against them, and
// the conformance suite (package backendtest) checks that a store does.
const (
	MaxKeyBytes   = 512
	MaxValueBytes = 64 << 10
)

// MaxTTL is the longest TTL a write may ask for: one year. Every backend
// represents every TTL up to it exactly (or rounded up) and refuses a
// longer one with an error wrapping ErrInvalid, in every call that takes a
// TTL (create, compare-and-set, keep-alive, a transaction's puts). A
// longer TTL is never what a claim needs (a crashed holder would block its
// key for longer), and near the end of time.Duration's range it overflows
// the units stores keep TTLs in, where it can turn into a TTL that has
// already passed. TTL 0 (no expiry) stays the way to write an entry that
// never expires.
const MaxTTL = 365 * 24 * time.Hour

// ValidateTTL checks a TTL a write asks for: 0 (no expiry) or positive and
// at most MaxTTL. The error wraps ErrInvalid.
func ValidateTTL(ttl time.Duration) error {
	switch {
	case ttl < 0:
		return fmt.Errorf("backends: negative ttl %v: %w", ttl, ErrInvalid)
	case ttl > MaxTTL:
		return fmt.Errorf("backends: ttl %v exceeds the maximum of %v: %w", ttl, MaxTTL, ErrInvalid)
	}
	return nil
}

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
