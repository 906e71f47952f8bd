// Package storeurl opens a backends.Store from a URL, so that a program can
// take its store from configuration (a --store flag, an environment
// variable) rather than wiring a backend by hand.
//
// # Schemes are linked in
//
// A backend makes its URL scheme known when a program imports it, as
// database/sql drivers do: each registers itself (Register) from an init
// function. A program opens by URL exactly the stores it links in, and
// storeurl itself imports no backend and no client library, so a program
// that opens only file:// stores builds without the etcd and Kubernetes
// clients (a test checks it). The command tenure links every store; a
// program of your own imports the ones it supports:
//
//	import (
//		"github.com/tenure-go/tenure/storeurl"
//
//		_ "github.com/tenure-go/tenure/backends/etcd"      // etcd://
//		_ "github.com/tenure-go/tenure/backends/filestore" // file://
//	)
//
// A URL of a scheme tenure provides but the program did not link in is
// refused with an error that names the import to add:
//
//	storeurl: "etcd://10.0.0.1/app": scheme etcd is not linked in: import _ "github.com/tenure-go/tenure/backends/etcd"
//
// The schemes tenure's backends register (each package documents its own):
//
//	mem://                                   backends/memstore: a new memory store (one process; tests and demos)
//	file:///DIR[?create=true]                backends/filestore: the store in directory DIR (one host)
//	etcd://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/PREFIX[?lease=shared]
//	                                         backends/etcd: keys under PREFIX/ (distributed)
//	kube://NAMESPACE[?kubeconfig=PATH&context=NAME&session=DURATION]
//	                                         backends/kube: Lease objects in NAMESPACE (distributed)
//	nats://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/BUCKET[?create=true&replicas=N&gcgrace=DURATION]
//	                                         backends/nats: a JetStream key-value bucket (distributed)
//	postgres://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...]/DATABASE[?table=[SCHEMA.]TABLE&sslmode=MODE&create=true&...]
//	                                         backends/postgres: a table in DATABASE (distributed); also
//	                                         postgresql://, and ?host=/SOCKET/DIR for a unix socket
//	dynamodb://TABLE[?region=REGION&endpoint=URL&create=true]
//	                                         backends/dynamodb: a DynamoDB table (distributed); credentials
//	                                         from the AWS SDK's default chain, never from the URL
//
// # A store is made only when asked
//
// Open never makes a store that does not exist unless asked: file:///DIR
// refuses a directory that does not exist, naming it, so that a mistyped
// path never gives a process a private store beside the one its peers
// share. file:///DIR?create=true makes DIR (and its parents). A program may
// also set Location.Create itself (from a flag), and a command that only
// reads a store should refuse a Location whose Create is set, and set
// Location.ReadOnly: opening then writes nothing to the store (a file://
// directory gets no lock file; mem:// is refused, having nothing to read).
// create= is refused by the schemes that cannot make a store (etcd, kube,
// mem).
//
// # Opening is bounded by ctx
//
// Every step of Open is bounded by its ctx: the etcd dial (which waits
// until an endpoint answers), etcd's probe of the shortest lease, the
// Kubernetes client's first request. When ctx ends first, the error names
// the server(s) and the last error reaching them ("connection refused"),
// and wraps backends.ErrUnavailable (transient) and ctx's error. Give Open
// a ctx with a deadline: with none, an unreachable server makes Open wait
// until ctx is cancelled.
//
// # Guarantees
//
//   - A URL Open cannot use is refused, never half-used: an unknown scheme,
//     a scheme not linked in, a missing part (no directory, no host, no
//     prefix, no namespace), a part the form does not have (a host for
//     mem://, a path for kube://), an unknown or repeated query parameter,
//     a user or password where the scheme takes none, a fragment, a bad
//     port, spaces or control characters. These checks are made here, once,
//     for every scheme, before the scheme's own. The errors are *Error,
//     which wraps backends.ErrInvalid, so a program can tell a bad URL (a
//     usage error) from a store it could not reach. Parse checks a URL
//     without opening anything.
//   - Error messages never show a password: they print the URL redacted as
//     url.URL.Redacted does ("etcd://user:xxxxx@host/prefix"), even when
//     the URL is too malformed to parse.
//   - Path components and parameter values are percent-decoded; an "@"
//     anywhere but after the credentials must be percent-encoded (%40), so
//     that no part of a password is taken for a host.
//   - Closing the returned Store releases everything Open made: a client,
//     watches, the batches of a shared lease or a session. There is nothing
//     else to close.
//
// # Writing a scheme
//
// A backend registers a Scheme: its name, its form (for messages), the
// query parameters it takes, whether it takes credentials and whether it
// can create a store, and a Parse that checks its own parts of the URL and
// returns the Opener. Hosts checks a HOST[:PORT][,HOST[:PORT]...] list
// for schemes that name servers. A scheme registered twice is refused
// rather than opened by either.
//
// # What it does not do
//
// Beyond what the URL forms say, it takes no options: TLS for etcd, the
// batch interval of a shared etcd lease, adopted Lease names, a fake clock
// or a logger need the backend's own constructor (etcd.New, kube.New,
// filestore.Open, memstore.New).
package storeurl
