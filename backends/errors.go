package backends

import (
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// Sentinel errors. Backends wrap them (with %w) so callers can branch with
// errors.Is; the message of the wrapping error names the package, the
// operation and the key, so the sentinels' own text carries no prefix:
// a bad key reads "backends: empty key: invalid argument".
var (
	// ErrNotFound is returned when the key is absent or expired.
	ErrNotFound = errors.New("key not found")
	// ErrExists is returned when the key is present where the caller
	// required it absent.
	ErrExists = errors.New("key exists")
	// ErrConflict is returned when a compare failed. Every *ConflictError
	// matches it.
	ErrConflict = errors.New("revision conflict")
	// ErrUnsupported is returned when the store does not enforce what was
	// asked. It wraps errors.ErrUnsupported.
	ErrUnsupported = fmt.Errorf("%w", errors.ErrUnsupported)
	// ErrInvalid is returned when the arguments are not acceptable (empty
	// key, negative TTL, an oversized value, ...).
	ErrInvalid = errors.New("invalid argument")
	// ErrUsage is returned when the store answered that the request misuses
	// the key in a way no retry can fix, however long one waits: a single
	// claim asked on a key that is a slot group. It wraps ErrInvalid (class
	// fatal); an elector stops at the first one and reports it as a usage
	// error.
	ErrUsage = fmt.Errorf("usage error: %w", ErrInvalid)
	// ErrClosed is returned by a store that was closed.
	ErrClosed = errors.New("store closed")

	// ErrUnavailable is returned when the backend could not be reached or
	// did not answer in time; the outcome of a write is unknown.
	ErrUnavailable = errors.New("backend unavailable")
	// ErrThrottled is returned when the backend refused the request for
	// rate reasons.
	ErrThrottled = errors.New("throttled")

	// ErrPermission is returned when the backend refused the caller's
	// credentials.
	ErrPermission = errors.New("permission denied")
	// ErrMissingResource is returned when something the store lives in (a
	// table, a namespace, a directory) does not exist.
	ErrMissingResource = errors.New("backend resource missing")
	// ErrCorrupt is returned when stored state cannot be decoded. Stores
	// fail closed on it and never report such a key as absent.
	ErrCorrupt = errors.New("corrupt state")

	// ErrHeld is returned when a claim is held by another holder.
	// TryAcquire returns it as a *HeldError.
	ErrHeld = errors.New("claim held by another holder")
	// ErrNotHolder is returned when the claim named in Renew or Release is
	// no longer the caller's.
	ErrNotHolder = errors.New("claim not held")
)

// ConflictError reports a failed compare. It carries the entry the store
// holds now, so the caller can retry without another read.
type ConflictError struct {
	Op       string // "create", "cas", "delete", "keepalive", "txn"
	Key      string
	Expected int64 // the revision the caller named; 0 = absent
	// Current is the live entry; meaningful only when Found.
	Current Entry
	Found   bool
}

// Error reads `op "key": what failed`, e.g. `cas "k": revision conflict:
// expected 3, current 5`; a store prefixes its own name ("etcd: ...").
func (e *ConflictError) Error() string {
	if !e.Found {
		return fmt.Sprintf("%s %q: expected revision %d, key is absent", e.Op, e.Key, e.Expected)
	}
	if e.Expected == 0 {
		return fmt.Sprintf("%s %q: key exists at revision %d", e.Op, e.Key, e.Current.Revision)
	}
	return fmt.Sprintf("%s %q: revision conflict: expected %d, current %d", e.Op, e.Key, e.Expected, e.Current.Revision)
}

// Is makes every ConflictError match ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Unwrap gives the reason: ErrExists when the key was present but had to be
// absent, ErrNotFound when it was absent but a revision was named.
func (e *ConflictError) Unwrap() error {
	switch {
	case !e.Found:
		return ErrNotFound
	case e.Expected == 0:
		return ErrExists
	}
	return nil
}

// HeldError is returned by TryAcquire when the claim is held. It wraps
// ErrHeld and lists the live holders it saw.
type HeldError struct {
	Key     string
	Holders []Claim
}

func (e *HeldError) Error() string {
	if len(e.Holders) == 1 {
		h := e.Holders[0]
		return fmt.Sprintf("backends: claim %q held by %s (token %d)", e.Key, h.Holder, h.Token)
	}
	return fmt.Sprintf("backends: claim %q held by %d holders", e.Key, len(e.Holders))
}

func (e *HeldError) Unwrap() error { return ErrHeld }

// ReservedError is returned by TryAcquire when the claim is free but a
// transfer reserves it for another candidate (see Transferer). It wraps
// ErrHeld: the claim is not the caller's to take, now.
type ReservedError struct {
	Key string
	// To is the identity the claim is reserved for.
	To string
	// From is the holder that transferred the claim, and Token its token.
	From  Holder
	Token int64
	// Remaining estimates how long the reservation has left, as the store
	// judged it when it was read; a hint for timing a retry, never a safety
	// bound (see Entry.Remaining).
	Remaining time.Duration
}

func (e *ReservedError) Error() string {
	return fmt.Sprintf("backends: claim %q reserved for %q by a transfer from %s (token %d)", e.Key, e.To, e.From, e.Token)
}

func (e *ReservedError) Unwrap() error { return ErrHeld }

// Class is what an error means for a holder.
type Class int

const (
	// ClassNone is the class of no error (nil).
	ClassNone Class = iota
	// ClassLost means the claim is someone else's (or gone); act on it now.
	ClassLost
	// ClassTransient means the outcome is unknown or the backend is briefly
	// unable; retrying may succeed.
	ClassTransient
	// ClassFatal means retrying will not help (permissions, a missing resource,
	// corrupt state, bad arguments, a closed store, an unsupported
	// operation).
	ClassFatal
)

func (c Class) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassLost:
		return "lost"
	case ClassTransient:
		return "transient"
	case ClassFatal:
		return "fatal"
	}
	return fmt.Sprintf("class(%d)", int(c))
}

