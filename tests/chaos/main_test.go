package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/tenure-go/tenure/tests/chaos/worker"
	"go.uber.org/goleak"
)

// TestMain lets the test binary be the campaign's worker processes too:
// the campaign runs os.Executable() with "worker" as its first argument.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		if err := worker.Run(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
