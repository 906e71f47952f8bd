package etcd

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/backends"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fail wraps an error from the etcd client for operation op on key with the
// contract's sentinel for its class. After Close every failure is ErrClosed.
func (s *Store) fail(op, key string, err error) error {
	if s.isClosed() {
		return fmt.Errorf("etcd: %s %q: %w", op, key, backends.ErrClosed)
	}
	return fmt.Errorf("etcd: %s %q: %w", op, key, mapError(err))
}

// mapError attaches to err the sentinel of its class:
//
//   - unavailable, deadline exceeded, no leader, leader changed, not leader,
//     server stopped or timed out: ErrUnavailable (transient: the outcome of
//     a write is unknown);
//   - too many requests, resource exhausted (including a full database):
//     ErrThrottled (transient);
//   - permission denied, bad credentials or token: ErrPermission (fatal);
//   - a request etcd refuses as malformed (too large, too many operations,
//     a TTL beyond etcd's maximum): ErrInvalid (fatal);
//   - a corrupt cluster: ErrCorrupt (fatal).
//
// Context errors are returned as they are (Classify makes them transient).
// Lease-not-found is not mapped here: it means "lost" on a keep-alive and
// "unknown outcome" on a write, so the callers decide.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if sentinel := sentinelOf(err); sentinel != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return err
}

func sentinelOf(err error) error {
	for _, e := range []error{rpctypes.ErrAuthFailed, rpctypes.ErrUserEmpty, rpctypes.ErrInvalidAuthToken, rpctypes.ErrPermissionDenied} {
		if errors.Is(err, e) {
			return backends.ErrPermission
		}
	}
	for _, e := range []error{rpctypes.ErrNotLeader, rpctypes.ErrNoLeader, rpctypes.ErrLeaderChanged} {
		if errors.Is(err, e) {
			return backends.ErrUnavailable
		}
	}
	if errors.Is(err, rpctypes.ErrLeaseTTLTooLarge) {
		return backends.ErrInvalid
	}
	if errors.Is(err, clientv3.ErrNoAvailableEndpoints) {
		return backends.ErrUnavailable
	}
	switch code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted:
		return backends.ErrUnavailable
	case codes.ResourceExhausted:
		return backends.ErrThrottled
	case codes.PermissionDenied, codes.Unauthenticated:
		return backends.ErrPermission
	case codes.InvalidArgument, codes.OutOfRange:
		return backends.ErrInvalid
	case codes.DataLoss:
		return backends.ErrCorrupt
	}
	return nil
}

// code is the gRPC code of err, from an etcd server error or a gRPC status.
func code(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code()
	}
	if st, ok := status.FromError(err); ok {
		return st.Code()
	}
	return codes.Unknown
}

// isLeaseNotFound reports whether err says the lease no longer exists.
func isLeaseNotFound(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound)
}

// unknownOutcome reports whether a failed write may nevertheless have been
// applied: everything transient (a timeout, a lost connection) is unknown;
// a refusal (conflict, permission, invalid) is not.
func unknownOutcome(err error) bool {
	return backends.Classify(mapError(err)) == backends.ClassTransient
}
