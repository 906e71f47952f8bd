package backends

import (
	"fmt"
	"strings"
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
