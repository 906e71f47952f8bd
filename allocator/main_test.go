package allocator

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// childEnv, when set, makes the test binary run as one allocating process
// (see process_test.go) instead of running the tests: the cross-process
// tests re-execute the binary to get real, killable processes.
const childEnv = "TENURE_ALLOCATOR_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		if err := runChild(); err != nil {
			fmt.Fprintf(os.Stderr, "allocator child: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
