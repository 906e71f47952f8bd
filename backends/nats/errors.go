package nats

import (
	"errors"
	"fmt"
	"strings"

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
