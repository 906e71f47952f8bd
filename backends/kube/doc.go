// Package kube is a tenure Store over Kubernetes coordination.k8s.io/v1
// Lease objects, for processes that already run against a Kubernetes API
// server and want no other coordination service.
//
// # Mapping
//
// Each key is one Lease in the store's namespace. Lease names must be DNS-1123
// subdomains while keys are any UTF-8 (spaces, slashes, unicode), so a key
// maps to "tenure-" and 160 bits of its SHA-256 ([Store.LeaseName] tells
// it); the key itself is kept in the tenure.dev/key annotation and checked
// on every read (a name holding another key is corrupt state, never
// "absent"). Every object tenure
// writes carries the label tenure.dev/managed=true; List and Watch select on
// it (on the whole namespace when WithLeaseNames adopts unlabelled
// Leases) and filter by prefix in the process.
//
// The value, the exact TTL and the logical revisions live in annotations; the
// Lease spec is kept the way client-go's tools/leaderelection keeps it
// (holderIdentity, leaseDurationSeconds rounded up to whole seconds,
// acquireTime, renewTime, leaseTransitions), so kubectl shows the holder and
// client-go candidates sharing a Lease wait for it.
//
// # Revisions and fencing tokens
//
// Every write is an update carrying the resourceVersion it was decided on
// (or a create, which fails if the object exists), so writes are
// linearizable per key: a stale update gets 409 Conflict, a create of an
// existing name AlreadyExists, and the store re-reads and reports
// *backends.ConflictError with the current entry.
//
// Revisions come from the API server's resourceVersions, which for a
// built-in resource are the integers of the etcd revision: ordered across
// all Leases of the cluster, and never reused, whatever is deleted (see
// k8s.io/apimachinery/pkg/util/resourceversion). The store refuses, with
// ErrCorrupt, a resourceVersion that is not such an integer.
//
//   - A value write (create, CompareAndSet) takes the resourceVersion of that
//     write as its Revision; a create also takes it as CreateRevision.
//   - KeepAlive rewrites renewTime and counts itself in the tenure.dev/beat
//     annotation, so it always changes the resourceVersion (an update that
//     changes nothing gets none, and a renewTime can repeat when a wall
//     clock is set back), but records the unchanged Revision and
//     CreateRevision in annotations. The
//     logical Revision stays put and Watch reports nothing for it, while
//     every observer sees a new resourceVersion and restarts its expiry clock.
//   - CompareAndDelete does not delete the object: it clears holderIdentity
//     and the value, and a cleared object reads as absent. The next create is
//     an update of that object, whose resourceVersion is above every revision
//     the key had.
//   - If the object is deleted out of band (kubectl delete), the next create
//     makes a new object, whose resourceVersion is still above every one the
//     old object had: tokens never repeat.
//
// So Revision and CreateRevision of a key strictly increase over its whole
// history, and CreateRevision is a fencing token, with no counter object to
// contend on.
//
// # Expiry: local observation
//
// An entry expires only after this process has seen its object unchanged
// (same resourceVersion) for the entry's full TTL on its own monotonic clock
// (WithClock): client-go's rule. renewTime and acquireTime, written by
// other hosts' clocks, are never used to judge anything. Reads, writes and
// watch events all count as sightings; a newer resourceVersion restarts the
// clock. Because a holder stamps its own deadline before sending its request
// and an observer starts counting only after it saw the result, an observer
// never judges a claim expired before its holder's deadline, however far the
// two hosts' wall clocks disagree (their clock rates must still agree within
// the elector's safety margin).
//
// Consequence: a process that has just started knows nothing about how long
// an object has stood unchanged, so it must watch an existing,
// unexpired-looking claim for a full TTL before it can take it, even if the
// holder died long ago. Entry.Remaining reports that wait, and
// Capabilities.ObservedExpiry says so: it is never the time the holder has
// left. Entry.Recorded is the object's renewTime (acquireTime before any
// renewal), as its writer stamped it: for people to read, never judged.
//
// # Watch
//
// Watch uses one API server watch per Store, shared by every Watch call and
// started by the first; followers are told of changes instead of polling.
// Events follow logical entries: a keep-alive produces none, and a release,
// an out-of-band deletion and an expiry produce EventDelete. Expiry is judged
// here, by the same rule as every read: the watch keeps a timer per live
// object, which each renewal it sees moves, and reports the entry expired
// when the timer fires with the object still unchanged. So a follower that
// watches a renewed claim sends no request until the claim is released or
// its holder stops renewing (Capabilities.ExpiryEvents), except a read
// each time the watch reaches the end of its lifetime (below). Reads
// and writes time expiry too: a version this process sees through them is
// timed even if the watch never delivers it. A watch that stalls without
// breaking sees no renewals, so its timers fire early: the follower reads,
// finds the claim renewed (which times it again), and waits again; it
// costs requests, never safety. Expiry is reported once per version of the
// object that expired, not once per logical revision: a keep-alive keeps
// the revision, so a claim reported expired whose holder's renewal then
// shows up (late on the watch, or through a read while the watch stalls)
// is reported again as EventPut, and the expiry of that renewal as another
// EventDelete.
//
// The shared API server watch lives for a random time between the watch
// timeout (WithWatchTimeout) and twice that (5 to 10 minutes by default,
// as client-go's reflectors' watches do); then it ends and every Watch channel
// is closed, so their consumers read again and watch again. A follower
// waiting on the watch therefore waits at most that long, whatever the
// watch failed to deliver: a connection that went silent, or an expiry
// this store failed to report.
//
// # Session mode: one renewal per process
//
// By default (per-claim mode) every claim's Lease is rewritten at each
// renewal: a process holding 256 claims sends 256 updates per renew
// period. With [WithSession], a store keeps one session Lease of its own
// (named "tenure-session-" and 128 random bits, labelled
// tenure.dev/session=self) and writes every claim with a TTL into it: the
// claim's Lease carries the label tenure.dev/session naming the session.
// KeepAlive on such a claim sends nothing of its own. Calls are answered in
// batches (at most one per interval, sooner for short TTLs and tight
// deadlines), each costing two requests however many claims it renews:
//
//  1. one consistent List of the claims labelled with the session: what
//     the API server holds, not what the process remembers;
//  2. one update of the session Lease, conditioned on the resourceVersion
//     the store wrote last, sent after the List was answered and so after
//     every call in the batch began.
//
// A call succeeds if its claim was listed at its revision, in the session,
// live by the store's own observation, and the update landed.
//
// Expiry keeps client-go's rule, extended: a claim of a session expires
// once this process has seen both the claim unchanged and the session
// unrenewed for the claim's TTL. Every store judges claims of sessions so,
// whatever its own mode. To take over such a claim, a store first reads
// the session (consistently) and, if it still lives, ends it: an update,
// conditioned on the version read, that records that version in the
// tenure.dev/ended annotation and clears holderIdentity. Only then does it
// write the claim, conditioned on the claim's resourceVersion as always.
// An ended session is never renewed again, and so all of its claims are
// lost at their next renewal; the owner starts a new session for its next
// claim. A session that is ended, deleted, or replaced by a Lease that is
// no session is dead for good.
//
// Why there are never two holders. A holder's deadline is counted from
// before its call (before the write of the claim, or before its KeepAlive).
// An observer starts counting only when it sees a version: a claim's write
// or a session's renewal that the holder's deadline was taken before. So
// when an observer judges a claim expired from the versions it saw, the
// deadline of every holder whose renewal produced one of them has passed.
// What it did not see cannot hurt it: the end it writes is conditioned on
// the session version it has just read, and the owner's renewal is
// conditioned on the version the owner wrote last. Exactly one of the two
// lands. If the renewal lands first, the end fails, the observer reads the
// renewal (a new version, whose TTL it must then wait out) and the claim is
// still held. If the end lands first, that renewal and every later one
// fails, so no holder's deadline extends past the last renewal before the
// end, which the observer had seen unchanged for a TTL. The end proves the
// session stood at the version it ended from the moment this process saw
// that version, so a process that saw it need not wait a second TTL; a
// process that only sees the end counts from then.
//
// A batch never keeps a dead claim alive: it renews the session for the
// claims listed in it, and clears (a conditional update, like a release)
// every listed claim that no holder in the process may still act on: no
// write or KeepAlive of it began within its TTL. The store runs such a
// batch, without renewing anything, when a claim's TTL passes with no call
// waiting, so an abandoned claim is cleared about when it would have
// expired in per-claim mode. A release or a takeover takes a claim out of
// the session at once (its label goes with the holder), so no later batch
// renews it. A session the store has not seen renewed for a claim's TTL
// is not written into again (someone may have ended it): the next claim
// starts a new session, and the claims of the old one move into it at
// their next KeepAlive, which writes each of them once. Close deletes the
// sessions the store created that no claim names any more.
//
// The defined answers:
//
//   - Duplicate identities: sessions are named by random bits, never by
//     holder identities, so two processes with one identity get a session
//     each; the claim values keep their nonces, and exactly one of them
//     holds a claim.
//   - A deleted session Lease: its owner's next renewal gets NotFound and
//     its claims are lost; it never recreates the session (a claim judged
//     by an observer that saw the session gone must not come back to
//     life). An observer counts the disappearance as a change: it waits a
//     full TTL from when it first saw the session gone.
//   - A claim naming a session that never existed: the session reads as
//     gone, from the first time this process looked; the claim stands a TTL
//     from then, like any claim first seen, and is then taken. Nothing is
//     ever created at the session's name.
//   - Foreign Lease objects: a Lease at a session's name that is not a
//     session (no tenure.dev/session=self) is a dead session: the claims
//     naming it stand their TTL and are taken, and the foreign Lease is
//     never written. A Lease that carries a session's label but is no
//     tenure claim is neither renewed nor cleared by its batches.
//   - A Store closed without releasing (a crash): its session is no longer
//     renewed, and its claims expire one TTL after observers last saw it
//     renewed, as in per-claim mode.
//   - A claim written by another mode or another session: a KeepAlive of
//     it writes the claim itself, conditioned on its resourceVersion, and
//     moves it into the store's live session.
//
// Which to pick. Per-claim mode is the default: its Leases are the ones
// client-go's leaderelection reads and writes (WithLeaseNames works only
// there), and a client-go reader pointed at a claim of a session would see
// it unrenewed and take it after its leaseDurationSeconds. Session mode is
// for processes holding many claims (a sharded controller, a slot group
// member), whose API server load then no longer grows with the number of
// claims. Its costs: a takeover after a crash costs one more request (the
// end of the session); one claim of a process left to expire is cleared
// only at the next batch after its TTL; and one takeover (after a process
// stopped renewing for a TTL) costs that process every claim still in
// that session.
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
