// Package kube is a tenure Store over Kubernetes coordination.k8s.io/v1
// Lease objects, for processes that already run against a Kubernetes API
// server and want no other coordination service.
//
// Each key is one Lease in the store's namespace, named from a hash of the
// key ([Store.LeaseName] tells it), with the key, the value, the exact TTL
// and the logical revisions in annotations. The Lease spec is kept the way
// client-go's tools/leaderelection keeps it, so kubectl shows the holder and
// client-go candidates sharing a Lease wait for it. Every write is an update
// conditioned on the resourceVersion it was decided on (or a create, which
// fails if the object exists). docs/stores/kube.md describes the mapping,
// how revisions, expiry and the watch work, and session mode's rules.
//
// # Expiry: local observation
//
// An entry expires only after this process has seen its object unchanged
// (same resourceVersion) for the entry's full TTL on its own monotonic clock
// (WithClock): client-go's rule. Timestamps other hosts wrote are never used
// to judge anything, so an observer never judges a claim expired before its
// holder's deadline, however far the hosts' wall clocks disagree (their
// clock rates must still agree within the elector's safety margin).
//
// Consequence: a process that has just started knows nothing about how long
// an object has stood unchanged, so it must watch an existing,
// unexpired-looking claim for a full TTL before it can take it, even if the
// holder died long ago. Entry.Remaining reports that wait, and
// Capabilities.ObservedExpiry says so: it is never the time the holder has
// left. Entry.Recorded is the object's renewTime (acquireTime before any
// renewal), as its writer stamped it: for people to read, never judged.
//
// Watch shares one API server watch per Store. A keep-alive produces no
// event; a release, an out-of-band deletion and an expiry (judged here, by
// the same rule) produce EventDelete, so a follower that watches a renewed
// claim sends no request until it is released or its holder stops renewing
// (Capabilities.ExpiryEvents). The shared watch ends after a random time
// between the watch timeout (WithWatchTimeout) and twice that, and every
// Watch channel is then closed, so a follower waiting on it waits at most
// that long whatever the watch failed to deliver.
//
// # Session mode
//
// By default (per-claim mode) every claim's Lease is rewritten at each
// renewal. With [WithSession], a store keeps one session Lease of its own
// and writes every claim with a TTL into it; KeepAlive calls are answered in
// batches, each costing two requests (a consistent List of the session's
// claims and one conditioned update of the session) however many claims it
// renews. A claim of a session expires once this process has seen both the
// claim unchanged and the session unrenewed for the claim's TTL, and a
// store takes it over only after ending the session, so exclusion holds as
// in per-claim mode; a batch never keeps a dead claim alive.
//
// Per-claim mode is the default: its Leases are the ones client-go's
// leaderelection reads and writes (WithLeaseNames works only there), and a
// client-go reader pointed at a claim of a session would see it unrenewed
// and take it after its leaseDurationSeconds. Session mode is for processes
// holding many claims (a sharded controller, a slot group member), whose
// API server load then no longer grows with the number of claims. Its
// costs: a takeover after a crash costs one more request (the end of the
// session); one claim of a process left to expire is cleared only at the
// next batch after its TTL; and one takeover (after a process stopped
// renewing for a TTL) costs that process every claim still in that
// session.
//
// # Leases written by client-go
//
// A Lease not written by this package (or written by it and then taken over
// by another client, which shows as a holderIdentity other than the one
// tenure recorded) is read as a claim of holderIdentity (the value is
// the claim value every Locker writes for that ID, with no nonce), with leaseDurationSeconds as TTL and its
// resourceVersion as both revisions; an empty holderIdentity reads as
// absent. WithLeaseNames maps keys onto such existing Leases so that a
// fleet can move from client-go's leaderelection to tenure: both kinds of
// candidates see each other's holder and wait for its expiry. A client-go
// holder cannot be fenced by tokens; the mixed fleet is for the migration.
//
// # Guarantees
//
//   - Create-if-absent, compare-and-set, compare-and-delete and keep-alive
//     are atomic per key, enforced by the API server's resourceVersion
//     preconditions. Scope: distributed, among every process that reaches the
//     same API server (and so the same etcd).
//   - Revisions and tokens per key strictly increase across releases,
//     out-of-band deletions, process restarts and API server restarts.
//   - Expiry is never judged early by a skewed wall clock.
//   - A Lease holding another key than its name maps to, or a
//     resourceVersion that is not an integer, is corrupt state (ErrCorrupt),
//     never absent.
//   - Errors are classified: conflicts are lost; timeouts, 5xx, 429 and
//     unreachable servers are transient; Forbidden, Unauthorized and a
//     missing namespace are fatal, with a message naming what is missing.
//
// # Non-guarantees
//
//   - No transactions: Txn over several Lease objects cannot be atomic, so
//     the store does not declare CapTxn and backends.Require fails closed.
//   - Restoring etcd from a backup, or moving the objects to another cluster,
//     can make resourceVersions, and so tokens, repeat.
//   - Expiry costs a full TTL of observation after a process starts.
//   - TTLs are exact for tenure readers; client-go readers see them rounded
//     up to whole seconds.
//   - Each Store keeps the newest version it saw of every object it touched,
//     and what it saw of every session a claim named, for the life of the
//     Store.
//   - Session mode needs every process that writes the namespace's tenure
//     objects to follow these rules; out-of-band edits (kubectl delete of a
//     claim, a forged session) can break exclusion in either mode, though
//     tokens still never repeat.
//
// # Opening by URL
//
// A program that imports this package opens a store with package storeurl
// from kube://NAMESPACE[?kubeconfig=PATH&context=NAME&session=DURATION]:
// credentials found as kubectl finds them, in the kubeconfig file PATH
// (percent-encoded), else in $KUBECONFIG's files, else in ~/.kube/config,
// and from the pod's service account only when there is no kubeconfig;
// context=NAME picks a context; session=DURATION (positive) opens it
// [WithSession]. Its client has no client-side rate limit, so that a
// process renewing many claims is throttled only by the API server's flow
// control. Opening lists the namespace's Leases once, bounded by the
// caller's ctx, so that a server that cannot be reached, or that refuses
// the credentials, fails the open with an error naming it.
package kube
