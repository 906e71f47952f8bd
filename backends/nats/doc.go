// Package nats is a tenure Store over a NATS JetStream key-value bucket,
// for processes that already run NATS and want no other coordination
// service.
//
// # Mapping
//
// Each key is one subject of the bucket's stream, $KV.<bucket>.<token>.
// Keys are any UTF-8 while a subject token allows few bytes, so ASCII
// letters, digits, '-', '_' and '/' stand for themselves and every other
// byte becomes '=' and two upper-case hex digits ("a b" is "a=20b"): the
// mapping is one to one and keeps prefixes, so List and Watch filter by
// the encoded prefix. The value is the message body, untouched; what
// tenure needs besides lives in headers: Tenure-TTL (the entry's TTL in
// nanoseconds; a message without it was not written by tenure and reads
// as corrupt, never as absent), Tenure-Revision and
// Tenure-Create-Revision. Every read is of a key's last message; a bucket
// the store creates keeps the last 8 (History 8) so that a watch that
// lags behind a key still sees each write.
//
// # Revisions and fencing tokens
//
// Every write is a publish conditioned on the key's last stream sequence
// (Nats-Expected-Last-Subject-Sequence), decided on the sequence the store
// has just read from the stream leader: the server refuses it if any
// other message of the key landed in between. So writes are linearizable
// per key, and every decision is taken by a compare-and-set, never by a
// read alone.
//
// Stream sequences are per bucket and strictly increasing, whatever is
// deleted or expires. A create's Revision and CreateRevision are the
// sequence of its message; a CompareAndSet's Revision is its sequence and
// it carries the CreateRevision on (Tenure-Create-Revision). The fencing
// token, CreateRevision, is therefore above every revision the key had
// before.
//
// JetStream renews nothing in place: its KV Update drops a key's TTL, and
// a per-message TTL is set only when a message is written. So KeepAlive
// writes a new message with the same value, carrying the unchanged
// Revision and CreateRevision in Tenure-Revision and
// Tenure-Create-Revision. The logical revision stays put (as the contract
// demands), watchers see no event for it, and a CompareAndSet or
// CompareAndDelete that finds the sequence moved by a keep-alive only
// reads again and retries. CompareAndDelete writes a delete marker
// (KV-Operation: DEL) carrying the revisions it removed; a create over a
// marker, an expired entry or nothing at all is conditioned on the
// sequence it read (0 for a key with no message), so a concurrent delete
// or write makes it read again, never win twice.
//
// # Expiry: local observation, not the server's clock
//
// JetStream judges a message's TTL by the stream leader's wall clock (the
// message's timestamp plus its TTL). A step of that clock forward would
// expire every claim at once while each holder's deadline, on its own
// monotonic clock, has not passed: two holders. etcd's lessor does not
// have that weakness, and neither does this store, because it does not
// let the server's TTL decide:
//
//   - An entry is expired only once this process has seen the same
//     message of its key (same stream sequence) for the entry's full TTL
//     on its own monotonic clock (WithClock), as package kube does.
//     Reads, writes and watch events all count as sightings; a new
//     sequence (a keep-alive, a write) starts the count again.
//   - A holder's deadline is counted from before its request, and an
//     observer counts only from after it saw the resulting message, so an
//     observer never judges a claim expired before its holder's deadline,
//     however far wall clocks disagree (clock rates must still agree
//     within the elector's safety margin).
//   - Taking over an expired entry is a create conditioned on the sequence
//     that was judged: if the holder renewed meanwhile, it fails.
//   - Expiry is each process's judgment, not a change of the entry: a
//     renewal the holder sent in time and the server applied late (it was
//     paused with the renewal queued) keeps the entry even after some
//     process, the holder's own store included, reported it expired; only
//     one of that renewal and a takeover, both conditioned on the same
//     sequence, can land.
//
// The server's per-message TTL remains, for garbage collection only: it
// is the entry's TTL rounded up to whole seconds plus a grace
// (WithGCGrace, DefaultGCGrace: an hour; a server raises a message TTL
// below the bucket's LimitMarkerTTL to it). The operating requirement that
// remains: the stream leader's wall clock must not step forward by more
// than the grace while a claim is held; with the default, a step of an
// hour. Capabilities().ExpiryJudge says so.
//
// Consequences: TTLs are exact (no granularity and no minimum beyond the
// elector's own), but a process that has just started knows nothing about
// how long a message has stood, so it waits a full TTL from its first
// sighting before it takes over a claim, even one whose holder died long
// ago (Entry.Remaining reports the wait, and Capabilities.ObservedExpiry
// says so: never show it as the time the holder has left); and a crashed
// holder's claim is taken about one TTL after a follower last saw it
// renewed. An entry read from the stream carries in Entry.Recorded the
// time the stream leader stored its last message (its last write or
// keep-alive), by the server's clock: for people to read, never judged.
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
// once the stream is full instead of dropping messages, and the per-key
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
// Reads go to the stream leader through the JetStream API's message get,
// not the direct get a follower of a replicated bucket may answer from a
// stale copy. A leader that has lost its leadership and not yet noticed
// (a NATS server steps down after 10 s without its quorum) still answers
// as the leader from its copy. A write it accepts cannot land without a
// quorum, but it refuses a conditional write on its copy at once, and it
// answers reads from it. So a refusal is never decided on by itself: the
// store reads the key again, and decides on that read. A read older than
// a message of the key the store already saw committed (one it wrote,
// watched or read; for a delete or an entry without TTL, seen within the
// last minute), or that finds no message at all of a key the store saw
// hold an entry within the last minute (a key created after that leader
// was cut off), is such a leader's answer: the store asks again, paced,
// until a current leader answers, and fails as unavailable (outcome
// unknown) if none does before the request's deadline. A write refused
// again and again on the sequence it just read fails the same way. So one
// Store never reads a key going back, never reads a key it saw held as
// absent (nor leaves it out of a List), and never reports a conflict with
// a copy older than what it saw (a Release is not taken for done on such
// a copy); a process that
// saw nothing newer can still read an older copy for that window, and
// then tries a write the leader of a quorum decides.
//
// # Watch
//
// Every Watch of a Store shares one ordered consumer over the bucket,
// started by the first and ended when it breaks (every channel is then
// closed and the consumers watch again) or the store closes; each call
// costs one request, for the stream's last sequence, after which its
// changes start. A watch never skips a write: the consumer's messages
// must follow each other in sequence, and a gap (older messages of a key
// removed, beyond the bucket's history, before the consumer reached them)
// ends the shared consumer and every watch with it. Events follow logical entries: a keep-alive produces
// none, a delete produces EventDelete with the revisions it removed. A
// keep-alive the consumer delivers still counts as a sighting, so a
// follower that watches a claim times its expiry from the holder's last
// renewal. Expiry as this store judges it is reported
// (Capabilities.ExpiryEvents): while a watch runs, a timer on the store's
// clock reports every entry this process has seen unchanged for its TTL as
// EventDelete, from the same sightings its writes judge by, so a follower
// that watches sends nothing while the holder renews and tries once the
// claim has expired. The watch may lag the stream: a renewal it has not
// reached yet is then reported expired too early, the follower's attempt
// is refused, and the renewal, once reached, is reported as EventPut,
// also when a read or a write of this store saw it first. An expiry is
// never reported after a newer write of the key the watch delivered. An
// entry a write makes permanent (TTL 0) is not reported expired, whether
// the watch or a write of this store saw that write first. A marker the
// server writes when it drops an entry a grace after its TTL is reported
// as EventDelete.
//
// # Costs
//
// A renewal (KeepAlive of the entry the store wrote last) is one publish:
// the store remembers what it wrote, so it needs no read first. A
// follower's attempt is a read (and a publish if it takes the claim); as
// the watch reports expiry, an elector following a held claim sends
// nothing while the holder renews. BenchmarkStores in internal/storebench
// measures messages per renewal, CPU, graceful handover and crash failover
// beside the etcd and PostgreSQL stores; docs/performance.md has the
// figures.
//
// # Opening by URL
//
// A program that imports this package opens a store with package storeurl
// from nats://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]/BUCKET, with
// create=true (and replicas=N) to create a missing bucket and gcgrace=D
// for WithGCGrace; see OpenURL.
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
