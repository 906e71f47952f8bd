// Package nats is a tenure Store over a NATS JetStream key-value bucket,
// for processes that already run NATS and want no other coordination
// service.
//
// Each key is one subject of the bucket's stream (any UTF-8 key, encoded one
// to one and keeping prefixes), its value the message body untouched, and
// what tenure needs besides (the TTL and the revisions) in headers. Every
// write is a publish conditioned on the key's last stream sequence, so
// writes are linearizable per key; revisions and the fencing token,
// CreateRevision, are stream sequences, strictly increasing whatever is
// deleted or expires. A keep-alive writes a new message that carries the
// unchanged revisions, so the logical revision stays put and watchers see
// no event for it. docs/stores/nats.md describes the mapping, how writes,
// expiry, reads and the watch work, and what each costs.
//
// # Expiry: local observation, not the server's clock
//
// JetStream judges a message's TTL by the stream leader's wall clock, so a
// step of that clock forward would expire every claim at once while each
// holder's deadline has not passed. This store does not let the server's
// TTL decide: an entry is expired only once this process has seen the same
// message of its key for the entry's full TTL on its own monotonic clock
// (WithClock), as package kube does, and a takeover is a create conditioned
// on the sequence that was judged, so it fails if the holder renewed
// meanwhile. An observer never judges a claim expired before its holder's
// deadline, however far wall clocks disagree (clock rates must still agree
// within the elector's safety margin).
//
// The server's per-message TTL remains, for garbage collection only: the
// entry's TTL rounded up to whole seconds plus a grace (WithGCGrace,
// DefaultGCGrace: an hour). The operating requirement that remains: the
// stream leader's wall clock must not step forward by more than the grace
// while a claim is held. Capabilities().ExpiryJudge says so.
//
// Consequences: TTLs are exact (no granularity and no minimum beyond the
// elector's own), but a process that has just started knows nothing about
// how long a message has stood, so it waits a full TTL from its first
// sighting before it takes over a claim, even one whose holder died long
// ago (Entry.Remaining reports the wait, and Capabilities.ObservedExpiry
// says so: never show it as the time the holder has left); and a crashed
// holder's claim is taken about one TTL after a follower last saw it
// renewed. Entry.Recorded is the time the stream leader stored the entry's
// last message, by the server's clock: for people to read, never judged.
//
// # Server and bucket requirements
//
// New refuses, with an error wrapping backends.ErrUnsupported (fatal), a
// server older than MinServerVersion (2.14.0: per-key TTLs recovered at a
// server's start expire only from there; every server of a cluster must
// be at least that, and the store sees only the one it is connected to),
// and a bucket whose stream cannot keep per-key TTLs or can remove a live
// key's last message. A key whose last message goes reads absent while
// its holder is inside its deadline, and a contender takes it: two
// holders. The refusal names the setting:
//
//   - no per-key TTLs (AllowMsgTTL, SubjectDeleteMarkerTTL: a bucket
//     created without LimitMarkerTTL);
//   - MaxAge, a bucket-wide TTL the server judges by its wall clock;
//   - Discard old with MaxMsgs or MaxBytes: once the stream is full,
//     writes of other keys push a key's only message out;
//   - Retention other than Limits: Interest and WorkQueue remove
//     messages once consumers have them;
//   - Storage other than File: a restart loses every message and starts
//     the sequences, and so the tokens, again;
//   - DiscardNewPerSubject: the server refuses a key's writes once it
//     holds MaxMsgsPerSubject messages, so a holder could not renew;
//   - NoAck: no write is acknowledged, so none has a known outcome;
//   - a mirror, sources, or subjects other than the bucket's.
//
// Limits with Discard new (a key-value bucket's default) refuse writes
// once the stream is full instead of dropping messages (such a write fails
// with backends.ErrThrottled, naming the limit to raise), and the per-key
// history (MaxMsgsPerSubject) drops only a key's older messages, never
// its last: both are accepted. The check runs when the store opens,
// whether it found the bucket or created it (a peer may have created it
// first, with other settings); a stream changed after that is not seen.
// WithCreate creates a missing bucket with per-key TTLs, History 8, file
// storage, Discard new, no limits and the replicas asked.
//
// Durability: by default JetStream syncs its files to disk every two
// minutes, so a single server that loses power can lose acknowledged
// writes and hand out stream sequences, and so tokens, again. Run the
// servers with sync always (jetstream { sync_interval: always }), or the
// bucket on three replicas (WithCreate(3), ?replicas=3 in a URL), or
// both. The tests run their servers with sync always.
//
// Reads go to the stream leader. One Store never reads a key going back,
// never reads a key it saw held as absent (nor leaves it out of a List),
// and never reports a conflict with a copy older than what it saw, even
// from a leader that was cut off and has not noticed yet: such answers are
// asked again until a current leader answers, or fail as unavailable
// (outcome unknown). A process that saw nothing newer can still read an
// older copy for that window, and then tries a write the leader of a quorum
// decides.
//
// # Watch
//
// Every Watch of a Store shares one ordered consumer over the bucket; a
// watch never skips a write (a gap ends every watch, whose consumers read
// and watch again). A keep-alive produces no event, a delete produces
// EventDelete with the revisions it removed, and expiry as this store
// judges it is reported as EventDelete (Capabilities.ExpiryEvents), so a
// follower that watches sends nothing while the holder renews. A watch
// that lags a renewal may report it expired too early; the renewal is then
// reported as EventPut. An expiry is never reported after a newer write of
// the key the watch delivered, and an entry made permanent (TTL 0) is not
// reported expired.
//
// # Opening by URL
//
// A program that imports this package opens a store with package storeurl
// from nats://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/BUCKET, with
// create=true (and replicas=N) to create a missing bucket and gcgrace=D
// for WithGCGrace. A host without a port is port 4222; any other
// parameter, and a fragment, is refused rather than ignored. The store
// owns the connection it made and closes it on Close.
//
// # Guarantees
//
//   - Create-if-absent, compare-and-set, compare-and-delete and keep-alive
//     are atomic per key, enforced by the server's expected-last-sequence
//     check. Scope: distributed, among every process that reaches the
//     bucket.
//   - Revisions and tokens of a key strictly increase across deletes,
//     expiry, process restarts and server restarts (with the durability
//     above).
//   - Expiry is never judged early by a skewed or stepped wall clock,
//     within the grace.
//   - Errors are classified: a wrong last sequence is a conflict (lost);
//     timeouts, no responders and disconnections are transient; a missing
//     bucket, a permission violation and corrupt state are fatal.
//
// # Non-guarantees
//
//   - No transactions: the store has no atomic write of several keys (a
//     key-value bucket's API has none; JetStream's atomic batch publish is
//     not used here), so it does not declare CapTxn and backends.Require
//     fails closed.
//   - Deleting and recreating the bucket, or restoring it from a backup,
//     restarts or rewinds the sequences: tokens can repeat.
//   - Expiry costs a full TTL of observation after a process starts.
//   - List costs one request for the bucket's subjects and one read per
//     key under the prefix, and per key under it that this store saw
//     held within the last minute and the subjects miss.
//   - Each Store keeps the sequence it last saw of every key with a TTL it
//     touched, for the life of the Store, and a mark of every key it saw
//     in the last minute.
//   - A key whose messages are all gone (the server's marker for an
//     entry it dropped outlived too) reads as unavailable, not absent,
//     for up to a minute after this store saw it hold an entry.
//   - Out-of-band writes to the bucket (nats kv put) read as corrupt, and
//     out-of-band deletes can break exclusion, though tokens still never
//     repeat.
package nats
