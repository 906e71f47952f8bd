package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/tenure-go/tenure/backends"
)

// mapError wraps err, returned by the server or the driver for op on key,
// with the backends sentinel that states its class:
//
//   - serialization failures (40001), deadlocks (40P01), the server
//     shutting down or restarting (57P..), too many connections (53300) and
//     any failure to reach the server or to read its answer: ErrUnavailable
//     (transient: a write's outcome is unknown);
//   - a write refused by a read-only server (25006: a standby, or an old
//     primary fenced after a failover): ErrUnavailable too, since another
//     server is the primary by then; the connection is not used again (see
//     Open);
//   - other insufficient-resources errors (53...): ErrThrottled;
//   - bad credentials (28...) and missing privileges (42501): ErrPermission;
//   - a missing database, schema or table (3D000, 3F000, 42P01):
//     ErrMissingResource;
//   - objects that are not what the store needs (42703, 42809, 42804,
//     42601, 42939, 42P10): ErrSchema (fatal);
//   - data exceptions (22...), and a prepared statement missing or
//     doubled (26000, 42P05: a transaction-mode pooler the store was not
//     told of): ErrInvalid.
//
// A cancelled or timed-out ctx keeps its own error (transient too).
func mapError(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("postgres: %s %q: %w", op, key, err)
	}
	var sentinel error
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		c := pe.Code
		if c == "26000" || c == "42P05" {
			// The driver prepared a statement on one server connection and
			// met another: a transaction-mode pooler the store was not told
			// of. Every statement would fail alike: fatal, and say why.
			return fmt.Errorf("postgres: %s %q: %w", op, key, &poolerError{err: err})
		}
		switch {
		case c == "40001", c == "40P01", c == "53300", c == "25006", strings.HasPrefix(c, "57P"), strings.HasPrefix(c, "08"):
			sentinel = backends.ErrUnavailable
		case strings.HasPrefix(c, "53"):
			sentinel = backends.ErrThrottled
		case strings.HasPrefix(c, "28"), c == "42501":
			sentinel = backends.ErrPermission
		case c == "3D000", c == "3F000", c == "42P01", c == "42883":
			sentinel = backends.ErrMissingResource
		case c == "42703", c == "42809", c == "42804", c == "42601", c == "42939", c == "42P10":
			// An undefined column, an object of the wrong kind, a column of
			// the wrong type, a statement the objects make invalid, a
			// reserved name, no unique index for ON CONFLICT: the objects
			// are not what the store needs, and asking again cannot help.
			sentinel = ErrSchema
		case strings.HasPrefix(c, "22"):
			sentinel = backends.ErrInvalid
		default:
			sentinel = backends.ErrUnavailable
		}
	} else {
		// Connection refused or reset, EOF, TLS: not reached or the
		// answer was lost.
		sentinel = backends.ErrUnavailable
	}
	return fmt.Errorf("postgres: %s %q: %w: %w", op, key, sentinel, oneLine(err))
}

// oneLine is err with its text on one line, still wrapping err: pgx puts
// each attempt of a failed connect on a line of its own, which a log line
// would carry as escapes.
func oneLine(err error) error {
	msg := err.Error()
	if !strings.Contains(msg, "\n") {
		return err
	}
	msg = strings.ReplaceAll(msg, ":\n\t", ": ")
	msg = strings.ReplaceAll(msg, "\n\t", "; ")
	msg = strings.ReplaceAll(msg, "\n", " ")
	return &lineError{msg: msg, err: err}
}

// poolerHint is what a statement broken by a transaction-mode pooler the
// store was not told of says to do.
const poolerHint = "a prepared statement is missing or doubled on the server connection, as behind a transaction-mode pooler (PgBouncer's pool_mode = transaction): open with pooler=transaction (WithPooler)"

// poolerError is the error of a statement that a transaction-mode pooler
// the store was not told of broke: its text says what to do, and it wraps
// backends.ErrInvalid and the server's error. An open by URL keeps the
// hint in its one line (see cause).
type poolerError struct{ err error }

func (e *poolerError) Error() string {
	return poolerHint + ": " + backends.ErrInvalid.Error() + ": " + e.err.Error()
}

func (e *poolerError) Unwrap() []error { return []error{backends.ErrInvalid, e.err} }
