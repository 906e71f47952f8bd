package memstore

import (
	"strconv"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// opError names the operation and key of a failure: "memstore: cas "k": ...".
// It formats lazily so that the error paths callers hit in normal operation
// (conflicts, not found) cost one small allocation.
type opError struct {
	op  string
	key string
	err error
}

func opErr(op, key string, err error) error { return &opError{op: op, key: key, err: err} }

func (e *opError) Error() string {
	if _, ok := e.err.(*backends.ConflictError); ok {
		return "memstore: " + e.err.Error() // it names the op and key itself
	}
	if e.op == "txn" && e.key == "" {
		return "memstore: txn: " + e.err.Error()
	}
	return "memstore: " + e.op + " " + strconv.Quote(e.key) + ": " + e.err.Error()
}

func (e *opError) Unwrap() error { return e.err }

// conflictError is an opError and the *backends.ConflictError it wraps in
// one allocation.
type conflictError struct {
	opError
	ce backends.ConflictError
}

// conflict reports a failed compare of key against rev; it is the live item
// or nil when the key is absent. The current entry is copied, value included.
func conflict(op, key string, rev int64, it *item, now time.Time) error {
	// Fields are set one by one: copying whole structs into the new object
	// costs a bulk write barrier, which dominates this path.
	c := new(conflictError)
	c.ce.Op, c.ce.Key, c.ce.Expected = op, key, rev
	if it != nil {
		c.ce.Found = true
		cur := &c.ce.Current
		cur.Key = it.key
		cur.Value = clone(it.value)
		cur.Revision, cur.CreateRevision, cur.TTL = it.rev, it.createRev, it.ttl
		if it.ttl > 0 {
			cur.Remaining = it.expiresAt.Sub(now)
		}
	}
	c.op, c.key, c.err = op, key, &c.ce
	return &c.opError
}
