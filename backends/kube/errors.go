package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/tenure-go/tenure/backends"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// classify wraps err, returned by the API server or the client for op on
// key, with the backends sentinel that states its class:
//
//   - Forbidden, Unauthorized: ErrPermission (fatal), with what to grant;
//   - NotFound on a create: ErrMissingResource (fatal): the namespace, or the
//     Lease API, does not exist;
//   - 429: ErrThrottled; timeouts, 5xx and failures to reach the server:
//     ErrUnavailable (transient: a write's outcome is unknown);
//   - Invalid, BadRequest: ErrInvalid (fatal).
//
// Conflicts and AlreadyExists never get here: the store resolves them by
// reading the object again and reports them as *backends.ConflictError.
func (s *Store) classify(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	isAPI := errors.As(err, &status)
	var sentinel error
	hint := ""
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// Cut off mid-flight: the write may or may not have happened.
		return fmt.Errorf("kube: %s %q: %w", op, key, err)
	case apierrors.IsUnauthorized(err):
		sentinel = backends.ErrPermission
		hint = "the API server rejected the client's credentials"
	case apierrors.IsForbidden(err):
		sentinel = backends.ErrPermission
		hint = fmt.Sprintf("the client may not use Leases in namespace %q; grant get, list, watch, create and update on leases.coordination.k8s.io there", s.namespace)
	case apierrors.IsNotFound(err):
		sentinel = backends.ErrMissingResource
		hint = fmt.Sprintf("namespace %q (or the coordination.k8s.io/v1 Lease API) does not exist", s.namespace)
	case apierrors.IsTooManyRequests(err):
		sentinel = backends.ErrThrottled
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsRequestEntityTooLargeError(err):
		sentinel = backends.ErrInvalid
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		sentinel = backends.ErrConflict
	case !isAPI:
		// Connection refused or reset, TLS and DNS failures, EOF: the server
		// was not reached or the answer was lost.
		sentinel = backends.ErrUnavailable
	case status.Status().Code >= http.StatusInternalServerError,
		apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		sentinel = backends.ErrUnavailable
	default:
		sentinel = backends.ErrUnavailable
	}
	if hint != "" {
		return fmt.Errorf("kube: %s %q: %s: %w: %w", op, key, hint, sentinel, err)
	}
	return fmt.Errorf("kube: %s %q: %w: %w", op, key, sentinel, err)
}
