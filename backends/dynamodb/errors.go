package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/tenure-go/tenure/backends"
)

// ErrSchema is returned by Open when the table exists but is not what the
// store needs (another key schema). It wraps backends.ErrMissingResource,
// so its class is fatal.
var ErrSchema = fmt.Errorf("table does not match the store's schema: %w", backends.ErrMissingResource)

// conditionFailed reports whether err is DynamoDB's refusal of a
// conditional write whose condition did not hold.
func conditionFailed(err error) bool {
	var cfe *types.ConditionalCheckFailedException
	return errors.As(err, &cfe)
}

// throttleCodes are the error codes DynamoDB answers when it refuses a
// request for rate reasons; the request was not applied.
var throttleCodes = map[string]bool{
	"ProvisionedThroughputExceededException": true,
	"ThrottlingException":                    true,
	"RequestLimitExceeded":                   true,
	"LimitExceededException":                 true,
}

// permissionCodes are the error codes of refused credentials.
var permissionCodes = map[string]bool{
	"AccessDeniedException":               true,
	"UnrecognizedClientException":         true,
	"InvalidSignatureException":           true,
	"MissingAuthenticationToken":          true,
	"MissingAuthenticationTokenException": true,
	"IncompleteSignatureException":        true,
	"ExpiredTokenException":               true,
	"InvalidClientTokenId":                true,
}

// mapError wraps err, returned by the SDK for op on key, with the backends
// sentinel that states its class:
//
//   - throttling (ProvisionedThroughputExceededException,
//     ThrottlingException, RequestLimitExceeded) and the SDK's own retry
//     quota running out: ErrThrottled (transient);
//   - a missing table (ResourceNotFoundException): ErrMissingResource;
//   - refused credentials (AccessDeniedException and the signature
//     errors): ErrPermission;
//   - a request the server calls invalid (ValidationException):
//     ErrInvalid;
//   - 5xx answers, errors it does not know, a failure to reach the server
//     or to read its answer: ErrUnavailable (transient: a write's outcome
//     is unknown).
//
// A cancelled or timed-out ctx keeps its own error and is transient too.
func mapError(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("dynamodb: %s %q: the server did not answer within the deadline: %w: %w", op, key, backends.ErrUnavailable, err)
	}
	var sentinel error
	var qe ratelimit.QuotaExceededError
	var ae smithy.APIError
	switch {
	case errors.As(err, &qe):
		sentinel = backends.ErrThrottled
	case errors.As(err, &ae):
		code := ae.ErrorCode()
		var rnf *types.ResourceNotFoundException
		switch {
		case throttleCodes[code]:
			sentinel = backends.ErrThrottled
		case errors.As(err, &rnf) || code == "ResourceNotFoundException":
			sentinel = backends.ErrMissingResource
		case permissionCodes[code]:
			sentinel = backends.ErrPermission
		case code == "ValidationException" || code == "SerializationException":
			sentinel = backends.ErrInvalid
		default:
			sentinel = backends.ErrUnavailable
		}
	default:
		sentinel = backends.ErrUnavailable
	}
	return fmt.Errorf("dynamodb: %s %q: %w: %w", op, key, sentinel, oneLine(err))
}

// oneLine is err with its text on one line, still wrapping err.
func oneLine(err error) error {
	if !strings.ContainsAny(err.Error(), "\r\n") {
		return err
	}
	return &flatError{err}
}

type flatError struct{ err error }

func (e *flatError) Error() string {
	return strings.Join(strings.Fields(e.err.Error()), " ")
}
func (e *flatError) Unwrap() error { return e.err }
