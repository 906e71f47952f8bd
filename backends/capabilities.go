package backends

import (
	"fmt"
	"strings"
	"time"
)

// Capability is a set of operations a store enforces atomically.
type Capability uint32

const (
	CapCreateIfAbsent Capability = 1 << iota
	CapCompareAndSet
	CapCompareAndDelete
	CapKeepAlive
	CapWatch
	CapTxn

	// CapClaims is what the generic Locker needs from a store.
	CapClaims = CapCreateIfAbsent | CapCompareAndDelete | CapKeepAlive
)

var capNames = []struct {
	c    Capability
	name string
}{
	{CapCreateIfAbsent, "create-if-absent"},
	{CapCompareAndSet, "compare-and-set"},
	{CapCompareAndDelete, "compare-and-delete"},
	{CapKeepAlive, "keep-alive"},
	{CapWatch, "watch"},
	{CapTxn, "txn"},
}

// String lists the capabilities in c, e.g. "create-if-absent|watch".
func (c Capability) String() string {
	if c == 0 {
		return "none"
	}
	var parts []string
	for _, n := range capNames {
		if c&n.c != 0 {
			parts = append(parts, n.name)
			c &^= n.c
		}
	}
	if c != 0 {
		parts = append(parts, fmt.Sprintf("0x%x", uint32(c)))
	}
	return strings.Join(parts, "|")
}

// Scope is where a store's guarantees hold. Scopes are ordered, narrowest
// first: a caller that needs guarantees among hosts checks
// s.Capabilities().Scope >= ScopeDistributed.
type Scope int

const (
	// ScopeProcess means safe among users of one Store value in one process.
	ScopeProcess Scope = iota + 1
	// ScopeHost means safe among processes on one host.
	ScopeHost
	// ScopeDistributed means safe among processes on any hosts that reach
	// the backend.
	ScopeDistributed
)

func (s Scope) String() string {
	switch s {
	case ScopeProcess:
		return "process"
	case ScopeHost:
		return "host"
	case ScopeDistributed:
		return "distributed"
	}
	return fmt.Sprintf("scope(%d)", int(s))
}

// Capabilities is what a store declares about itself.
type Capabilities struct {
	// Atomic lists the operations the store enforces atomically. Anything
	// not listed is unsupported, whatever methods the store has.
	Atomic Capability

	// Scope is where the guarantees hold.
	Scope Scope

	// ExpiryJudge says, for people, whose clock decides that an entry
	// expired, e.g. "server lease", "host boot id + CLOCK_MONOTONIC".
	ExpiryJudge string

	// ExpiryEvents reports that Watch delivers an entry's expiry, as the
	// store's expiry judge decides it, as an EventDelete to every watch
	// open at the time, once the entry would read as absent. A follower
	// that watches a claim of such a store needs no timer of its own for
	// the holder's expiry. It is meaningful only with CapWatch.
	ExpiryEvents bool

	// ObservedExpiry reports that expiry is judged by local observation:
	// an entry expires for a process once that process has seen it
	// unchanged for its TTL. A process that opened the store a moment ago
	// has watched nothing: an entry whose writer stopped renewing it long
	// ago still reads as live, with the full TTL as its Remaining, until
	// this process has seen it unchanged for a TTL. Whatever shows a
	// remaining time to people must then say that it is unverified, or
	// watch for a TTL first.
	ObservedExpiry bool

	// TTLGranularity, when positive, is the unit TTLs are kept in; MinTTL,
	// when positive, is the shortest TTL the store grants. A store rounds a
	// TTL only upward, and says so in the returned Entry's TTL.
	TTLGranularity time.Duration
	MinTTL         time.Duration
}

// Has reports whether every capability in need is declared.
func (c Capabilities) Has(need Capability) bool { return c.Atomic&need == need }

// Require returns nil if s declares every capability in need and implements
// the interface each one requires (Watcher for CapWatch, Txner for CapTxn).
// Otherwise it returns an error wrapping ErrUnsupported, which wraps
// errors.ErrUnsupported. A wrapper store that declares a capability it does
// not pass through therefore fails here instead of at run time.
func Require(s Store, need Capability) error {
	if s == nil {
		return fmt.Errorf("backends: require %s of a nil store: %w", need, ErrInvalid)
	}
	caps := s.Capabilities()
	if missing := need &^ caps.Atomic; missing != 0 {
		return fmt.Errorf("backends: store %T does not enforce %s: %w", s, missing, ErrUnsupported)
	}
	if need&CapWatch != 0 {
		if _, ok := s.(Watcher); !ok {
			return fmt.Errorf("backends: store %T declares watch but has no Watch method: %w", s, ErrUnsupported)
		}
	}
	if need&CapTxn != 0 {
		if _, ok := s.(Txner); !ok {
			return fmt.Errorf("backends: store %T declares txn but has no Txn method: %w", s, ErrUnsupported)
		}
	}
	return nil
}
