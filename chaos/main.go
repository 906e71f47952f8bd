// Command chaos runs tenure's randomized fault campaign: several real
// worker processes compete for one claim (or N slots) through the public
// API over a real backend, while a seeded schedule of faults hits them,
// the backend server and the network between; afterwards a checker that
// knows nothing of the implementation judges what every process and a
// fenced resource journaled.
//
// Usage:
//
//	go run ./chaos [-runs N] [-duration D] [-backends filestore,etcd,etcd3,kube] [-seed S] ...
//
// Each run prints one line; the campaign ends with a table per backend and
// the line "chaos: runs=R violations=V worst-recovery=D", and exits with
// status 1 if any run broke a property. The history of a failing run (every
// journal line, the schedule and the seed) is kept in its directory under
// -out; "-seed S -runs 1 -backends B" replays its schedule.
//
// The subcommands "worker" and "server" are the processes the campaign
// starts; they are not meant to be run by hand.
//
// What it checks, and the assumptions it rests on (one host, one
// CLOCK_MONOTONIC), are written at the top of check.go and lin.go.
package main

import (
	"fmt"
	"os"
)

func main() {
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "worker":
		err = runWorker(os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "server":
		err = runServer(os.Args[2:])
	default:
		var ok bool
		ok, err = runCampaign(os.Args[1:], os.Stdout)
		if err == nil && !ok {
			os.Exit(1)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
