// Package etcd is a [backends.Store] over etcd v3: the distributed backend.
//
// A [Store] keeps every key under a prefix of the etcd keyspace (key k is the
// etcd key prefix+k), stores values as they are, and maps the contract onto
// etcd directly: Revision is the key's ModRevision, CreateRevision its etcd
// CreateRevision, and a TTL is an etcd lease. Open one with [New] over a
// client you configured, or from a URL with package storeurl:
// etcd://HOST[:PORT][,HOST[:PORT]...]/PREFIX, with lease=shared for
// [WithSharedLease]. A store opened from a URL owns its client and closes
// it on Close. docs/stores/etcd.md describes how renewals, the shared
// lease and every operation work, and what each costs in etcd requests.
//
// # Guarantees
//
//   - Scope: distributed. Every process that reaches the same etcd cluster
//     and uses the same prefix shares the same claims.
//   - Linearizable. Every conditional write is one etcd transaction decided
//     by etcd's raft leader; a Txn is all-or-nothing and no reader sees part
//     of it. Every read is linearizable, never serializable.
//   - Tokens. CreateRevision comes from etcd's cluster-wide revision counter,
//     which only grows and is never reused: across deletes, expiry, restarts
//     of any member and leader changes. The CreateRevision of a key's current
//     entry is greater than every revision the key had before, which makes it
//     the fencing token the contract asks for.
//   - Expiry is judged by etcd: the leader's lessor, on its own monotonic
//     clock, revokes a lease when its TTL passes without a keep-alive and
//     deletes the keys attached to it. An expired entry is therefore absent
//     for every operation, and watchers see its deletion.
//   - KeepAlive changes neither Revision nor value and produces no watch
//     event. Under the rule of use below, it never extends, or reports held,
//     an entry whose key was deleted or rewritten before its keep-alive was
//     sent. The new expiry counts from the keep-alive, which is sent after
//     the call began, so a holder that counts its deadline from before the
//     call is safe.
//   - Renewals close to expiry are refused. From TTL − guard after the last
//     grant or keep-alive of a lease that etcd answered alive, where guard
//     is max(TTL/4, 1 s) but at most TTL/2, the store sends that lease no
//     keep-alive: a renewal then fails as lost (a *ConflictError if the key
//     is absent or changed), so a holder never believes in a lease that may
//     already be revoked. A holder whose renewals fail for that long loses
//     its term up to guard before its deadline.
//   - No silent shortening. etcd keeps TTLs in whole seconds and grants at
//     least its minimum, ceil(1.5 × election timeout) (2 s with etcd's
//     default 1 s election timeout). A TTL is rounded up to whole seconds and
//     the server may raise it further; Entry.TTL says what was granted, and
//     Capabilities declares the granularity (1 s) and the minimum the server
//     granted when the store was opened. Rounding up is safe: a holder's
//     deadline comes from the TTL it asked for. A TTL above backends.MaxTTL
//     fails with ErrInvalid, and so does a KeepAlive asking for more than
//     the entry's lease was granted, or for a TTL on an entry written
//     without one (a lease's TTL is fixed at its grant, and moving a key to
//     another lease is a write, which changes its Revision).
//   - Errors are classified. Unavailable, deadline exceeded, no leader,
//     leader changed and not-leader wrap ErrUnavailable (transient: a write's
//     outcome is unknown); resource exhausted and too many requests wrap
//     ErrThrottled (transient); permission denied and failed authentication
//     wrap ErrPermission (fatal); requests etcd refuses as malformed wrap
//     ErrInvalid (fatal); a corrupt cluster wraps ErrCorrupt (fatal). A
//     keep-alive whose lease is gone is a *ConflictError with Found false:
//     the claim is lost. Every request requires a leader: a member cut off
//     from its cluster refuses transactions at once (ErrUnavailable), and
//     the client retries reads and lease requests, on its other endpoints
//     if it has any, until the caller's deadline.
//
// # The rule of use
//
// A renewal is one keep-alive, without a read of the key, because the store
// relies on one rule, which the contract's claims, slots and IDs keep: an
// entry a Store wrote with a TTL is changed afterwards only by that Store's
// own writes and by the expiry of its lease. (A holder renews and releases
// what it created; others take a claim with CreateIfAbsent once it is
// absent, never by CompareAndSet or CompareAndDelete on a revision they
// read.) etcd does not enforce the rule; the store's own watch of its prefix
// catches a change by anyone else, after which renewals of that entry read
// the key and fail. An entry the store did not write, or whose state it
// does not know, is always read after its keep-alive.
//
// # One lease for many claims
//
// With [WithSharedLease], all entries a store writes with the same TTL share
// one etcd lease, and KeepAlive calls on them are answered in batches, one
// keep-alive per batch: a process holding a thousand claims costs about one
// request per batch interval (default [DefaultSharedBatch]) instead of one
// per claim per renewal. A call waits for its batch at most one interval,
// less for TTLs under four intervals, and at most half the time its
// context's deadline leaves it. A shared lease never keeps a dead claim
// alive: an entry nobody kept alive for its whole TTL is deleted by the
// store, and Close deletes and revokes nothing, so the lease expires one
// TTL after its last keep-alive. A crashed process's claims on a shared
// lease disappear when the lease expires, exactly like per-entry leases.
//
// # What it does not promise
//
//   - The etcd client's own lease keep-alive (clientv3's KeepAlive, which
//     computes its deadline from when a response arrived) is never used and
//     is not a safety deadline. A holder's deadline is its own, counted from
//     before its request on its own monotonic clock.
//   - Expiry may come later than the TTL: by the rounding above; because
//     etcd's lessor revokes expired leases on a fixed 500 ms tick, so a
//     crashed holder's claim is deleted up to half a second after its TTL;
//     and because a new etcd leader extends every lease by an election
//     timeout. That costs liveness after a crash, never safety.
//   - Entry.Remaining comes from etcd in whole seconds and is a hint. Events
//     carry no TTL (TTL and Remaining are zero); Get reports it.
//   - Revisions are etcd's cluster-wide revisions, so they are comparable
//     across keys; the contract does not promise that, and callers must not
//     rely on it.
//   - The prefix isolates stores that respect it; nothing stops another etcd
//     client from writing under it. Values and keys are stored as they are,
//     readable with etcdctl.
//   - A watch ends when etcd compacts revisions it still needs, when its
//     member loses its leader, or when its consumer falls far behind; the
//     consumer re-reads and watches again.
//   - With a shared lease, a store judges its entries' expiry on its own
//     clock (WithClock); a clock that runs fast deletes entries early. The
//     system clock is the default.
//   - A renewal is exact only under the rule of use above (only an entry's
//     writer and its lease's expiry change it). A delete or rewrite by
//     anyone else is caught by the store's watch, not by the renewal: one
//     sent before the watch delivers the change may report the entry held.
package etcd
