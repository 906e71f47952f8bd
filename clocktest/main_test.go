package clocktest

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testCtx bounds a test's waits so that a broken barrier fails the test
// with an error instead of hanging until the binary's timeout. It is a
// guard, not a timing assertion: nothing passes or fails by its clock.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// start is the instant the tests' clocks start at.
var start = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
