package shards_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The multi-process test re-executes this binary as member processes.
	if os.Getenv(childEnv) != "" {
		if err := runChild(); err != nil {
			fmt.Fprintf(os.Stderr, "shards member: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
