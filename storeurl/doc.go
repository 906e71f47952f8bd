// Package storeurl opens a backends.Store from a URL, so that a program can
// take its store from configuration (a --store flag, an environment
// variable) rather than wiring a backend by hand.
//
// The forms:
//
//	mem://                                   a memory store (one process; tests and demos)
//	file:///DIR                              a filestore in directory DIR (one host)
//	etcd://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/PREFIX[?lease=MODE]
//	                                         etcd, keys under PREFIX/ (distributed)
//	kube://NAMESPACE[?kubeconfig=PATH&session=DURATION]
//	                                         Lease objects in NAMESPACE (distributed)
//
// DIR must be absolute: file:///var/lib/app/claims (file://localhost/DIR
// is the same). A relative directory is refused, because in file://rel/dir
// "rel" is a host name, not a directory. etcd endpoints are reached over
// plain HTTP, on port 2379 when none is given; see backends/etcd's OpenURL,
// which Open calls. kube:// reads credentials from the kubeconfig file
// PATH (percent-encoded in the query), or from the pod's service account
// when no kubeconfig is given. Its client has no client-side rate limit
// (client-go's default is 5 requests a second), so that a process renewing
// many claims is throttled only by the API server's flow control.
//
// Two parameters choose how a distributed store keeps its claims alive;
// each is optional and its default is a lease per claim:
//
//   - etcd's lease=shared opens the store with etcd.WithSharedLease (its
//     default batch interval): the entries a process writes with one TTL
//     share one etcd lease, renewed by one keep-alive per batch.
//     lease=per-claim, the default, grants one lease per write.
//   - kube's session=DURATION (a Go duration, such as 1s; positive)
//     opens the store with kube.WithSession(DURATION): the process keeps
//     one session Lease, and renews all its claims with one batch per
//     interval. Without it, each claim is a Lease renewed on its own.
//
// The backends' package docs say what each mode changes and when to pick
// it. Path components and parameter values are
// percent-decoded; an "@" anywhere but after the credentials must be
// percent-encoded (%40), so that no part of a password is taken for a host.
//
// # Guarantees
//
//   - A URL Open cannot use is refused, never half-used: an unknown scheme,
//     a missing part (no directory, no host, no prefix, no namespace), a
//     part the form does not have (a host for mem://, a path for kube://),
//     an unknown or repeated query parameter, a lease mode other than
//     shared or per-claim, a session interval that is not a positive
//     duration, a fragment, a bad port, spaces or control characters. Those errors wrap backends.ErrInvalid,
//     so a program can tell a bad URL (a usage error) from a store it
//     could not reach. Parse checks a URL without opening anything.
//   - Error messages never show a password: they print the URL redacted as
//     url.URL.Redacted does ("etcd://user:xxxxx@host/prefix"), even when
//     the URL is too malformed to parse.
//   - Closing the returned Store releases everything Open made: the etcd
//     client, the Kubernetes watches, the batches of a shared lease or a
//     session. There is nothing else to close.
//
// # Dependencies
//
// This is the one package besides the backends themselves that imports the
// etcd and Kubernetes clients. A program that needs only one backend
// imports that backend's package instead: importing elector and
// backends/filestore pulls in neither client (a test checks it).
//
// # What it does not do
//
// Beyond the two modes above, it takes no options: TLS for etcd, the batch
// interval of a shared etcd lease, a session renewed back to back
// (kube.WithSession(0)), adopted Lease names, a fake clock or a logger
// need the backend's own constructor (etcd.New, kube.New, filestore.Open,
// memstore.New).
package storeurl
