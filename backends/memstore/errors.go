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
	c := &conflictError{}
	c.ce = backends.ConflictError{Op: op, Key: key, Expected: rev}
	if it != nil {
		c.ce.Found = true
		c.ce.Current = it.entry(now)
	}
	c.opError = opError{op: op, key: key, err: &c.ce}
	return &c.opError
}
