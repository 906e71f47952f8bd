package main

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/internal/natsproc"
)

// TestMain lets the test binary be the campaign's worker and server
// processes too: the campaign runs os.Executable() with "worker",
// "server" or "nats-server" as its first argument.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "worker" || os.Args[1] == "server" || os.Args[1] == "nats-server") {
		run := runWorker
		switch os.Args[1] {
		case "server":
			run = runServer
		case "nats-server":
			run = natsproc.Main
		}
		if err := run(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
