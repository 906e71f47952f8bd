// Package dynamodb is a backends.Store over one Amazon DynamoDB table, for
// teams on AWS that reach for DynamoDB before they run etcd. It enforces
// create-if-absent, compare-and-set, compare-and-delete and keep-alive
// among processes on any hosts that reach the table. It has no watch and
// no multi-key transactions. docs/stores/dynamodb.md describes how each
// part works, and what was tested: the store is tested against dynalite,
// a DynamoDB implementation on LevelDB, not against AWS.
//
// It is a module of its own: a program that does not import it links no
// AWS package.
//
// # Table and items
//
// Entries live in one table whose only key is a string partition key
// named "k" (CreateTable, or WithCreateTable, makes one with on-demand
// billing; Open refuses a table with another key schema with ErrSchema).
// Each key is one item holding its revision, its create revision, a beat,
// its TTL and its value. Every write is one PutItem whose
// ConditionExpression names the revision and beat the store decided on (or
// the item's absence), and every read is consistent (ConsistentRead), so
// each key is linearizable: DynamoDB applies a conditional write to an
// item atomically.
//
// # Revisions and tokens
//
// Revisions are per key: every create, compare-and-set and delete raises
// the key's revision by one, and a create's revision is its create
// revision, the fencing token of a claim. A delete does not delete the
// item: it leaves a tombstone that keeps the last revision, so the next
// create gets a higher token, across deletes, expiries and restarts of the
// server. Revisions of different keys are unrelated. An item removed from
// the table by other means (by hand, by a restore, or by DynamoDB's TTL
// feature pointed at an attribute of the store's) takes its revision
// with it: the key's next token starts again at 1. Never enable DynamoDB's
// TTL on an attribute the store writes.
//
// # Who judges expiry: local observation, never a clock of another host
//
// The store never compares a time another host wrote with its own clock,
// so clock skew between hosts and wall-clock steps change nothing. As the
// kube, NATS and PostgreSQL stores do, it judges expiry by local
// observation: an entry with a TTL is expired for a Store only once that
// Store has seen the same revision and beat for the whole TTL on its own
// monotonic clock (the injected clock.Clock). A keep-alive writes a new
// beat; a takeover names the revision and beat it saw unchanged, so a
// keep-alive applied in between makes it match nothing. An item read
// going back (a revision or beat below what the store saw before it
// asked) is history the table lost: the store judges nothing on it,
// returns backends.ErrUnavailable, and every sighting it holds starts
// counting again.
//
// The price: a store that has just started (or never read a key) waits a
// whole TTL from its first read before it may take an abandoned claim, and
// Remaining is that store's own estimate (Capabilities.ObservedExpiry).
//
// # No watch: followers poll
//
// DynamoDB Streams are not a linearizable watch, and dynalite has none;
// the store declares no watch. A follower learns that a claim was released
// or abandoned only at its next attempt, which the elector times to the
// claim's observed expiry and, on a store like this one that judges expiry
// by local observation, makes at least once per renew period: about one
// request per follower per renew period while a leader renews. A graceful
// handover therefore takes up to a renew period, and a crashed holder's
// claim is taken within TTL + one renew period of its last renewal (the
// follower's attempt that first sees the last beat, at most a renew period
// after it, and a TTL of watching it unchanged).
//
// # Multi-key transactions
//
// None: the store declares no CapTxn and has no Txn method, so
// backends.Require(store, CapTxn) fails with backends.ErrUnsupported.
// DynamoDB's TransactWriteItems would carry one, but the server the store
// is tested against does not implement it, and the store ships no
// transaction no test runs.
//
// # Errors
//
// A failed condition is a conflict (class lost) once a fresh read
// confirms it. Throttling (ProvisionedThroughputExceededException,
// ThrottlingException, RequestLimitExceeded) is backends.ErrThrottled;
// 5xx answers, timeouts and connection failures are
// backends.ErrUnavailable (both transient: a write's outcome is unknown);
// a missing table is backends.ErrMissingResource and refused credentials
// backends.ErrPermission (fatal). Each read and write is one attempt:
// the store turns the client's retryer off for its calls (WithSDKRetries
// keeps it), and its callers retry, an elector with its own backoff
// within its deadline, so that a throttled leader keeps leading while its
// deadline allows. The SDK's default retryer waits up to seconds between
// attempts after throttling, which a holder would spend from its lease.
//
// # Not guaranteed
//
//   - Anything against AWS itself: capacity, throttling under real load,
//     regional failover and global tables (whose replicas are eventually
//     consistent: never point stores in two regions at one global table).
//   - Tokens of a key whose item was removed by other means than the
//     store (see above).
//   - Expiry of entries no Store reads: they are judged only when read.
//   - Watch and multi-key transactions.
//   - Memory for keys read once and never again: a Store remembers what it
//     saw of each key it read until it reads the key absent or lists its
//     prefix without it.
//   - List at scale: it scans the whole table.
package dynamodb
