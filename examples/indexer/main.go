// Command indexer is a served indexer that must be the only one serving in its
// group: two unsynchronized indexers would make routing wrong. It wraps its
// serving loop in a tenure Elector over a single claim (or, with --slots N
// above 1, an N-slot group), publishes its endpoint with a write fenced by
// its token, and answers GET /status. POST /transfer?to=ID asks the
// serving indexer to hand its claim to the indexer whose identity is ID
// (Elector.Transfer): it stops serving, releases the claim reserved for
// that one, which takes it at a greater token, and runs on as a follower.
// A group of several slots cannot be transferred.
//
// A leader that cannot publish its endpoint (a record it cannot read, which
// it must not overwrite since its token is unknown; a record of a later
// term; or a store that stays unavailable for a TTL) does not hold the
// claim without serving: it ends its term, which releases the claim so
// another indexer can take over, says why in its log and in /status
// ("resigned"), and campaigns again after a pause of one TTL, doubling
// while its terms keep ending this way (at most 8 TTLs). In /status,
// "state" is "leader" exactly when "is_leader" is true.
//
//	indexer demo
//	indexer serve --store file:///DIR[?create=true] --group G --id ID --http 127.0.0.1:PORT [--slots N] [--ttl D]
//	indexer client --store URL --group G [--slots N] [--requests N] [--every D]
//
// serve advertises its HTTP address with its claim (elector.Config.Advertise).
// client routes requests to the indexer that serves now: it follows the
// group's claim with elector.Observe, and sends each request to the
// address the serving indexer advertises, with that term's token; an
// indexer answers GET /query only while it serves at the token the request
// carries, so a request routed by an observation gone stale is refused,
// never answered by an indexer whose term has ended.
//
// serve opens file:// and mem:// stores: the example links only those
// stores, so that it builds without the etcd and Kubernetes clients (its
// tests link those too, and serve runs over them there). A store
// directory must exist unless the URL asks for it with create=true.
//
// demo starts three indexers over a filestore in a fresh temporary directory,
// has the serving one transfer its claim to a named follower, kills the one
// serving then, stops the next gracefully, and checks that the transfer
// went to the follower it named at a greater token, that no two ever
// served at once and that tokens only grew, and reports its timings. Its
// exit status is 0 only if every check held.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches a command line and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "demo":
		return runDemo(ctx, args[1:], stdout, stderr)
	case "serve":
		return runServe(ctx, args[1:], stdout, stderr)
	case "client":
		return runClient(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "indexer: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  indexer demo
      three indexers over a filestore in a temporary directory: the serving
      one transfers its claim to a named follower, the one serving then is
      killed, the next is stopped gracefully; prints what happened and
      checks that never two served at once.
  indexer serve --store URL --group G --id ID --http ADDR [--slots N] [--ttl D]
      one indexer. URL is file:///DIR (DIR must exist; file:///DIR?create=true
      makes it) or mem://; the etcd and Kubernetes stores are left out of
      this example's build (see serve.go to link them in). GET /status
      answers JSON; GET /query?token=T answers only while serving at T;
      POST /transfer?to=ID hands the claim to the indexer ID (not with
      --slots above 1).
  indexer client --store URL --group G [--slots N] [--requests N] [--every D]
      sends requests to the indexer that serves now: it follows the group's
      claim with elector.Observe and sends each request, with the serving
      term's token, to the address that indexer advertises with its claim.
`)
}
