package main

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain lets the test binary be the campaign's worker and server
// processes too: the campaign runs os.Executable() with "worker" or
// "server" as its first argument.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "worker" || os.Args[1] == "server") {
		run := runWorker
		if os.Args[1] == "server" {
			run = runServer
		}
		if err := run(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
