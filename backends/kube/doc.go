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
//   - KeepAlive rewrites renewTime and so changes the resourceVersion, but
//     records the unchanged Revision and CreateRevision in annotations. The
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
// holder died long ago. Entry.Remaining reports that wait.
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
//     for the life of the Store.
package kube
