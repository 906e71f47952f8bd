// Package chaos is the command that runs tenure's randomized fault
// campaign (package main, not a library): several real worker processes
// compete for one claim (or N slots) through the public API over a real
// backend, while a seeded schedule of faults hits them,
// the backend server and the network between; afterwards a checker that
// knows nothing of the implementation judges what every process and a
// fenced resource journaled.
//
// Usage:
//
//	go run ./chaos [-runs N] [-duration D] [-backends filestore,etcd,etcd3,kube,nats,nats3,postgres,postgres-ha,dynamodb,...] [-seed S] [-svg] ...
//
// Each run prints one line; the campaign ends with a table per backend and
// the line "chaos: runs=R violations=V worst-recovery=D", and exits with
// status 1 if any run broke a property. The history of a failing run (every
// journal line, the schedule and the seed) is kept in its directory under
// -out; "-seed S -runs 1 -backends B" replays its schedule.
//
// A failing run's directory also holds timeline.svg, a picture of the run
// drawn from its journal (with -svg, every run's is written, and a passing
// run keeps only that file); the run's line ends with its path,
// "timeline=PATH". It has one lane per worker: its terms as bars from
// OnElected to OnDemoted, labelled by token and slot, darker while it
// acted; its acts as ticks above them and the fenced resource's accepts
// below; each rejected write as a cross, dashed back to the act it came
// from; its processes, a cross where a kill ended one; the faults that hit
// it as shaded spans. The servers a fault paused, killed or isolated have
// lanes of their own, terms that acted at once when they must not are
// boxed in red, and a failing run's violations head the picture. Every
// term and fault is an element with data- attributes and a <title> shown
// on hover.
//
// The subcommand "worker" is the process the campaign starts for each
// worker; it is not meant to be run by hand. The servers are binaries
// built from pinned tools modules (etcd v3.6, nats-server, toxiproxy and
// the kube-apiserver; see internal/tools/toolbuild), on first use unless
// TENURE_ETCD36_SERVER, TENURE_NATS_SERVER, TENURE_TOXIPROXY_SERVER and
// TENURE_KUBE_APISERVER name them.
//
// # A run
//
// The driver starts the backend (filestore: a directory; etcd: one etcd
// server process; etcd3: three, each member's peer port behind a proxy;
// kube: a kube-apiserver process over an etcd server process; etcd-shared,
// etcd3-shared and kube-session: the same servers, with each worker's
// store in the backend's batched mode, opened from a store URL with
// lease=shared or session=1s; nats: one nats-server process with
// JetStream, syncing every write; nats3: three, clustered, the bucket on
// three replicas, each server's routes to its peers through proxies;
// postgres: one PostgreSQL server process, run as nobody when the
// campaign is root; postgres-ha: a primary and a synchronous streaming
// standby of it, each worker's URL listing both with
// target_session_attrs=read-write; dynamodb: one dynalite process, a
// DynamoDB implementation on LevelDB run by node, keeping its tables on
// disk, the workers' credentials static ones from the environment), a fenced
// resource (an HTTP server in the driver that accepts a write for a slot
// only if its token is at least the highest it accepted there), and
// -workers worker processes. Each worker opens its store from a URL
// (package storeurl), through a toxiproxy proxy of its own for the network
// backends, and runs an elector (over a slot group with -slots). While it
// leads it acts in a loop: it reads CLOCK_MONOTONIC, checks its term,
// journals the act, works for 100 ms, and writes to the resource with its
// token. The schedule, drawn from the run's seed, starts faults from one
// TTL in until TTL + 2 s before the end, often several at once:
//
//	kill, term       SIGKILL or SIGTERM of the holder or another worker; restarted later
//	stop-short       SIGSTOP of the holder for 0.2 to 0.7 TTL, then SIGCONT
//	stop-long        SIGSTOP of the holder for 1.5 to 2.5 TTL, sent half-way through
//	                 its work (after its check, before its write)
//	stop-follower    SIGSTOP of a worker that does not hold the claim
//	latency          100 to 800 ms (at a 2 s TTL) each way between a worker and the backend
//	partition        a worker cut off the backend: traffic dropped, or connections
//	                 reset and refused
//	server-pause     SIGSTOP of an etcd member, the kube-apiserver, a nats-server,
//	                 the PostgreSQL postmaster and every process it forked, or dynalite
//	server-kill      SIGKILL of an etcd member, the kube-apiserver, a nats-server,
//	                 the postmaster or dynalite, restarted on the same port and data;
//	                 (postgres-ha) a failover: the primary killed, the standby
//	                 promoted, the old primary rebuilt as its standby at the heal
//	isolate          (etcd3) the peer traffic sent to one member is dropped: it
//	                 hears its peers but is not heard (a one-way partition);
//	                 (nats3) every route to and from one server is cut both ways
//
// Recovery after the last fault is expected within TTL + 1s, and nats and
// nats3 have longer (their settle time): a NATS client refused by a server
// tries it again only after its reconnect wait (2 s), and a NATS cluster
// that lost a stream's or its meta leader may take up to nats-server's
// maximum raft election timeout (9 s) to elect another. The run then goes
// on up to that much longer, until somebody acts after the last fault.
//
// # What it does not do
//
//   - It injects no disk faults (slow or full disk) into the filestore: that
//     needs privileges (a device mapper, a small mounted file system) that CI
//     lacks.
//   - A seed replays a schedule, not an interleaving: which process is "the
//     holder" when a fault starts depends on the run.
//   - Every process runs on one host, which is what lets the checker compare
//     instants journaled by different processes (see package check).
//   - The linearizability check leaves out a claim key written by a
//     transaction (slot groups on etcd), whose history the journal does not
//     capture completely (see package check).
//
// # Its parts
//
// This package wires the campaign: its flags, each run's driver, the
// fenced resource and the output. The parts are packages of their own:
//
//	schedule     the faults and the seeded schedule of them
//	servers      the backends: the server processes, their proxies, and
//	             how each fault is applied to them
//	worker       the worker process, and the recorder that journals its
//	             store operations
//	journal      the journal every process writes, and a run's spec
//	check        the checker, and the linearizability model of a store
//	timeline     the SVG picture of a run, drawn from its journal
//	journaltest  journals written by hand, for the tests
//	timelinetest a drawn timeline read back, for the tests
package main

import (
	"fmt"
	"os"

	"github.com/tenure-go/tenure/tests/chaos/worker"
)

func main() {
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "worker":
		err = worker.Run(os.Args[2:])
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
