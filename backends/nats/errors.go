package nats

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tenure-go/tenure/backends"
)

// mapErr gives a NATS error the sentinel its class needs. Errors it does
// not know stay as they are, which backends.Classify reads as transient.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	var ae *jetstream.APIError
	if errors.As(err, &ae) {
		switch {
		case ae.ErrorCode == streamNotFound || errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound):
			return fmt.Errorf("%w: %w", backends.ErrMissingResource, err)
		case ae.ErrorCode == badTTL:
			return fmt.Errorf("%w: %w", backends.ErrInvalid, err)
		case ae.Code == 403 || strings.Contains(strings.ToLower(ae.Description), "permission"):
			return fmt.Errorf("%w: %w", backends.ErrPermission, err)
		case ae.ErrorCode == storeFailed && (strings.Contains(ae.Description, "maximum messages") || strings.Contains(ae.Description, "maximum bytes")):
			// A limit with Discard new: the stream is full, and stays so
			// until keys are deleted or expire.
			return fmt.Errorf("%w: the bucket's stream is full (its MaxMsgs or MaxBytes, with Discard new, refuses new messages until keys are deleted or expire): raise or remove the limit: %w", backends.ErrThrottled, err)
		case ae.Code == 503 || ae.Code == 408 || ae.Code == 500:
			return fmt.Errorf("%w: %w", backends.ErrUnavailable, err)
		}
		return err
	}
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrBucketNotFound):
		return fmt.Errorf("%w: %w", backends.ErrMissingResource, err)
	case errors.Is(err, nats.ErrPermissionViolation), errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked):
		return fmt.Errorf("%w: %w", backends.ErrPermission, err)
	case errors.Is(err, nats.ErrConnectionClosed):
		return fmt.Errorf("%w: %w", backends.ErrClosed, err)
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		return fmt.Errorf("%w: %w", backends.ErrUnavailable, err)
	}
	return err
}

// mapErr is the package's mapErr for a request that waited for what (the
// server's answer to it, in words), with the connection's state added
// while the client is not connected to a server: a request that ran out
// of time then says why (the server refused the connection, say), not
// only that its context ended. A request that ran out of time on a
// connection still up (a server paused or too slow to answer) says what
// it waited for; it keeps its class, transient with its outcome unknown.
func (s *Store) mapErr(err error, what string) error {
	err = mapErr(err)
	if err == nil || s.nc == nil {
		return err
	}
	if s.nc.IsConnected() {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			return fmt.Errorf("the server did not answer %s within the deadline, though connected: %w", what, err)
		}
		return err
	}
	state := "not connected to a server: " + strings.ToLower(s.nc.Status().String())
	last := s.nc.LastError()
	if r := s.reconnect.get(); r != nil {
		last = r
	}
	if last != nil {
		state += ", last error: " + last.Error()
	}
	return fmt.Errorf("%w (%s)", err, state)
}

// connErr keeps the last error of a connection's failed reconnects (a
// dial refused, say), which the client reports only to a handler.
type connErr struct {
	mu  sync.Mutex
	err error // guarded by mu
}

func (c *connErr) set(_ *nats.Conn, err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

// get returns the last error; nil for a nil connErr.
func (c *connErr) get() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// withReconnectErrors has the store add to its errors what c recorded.
func withReconnectErrors(c *connErr) Option {
	return func(o *options) { o.reconnect = c }
}
