package backends

import (
	"context"
	"time"
)

// Entry is one key's current state in a Store.
type Entry struct {
	Key   string
	Value []byte

	// Revision changes on every write of the value (the modify index). It
	// does not change on KeepAlive.
	Revision int64

	// CreateRevision is set when the key goes from absent to present and is
	// kept until the key is deleted or expires. It is the fencing token of
	// whoever created the entry.
	CreateRevision int64

	// TTL is the time to live granted at the last write or keep-alive;
	// 0 means the entry never expires.
	TTL time.Duration

	// Remaining estimates how long the entry has left, as judged by the
	// backend's expiry judge when it was read. It is meaningful only when TTL
	// is positive and is a hint for timing a retry, never a safety bound. On
	// a store whose expiry is judged by local observation
	// (Capabilities.ObservedExpiry) it is this process's wait: the full TTL
	// for an entry it has not yet seen change, however long ago its writer
	// stopped renewing it.
	Remaining time.Duration

	// Recorded is the time of the entry's last write or keep-alive as the
	// store recorded it (a server's clock, or the writer's where the
	// store keeps that), or zero where the store records none. It is for
	// people reading the entry, and never for judging expiry: it comes from
	// another host's wall clock.
	Recorded time.Time
}

// Store is a revisioned key-value store with TTLs. Implementations are safe
// for concurrent use. See the package documentation for the guarantees every
// implementation makes.
type Store interface {
	// Capabilities states what the store enforces atomically and where its
	// guarantees hold.
	Capabilities() Capabilities

	// Get returns the live entry for key, or an error wrapping ErrNotFound.
	Get(ctx context.Context, key string) (Entry, error)

	// List returns the live entries whose keys start with prefix, in key
	// order. An empty prefix lists every key.
	List(ctx context.Context, prefix string) ([]Entry, error)

	// CreateIfAbsent writes key only if it is absent (or expired). If it is
	// present the error is a *ConflictError wrapping ErrExists and carrying
	// the current entry.
	CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (Entry, error)

	// CompareAndSet writes key only if its current Revision equals rev.
	// rev 0 means create-only and behaves like CreateIfAbsent. A failed
	// compare returns a *ConflictError (wrapping ErrExists or ErrNotFound
	// where that is the reason) and changes nothing.
	CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (Entry, error)

	// CompareAndDelete deletes key only if its current Revision equals rev,
	// which must be positive.
	CompareAndDelete(ctx context.Context, key string, rev int64) error

	// KeepAlive sets the entry's TTL to ttl, counted from now, only if its
	// current Revision equals rev. It changes neither Revision nor value and
	// produces no watch event. ttl must be positive. A backend that cannot
	// honour a given ttl exactly returns an error wrapping ErrInvalid rather
	// than shortening it.
	//
	// Because a keep-alive leaves the revision as it was, a CompareAndSet
	// naming a revision read earlier still matches an entry its holder has
	// kept alive since. Never take over a claim by CompareAndSet on a
	// revision you judged expired: take claims with CreateIfAbsent, which
	// succeeds only once the store itself judges the entry gone.
	KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (Entry, error)

	// Close releases the store's resources. It is idempotent; every other
	// method fails with an error wrapping ErrClosed afterwards. Close does not
	// delete entries.
	Close() error
}

// EventKind says what happened to a key.
type EventKind int

const (
	// EventPut reports that the key was created or its value written.
	EventPut EventKind = iota + 1
	// EventDelete reports that the key was deleted, or that it expired (where
	// the backend declares Capabilities.ExpiryEvents).
	EventDelete
)

func (k EventKind) String() string {
	switch k {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return "unknown"
}

// Event is one change seen by a watch. For EventPut, Entry is the new entry.
// For EventDelete, Entry carries the key and the last revisions it had.
type Event struct {
	Kind  EventKind
	Entry Entry
}

// Watcher is implemented by stores that can stream changes. A store declares
// it with CapWatch.
type Watcher interface {
	// Watch streams changes to keys that start with prefix, made after the
	// call returned. Every write of a key yields one event, in the order the
	// writes took effect; a stream that cannot deliver one ends instead of
	// skipping it. The channel is closed when ctx is done, the store is
	// closed or the stream broke (for example the consumer fell too far
	// behind); the consumer then re-reads what it needs and watches again. A
	// slow consumer never blocks writers.
	Watch(ctx context.Context, prefix string) (<-chan Event, error)
}

// Scanner is implemented by stores that can list entries for a caller that
// needs no remaining times, such as a garbage collector that asks only what
// exists, at a cost that does not grow with the number of TTLs among them.
// It is an optimization, declared by no capability: a caller uses Scan
// where the store implements it, and List otherwise.
type Scanner interface {
	// Scan returns the live entries whose keys start with prefix, in key
	// order, as List does, except that Remaining is zero and that TTL, for
	// an entry with a TTL, is positive but may be below the granted one: a
	// lower bound, where learning it would cost a request.
	Scan(ctx context.Context, prefix string) ([]Entry, error)
}

// Cond is one condition of a transaction: the key's current Revision must
// equal Revision, where 0 means the key must be absent.
type Cond struct {
	Key      string
	Revision int64
}

// OpKind is the kind of a transaction operation.
type OpKind int

const (
	// OpPut writes Value with TTL.
	OpPut OpKind = iota + 1
	// OpDelete deletes the key; deleting an absent key does nothing.
	OpDelete
)

// Op is one write of a transaction.
type Op struct {
	Kind  OpKind
	Key   string
	Value []byte
	TTL   time.Duration
}

// TxnResult holds, for each Op in order, the entry it wrote (OpPut) or the
// entry it deleted (OpDelete; zero revisions if the key was absent).
type TxnResult struct {
	Entries []Entry
}

// Txner is implemented by stores that apply several writes all-or-nothing.
// A store declares it with CapTxn.
type Txner interface {
	// Txn checks every condition and, only if all hold, applies every
	// operation as one atomic step: no reader sees some of the operations
	// without the others. If a condition fails, the error is a *ConflictError
	// for the first failing condition and nothing is written. An Op key may
	// appear at most once.
	Txn(ctx context.Context, conds []Cond, ops []Op) (TxnResult, error)
}
