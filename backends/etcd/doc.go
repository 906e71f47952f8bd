// Package etcd is a [backends.Store] over etcd v3: the distributed backend.
//
// A [Store] keeps every key under a prefix of the etcd keyspace (key k is the
// etcd key prefix+k), stores values as they are, and maps the contract onto
// etcd directly: Revision is the key's ModRevision, CreateRevision its etcd
// CreateRevision, and a TTL is an etcd lease. Open one with [New] over a
// client you configured, or with [OpenURL] from an etcd:// URL.
//
// # Guarantees
//
//   - Scope: distributed. Every process that reaches the same etcd cluster
//     and uses the same prefix shares the same claims.
//   - Linearizable. Every conditional write is one etcd transaction, decided
//     by etcd's raft leader: CreateIfAbsent compares the key's Version with
//     0, CompareAndSet and CompareAndDelete compare its ModRevision, and Txn
//     puts all its compares and then all its puts and deletes into one
//     transaction, so it is all-or-nothing and no reader sees part of it.
//     Reads (Get, List, the reads that verify a KeepAlive) are
//     linearizable reads, never serializable ones.
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
//     event. etcd cannot make a keep-alive conditional on a key's revision,
//     and KeepAlive is one keep-alive of the entry's lease and nothing else
//     when the store vouches for the revision itself; see "How a renewal
//     knows its entry" below. Otherwise it verifies by a linearizable read
//     sent after the keep-alive.
//     The new expiry counts from the keep-alive, which is sent after the
//     call began, so a holder that counts its deadline from before the call
//     is safe.
//   - No silent shortening. etcd keeps TTLs in whole seconds and grants at
//     least its minimum, ceil(1.5 × election timeout) (2 s with etcd's
//     default 1 s election timeout). A TTL is rounded up to whole seconds and
//     the server may raise it further; Entry.TTL says what was granted, and
//     Capabilities declares the granularity (1 s) and the minimum the server
//     granted when the store was opened. Rounding up is safe: a holder's
//     deadline comes from the TTL it asked for. A TTL above backends.MaxTTL fails
//     with ErrInvalid, and so does a KeepAlive asking for more than the
//     entry's lease was granted, or for a TTL on an entry written without
//     one (a lease's TTL is fixed at its grant, and moving a key to another
//     lease is a write, which changes its Revision).
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
// # How a renewal knows its entry
//
// A renewal must never extend, or report held, an entry whose key was
// deleted or rewritten before the renewal's keep-alive was sent. Reading
// the key on every renewal proves that, at the price of a linearizable
// read (a raft round) per renewal. Instead, the store relies on one rule of
// use, which the contract's claims, slots and IDs keep: an entry a Store
// wrote with a TTL is changed afterwards only by that Store's own writes
// and by the expiry of its lease. (A holder renews and releases what it
// created; others take a claim with CreateIfAbsent once it is absent, never
// by CompareAndSet or CompareAndDelete on a revision they read.)
//
// Under that rule, when the store wrote the entry at rev itself, a
// keep-alive of its lease that etcd answers with the lease alive proves the
// key was at rev when the keep-alive was sent:
//
//   - Expiry: etcd handled the keep-alive after its send and found the lease
//     alive, so the lease had not expired before the send, and an expired
//     lease never comes back; expiry had not deleted the key. (That holds
//     only for a keep-alive sent well before the lease may expire, which is
//     why the store sends none later; see "Renewals close to expiry".)
//   - The store's own writes of the key: the store records every write of
//     its own. One that succeeded before the call replaced or removed the
//     entry it knows, and the call finds no entry at rev; one with an unknown
//     outcome (it may even be applied later) marks the entry, which the store
//     then never vouches for again; one in flight when the call starts, or
//     begun before the keep-alive's answer, makes the store read the key
//     after the answer. A read after the send that finds the key at rev
//     proves it was at rev at the send, since a key never comes back to a
//     revision it left.
//
// No other change is possible under the rule, so the store then vouches for
// the entry, and the renewal is one keep-alive. A per-entry lease is
// granted for one write of one key and never reused, and a shared lease
// carries only the store's own entries, so a keep-alive sent for an entry
// that did change keeps alive nothing that any holder relies on.
//
// etcd does not enforce the rule: any client may delete or rewrite a key.
// The store detects that through its own watch of its prefix (one per
// store, started by its first renewal, from the lowest revision it vouches
// for, so it also replays what happened before). When the watch shows an
// entry's key changed after the revision the store knows, by anyone, the
// store withdraws its word for that entry: its next KeepAlive reads the
// key after its keep-alive, and fails (a lost claim, or a conflict
// carrying the current entry). The
// watch delivers each change once, and may deliver one before the write
// it follows is registered (the store's own write committed, and another
// client changed the key before the writer recorded its entry): the store
// keeps the last change its watch saw of every key it is writing, and
// never vouches for an entry written below a change already seen. A renewal
// sent between the change and the watch's delivery of it (a millisecond on
// a healthy cluster) may still succeed: that, and only that, is what
// breaking the rule costs. The watch requires a leader: when its member
// loses the leader (cut off from its cluster), etcd ends it within a few
// election timeouts, rather than leaving it silent while keep-alives may
// reach the leader through another endpoint. From the moment the watch
// ends until it is established again (it resumes where it stopped), the
// store vouches for nothing: every renewal keeps its lease alive and reads
// the key after, and a read that finds an entry unchanged once the watch
// is back gives it the word back. If etcd compacted revisions the watch had
// not delivered, the store withdraws its word for every entry, and a read
// that finds an entry unchanged gives it back.
//
// The store never vouches for an entry it did not write (a peer's, or its
// own from before a restart): its writer may change it without this store
// knowing, within the rule (a holder releasing its claim deletes it). Nor
// does it for an entry of its own that a write with an unknown outcome may
// still change, or one written below its watch's start. KeepAlive of such
// an entry keeps its lease alive first and reads the key after: a read
// after the send that finds the key at rev proves, as above, that it was
// at rev at the send; one that does not find it reports the claim lost
// (or a conflict carrying the current entry). A read before the send
// would prove nothing: the writer may delete the key between that read
// and the keep-alive, whose lease lives on. The first renewal of an entry
// on a lease the store does not know also reads the key before, to learn
// its lease, and asks etcd which keys that lease carries: it refuses
// (ErrUnsupported) a lease that carries other keys, and reports the claim
// lost if the lease no longer carries the key.
//
// # What it costs
//
// In etcd requests: CreateIfAbsent with a TTL, one when it is refused (the
// key is held: what a follower's attempt meets), because the store reads
// the key before asking for a lease, and three when it succeeds (the read,
// a lease grant, the transaction). CompareAndSet with a TTL, two (a lease
// grant, then the transaction), and one more when the compare fails
// (revoking the unused lease); without a TTL, one. CompareAndDelete, one.
// Txn, one transaction; when one of its puts has a TTL and needs a lease
// request first (a grant per put, or a shared lease not kept alive
// lately, below), the transaction's conditions checked alone (a
// transaction that writes nothing) and the lease requests come before it,
// so that a refused Txn (what a follower's attempt at a held claim is)
// costs the check alone and no lease; a grant and a revoke are each a
// consensus round with a disk sync. The check is skipped when a watch of
// this store (Watch) last saw the key of every such put deleted: a
// follower woken by a release or an expiry most likely wins, and the
// check would only delay it. Such an attempt, refused (another follower
// won first), costs its lease, and with a lease per claim a revoke, once:
// the key is no longer taken for free after it. A graceful handover to a
// follower with a lease per claim thus costs the release, then the grant
// and the transaction.
// A conflict reports the current entry without asking etcd for its lease:
// its TTL is the lease's when the store wrote it, else the server's
// minimum, and its Remaining is 0 (unknown); Get reports both. KeepAlive of
// an entry the store vouches for, one (a keep-alive); of another, two (a
// keep-alive, then the read), and two more before them (a read for the
// lease, then the lease's attached keys) for the first renewal of an entry
// on a lease the store neither granted nor renewed. The store's watch of its
// prefix costs one request when a renewal first starts it. Get, two for an
// entry with a TTL (the key, then its lease); List, one plus one per
// distinct lease; Watch, one read plus the stream. Lease keep-alives are
// messages on one stream per store, opened once (and again after it
// fails), not a stream each: opening one costs the client and the server
// far more than the message. One caller giving up never costs another its
// renewal: a caller whose context ends, while its keep-alive is sent or
// before its answer, leaves the stream open for the others. If the stream
// answered nothing since that caller's request, it may be stuck: later
// keep-alives go on a new stream, and the old one ends once every caller
// still waiting on it has its answer or gives up.
//
// BenchmarkCompetingClaims measures it (100 claims, three candidates each,
// one store per process, TTL 2 s, renewals every 500 ms jittered down by
// the elector, etcd's default timings with fsync) beside etcd's
// concurrency.Election, with a lease per claim (one keep-alive per renewal
// of each leader) and with the shared lease; its figures are in
// docs/performance.md ("Competing claims on etcd").
//
// With a shared lease, a write with a TTL (a create, a compare-and-set, a
// transaction's puts) goes out at once when the store kept its lease alive
// less than half a TTL ago (a refused write then costs the transaction
// alone, a successful one a keep-alive after it): a graceful handover to a
// process that holds other claims of that TTL costs the follower two
// requests, the transaction and the keep-alive. Otherwise a create reads
// the key first as above (a transaction checks its conditions alone), and
// a write keeps the lease alive (or grants one, when it has none or the
// one it has may be close to its expiry; see below) before the
// transaction. A keep-alive after a write finds
// the lease alive, since etcd keeps it at least a TTL from the last one; if
// it was gone all the same, its revocation deleted the entry, and the write
// fails as unavailable.
//
// # One lease for many claims
//
// With [WithSharedLease], all entries a store writes with the same TTL share
// one etcd lease, and KeepAlive calls on them are answered in batches: each
// batch keeps the shared lease alive with one keep-alive, sent after every
// call in the batch began. Entries the store does not vouch for (see "How a
// renewal knows its entry") are verified after it by one read of their keys
// (the keys themselves, or the key range they span when they are many; so
// keep such keys under a common prefix). A process holding a thousand
// claims thus costs about one request per batch interval (at most one
// batch per interval, default [DefaultSharedBatch]), instead of one per
// claim per renewal. A call waits
// for its batch at most one interval, less for TTLs under four intervals,
// and at most half the time its context's deadline leaves it, so that a
// renewal bounded by its renew period is answered within it.
//
// A shared lease must never keep a dead claim alive. The rule is that a
// holder that stops acting deletes its key; the store's part is that
//
//   - KeepAlive succeeds only for entries the store wrote on its shared
//     lease, at the caller's revision, and vouches for, or that the batch's
//     read found at that revision. Each entry's lease is what the store
//     wrote at that revision, never taken from the read: etcd from v3.7
//     answers a keys-only read from its index, without the keys' leases;
//   - an entry on a shared lease that nobody kept alive for its whole TTL
//     (its holder's deadline has passed, so the holder stopped acting, and
//     its release did not happen) is deleted by the store, conditionally on
//     its revision and lease, at its next batch. The same holds for an entry
//     a write with an unknown outcome may have left, unless the key holds
//     an entry the store wrote itself at a revision it knows: that one
//     belongs to a holder whose deadline is judged as above, whatever
//     happened to a write beside it. Expiry of shared entries
//     is thus judged twice: by etcd for the process as a whole (a crashed or
//     cut-off process stops keeping the lease alive), and by the writing
//     store, on its clock, for each entry;
//   - the shared lease is kept alive only by batches serving KeepAlive
//     calls and by writes, never by a timer of its own, and Close stops
//     everything: it deletes nothing and revokes nothing, and the lease
//     expires one TTL after the last keep-alive;
//   - a shared lease that may be close to its expiry at the server is
//     never kept alive and never written on. etcd's lessor decides a
//     keep-alive in two steps (is the lease expired? then refresh it),
//     apart from its revoke loop, which every 500 ms collects the leases
//     past their expiry and proposes their revocation through raft: a
//     keep-alive that reaches the lessor as the lease expires can be
//     answered with success while the revocation already decided goes on
//     and deletes every key on the lease, an entry written after the
//     keep-alive included (one that arrives later waits for the
//     revocation instead: up to a revoke tick and a raft round). A store's
//     lease idles whenever the store holds nothing of its TTL, so a
//     follower that wins a claim about a TTL after its last term would
//     meet exactly that. The store judges it on its own clock: etcd keeps
//     a lease at least a TTL after the send of its last successful grant
//     or keep-alive, and from TTL − guard after that send, where guard is
//     max(TTL/4, 1 s) but at most TTL/2 (it covers a revoke tick, the
//     server's leadership check and apply backlog, and a keep-alive
//     queued behind one that waits for a revocation), the store abandons
//     the lease: it never sends it another keep-alive, writes its next
//     entry of that TTL on a newly granted lease, and leaves the old one
//     to expire. It does not revoke it: an entry on it may belong to a
//     holder whose deadline has not passed, while its expiry cannot come
//     before every such deadline, each being at most that send plus the
//     TTL. A KeepAlive of an entry on an abandoned lease is lost, and so
//     is a write whose keep-alive after the transaction (above) would come
//     too late. The cost: a store that neither wrote nor renewed anything
//     of a TTL for TTL − guard (1 s of a 2 s lease: a follower between its
//     terms) pays a grant, a raft write, instead of a keep-alive for its
//     next write of it; a holder whose renewals leave its lease unrenewed
//     that long loses its claim up to guard before its deadline; and
//     abandoned leases stay in etcd until they expire.
//
// A crashed process's claims on a shared lease disappear when the lease
// expires, one TTL after its last batch, exactly like per-entry leases.
//
// # Renewals close to expiry
//
// A lease per claim meets the same race as a shared lease. A holder whose
// renewals failed for about a TTL (transient errors, a partition, a paused
// process) could send a keep-alive that reaches etcd as the lease expires,
// be answered alive while the revocation deletes its key, and believe it
// holds a fresh deadline while a peer creates the key and leads: two
// holders, until its next renewal fails. So the rule above is one rule for
// both modes: the store records, for each lease, when it sent the last
// grant or keep-alive etcd answered alive (a clock reading before the
// send) and the TTL etcd granted, and from TTL − guard after that send it
// sends the lease no keep-alive. A renewal that comes later is lost, so an
// elector steps down at once, and so are its retries, without a
// keep-alive: if a read of the key finds it absent or changed, the answer
// is a *ConflictError, as for any renewal; if it is still there at its
// revision (it stays until the lease expires), an error of class lost that
// says nothing about the key; the entry lapses with its
// lease, which expires before any holder's deadline could be extended.
// The cost is liveness: a holder whose renewals fail for more than
// TTL − guard (1 s of a 2 s lease) loses its term up to guard before its
// deadline, where it could sometimes have kept it; safety wins. The guard
// counts from a send the store made. The first renewal of an entry whose
// lease this store neither granted nor kept alive (a peer's, or its own
// from before a restart) has no such send: it asks etcd for the lease's
// time to live (which it needs anyway, to check the lease carries that
// key alone) and counts from the reading taken before it asked, with the
// whole seconds etcd reports left (rounded down). That costs up to a
// second: with a lease of 2 s, whose guard is 1 s, such a first renewal is
// always refused.
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