// classifier lets an error state its class directly: Classify honours the
// first error in the chain with an ErrorClass() Class method (as
// *ClassError has) before looking at sentinels.
type classifier interface {
	ErrorClass() Class
}

// Classify sorts err into a Class. Fatal sentinels win over lost ones, and
// lost over transient, so that an error carrying several reasons is treated
// by the most conservative one. Fatal are ErrPermission, ErrMissingResource,
// ErrCorrupt, ErrInvalid, ErrClosed and ErrUnsupported, and also the
// standard library's errors.ErrUnsupported and fs.ErrPermission (which
// EACCES and EPERM match), so that a Locker that wraps those without
// mapping them is not retried for ever. An error Classify does not
// recognise is transient: its outcome is unknown, and a holder retries only
// until its deadline, so this never extends leadership.
func Classify(err error) Class {
	if err == nil {
		return ClassNone
	}
	var c classifier
	if errors.As(err, &c) {
		return c.ErrorClass()
	}
	// ErrUnsupported wraps errors.ErrUnsupported: one check matches both.
	for _, s := range []error{ErrPermission, fs.ErrPermission, ErrMissingResource, ErrCorrupt, ErrInvalid, errors.ErrUnsupported, ErrClosed} {
		if errors.Is(err, s) {
			return ClassFatal
		}
	}
	for _, s := range []error{ErrConflict, ErrExists, ErrNotFound, ErrHeld, ErrNotHolder} {
		if errors.Is(err, s) {
			return ClassLost
		}
	}
	// Timeouts and cancellations (context.DeadlineExceeded, context.Canceled)
	// land here too: a write cut off mid-flight may or may not have happened.
	return ClassTransient
}

// ClassError attaches a class to an error. Backends use it for errors whose
// class is known but that match no sentinel.
type ClassError struct {
	Class Class
	Err   error
}

func (e *ClassError) Error() string     { return e.Err.Error() }
func (e *ClassError) Unwrap() error     { return e.Err }
func (e *ClassError) ErrorClass() Class { return e.Class }
