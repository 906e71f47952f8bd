// Package postgres is a backends.Store over one PostgreSQL table, for teams
// that run PostgreSQL long before they run etcd. It enforces create-if-absent,
// compare-and-set, compare-and-delete, keep-alive, watch and multi-key
// transactions among processes on any hosts that reach the database.
//
// # Schema
//
// Entries live in one table (WithTable; default public.tenure_entries), with
// a sequence the table owns (OWNED BY its rev column, so pg_dump -t carries
// it and dropping the table drops it) and a trigger TABLE_notify. New
// creates them if they are missing (Setup: CREATE ... IF NOT EXISTS,
// serialized by an advisory lock, so many processes may start at once); a
// role that may not create objects opens with WithoutSetup over objects
// made from SetupSQL. Names are validated lower-case identifiers and always
// quoted. A sequence Setup creates is named TABLE$rev: no table a store
// accepts has a $ in its name, so it cannot take the name of another
// store's table. A table made by an earlier version keeps its sequence,
// TABLE_rev: Setup makes the table own it, and WithoutSetup uses it as it
// is. A store of an earlier version does not know TABLE$rev, and its
// Setup would make a TABLE_rev of its own beside it: upgrade every store
// before one creates a new table (or open the older ones WithoutSetup).
//
// Every open checks, in two statements, that the objects are what the
// store needs, and refuses with a fatal error wrapping ErrSchema that
// names the object and what is wrong: the table is a table (not a view or
// an index that took its name), with the six columns of the types the
// store writes, the key in the "C" collation and unique on its own; the
// sequence is a sequence with CACHE 1 (a cache lets each session hand out
// values from a range of its own, out of order across sessions, so a later
// create could get a lower token), a positive increment and NO CYCLE; the
// trigger is there and enabled. Server errors that say an object is not
// what a statement needs (42703, 42809, 42804, 42601, 42939, 42P10) are
// fatal too (ErrSchema), never asked again.
//
// # Revisions and tokens
//
// Revision and CreateRevision come from the table's sequence: every write
// takes nextval, and a create sets CreateRevision to the same number, so
// the fencing token of a claim is CreateRevision. Values only increase (with
// gaps) for as long as the sequence is kept with the table.
//
// Every open also checks that the sequence would hand out a value above
// the highest revision and token in the table. If not (a migration dropped
// the sequence, the table was restored without it, someone reset it), the
// store moves it forward (setval), holding off every writer of the table
// meanwhile (LOCK TABLE ... IN EXCLUSIVE MODE; readers go on), or refuses
// to open, fatally, naming the setval to run, if its role may not. While
// stores run, every statement that draws a revision refuses one that is
// not above the row's current revision and token and above the highest
// revision the store has seen: nothing is written, the store moves the
// sequence forward as on open, and the write fails as unavailable (try
// again), or fatally if it could not. What no check can recover is the
// token of a key deleted before its sequence was lost: a key created again
// gets a token above every row left and every revision the store saw, not
// necessarily above that one. After a point-in-time restore or a failover
// to an asynchronous replica the same holds: tell fenced resources to
// expect lower tokens, or move the sequence past the highest token handed
// out (SELECT setval(...)) before any store writes again.
//
// # Writes
//
// Every write is one statement at read committed, which PostgreSQL makes
// atomic per row: UPDATE ... WHERE key = $1 AND rev = $2 waits for a
// concurrent writer of the row and re-checks the newest version;
// INSERT ... ON CONFLICT DO NOTHING gives one winner among concurrent
// creators. A keep-alive is one UPDATE that sets the TTL and bumps the row's
// beat column and leaves Revision and the value alone. Txn runs in one
// transaction (see Txn). Serialization failures and deadlocks (40001, 40P01),
// a server shutting down and a lost connection are transient
// (backends.ErrUnavailable): the outcome of a write is unknown.
//
// Every statement is bounded by the caller's ctx. The rollback that ends a
// refused or failed transaction is bounded by ctx too, or by 5 s if ctx
// has no deadline or has ended, so a server that stops answering never
// holds a caller (an acquisition, or an elector's Stop) for good; a
// connection whose rollback did not complete is closed, never handed out
// again.
//
// # Many claims in one process
//
// Each KeepAlive is one statement. WithBatchedKeepAlive makes the
// keep-alives of one Store that arrive within a window (default 50 ms)
// share one UPDATE over all their keys, so a process renewing 100 claims
// sends a bounded number of statements per renew period instead of 100.
// The batch locks its rows in key order, as Txn does. A batched renewal is
// answered up to a window later; the holder's deadline counts from before
// it asked, so the wait costs lease time and never extends it.
//
// # Who judges expiry: local observation, never a clock of the server
//
// A TTL judged by the server (clock_timestamp() compared with a stored
// expiry time) rests on the server's wall clock: a step forward of that
// clock, by NTP or an operator, would expire every claim at once while the
// holders' own monotonic deadlines have not passed, and give every claim a
// second holder. This store therefore never reads a clock of the server or
// a time another host wrote. Like backends/kube, it judges expiry by local
// observation: an entry with a TTL is expired for a Store only once that
// Store has seen the same revision and beat for the whole TTL on its own
// monotonic clock (the injected clock.Clock), counting from the moment the
// answer that showed them arrived. A keep-alive bumps the beat, so every
// observer starts counting again. Taking over an expired entry is an UPDATE
// that names the revision and beat that were seen unchanged; a keep-alive
// committed in between makes it match nothing, and the taker reads again.
// Expiry is so each Store's judgment, not a change of the row: a keep-alive
// sent in time and committed late (the server was paused) keeps the entry
// even after some Store reported it expired, and only one of it and a
// takeover can match the beat both name.
//
// Why this keeps two holders apart: a holder that sent a keep-alive at time
// S (on its clock) stops acting by S + TTL − margin (the elector's
// deadline). The keep-alive committed after S; a contender saw the bumped
// beat only after the commit, and takes over only a full TTL of its own
// clock later, so no earlier than S + TTL: after the holder stopped, by the
// margin, which covers the rate difference of the two monotonic clocks. A
// contender whose monotonic clock stops (a suspended host) only waits
// longer. Wall-clock steps on any host, the server's included, change
// nothing.
//
// A row read with a revision, or a beat at the same revision, below what
// the store saw of that key before it asked is history the server lost:
// writes it had acknowledged, gone with a failover to a standby that had
// not received them, or a restore. The store judges nothing on such an
// answer: it returns backends.ErrUnavailable, and every sighting it holds
// starts counting again from that moment, so no expiry is judged on time
// counted before the loss. A store that never saw the lost write cannot
// tell (see Failover).
//
// The price: a store that has just started (or never read a key) waits a
// whole TTL from its first read before it may take an abandoned claim, and
// Remaining is that store's own estimate (Capabilities.ObservedExpiry says
// so: it is never the time the holder has left). The table keeps no time of
// a write, so Entry.Recorded is zero. Entries that nobody reads stay in the
// table until someone takes them over or deletes them.
//
// # Failover
//
// A store connects only to a server that accepts writes: a store URL asks
// for target_session_attrs=read-write unless it gives primary, and Open
// checks every new connection so unless its connection string says
// otherwise. With several hosts (host1,host2), a failover needs no
// reopening: connections to a killed primary break, and one on which a
// server refuses a write as read-only (SQLSTATE 25006: a standby, or an
// old primary fenced with default_transaction_read_only) is closed, not
// reused, so the next connection goes to the new primary. The refused
// write is transient (backends.ErrUnavailable): an elector retries it
// until its deadline. The refusal also ends the store's listening
// connection, and every watch stream with it, since it may be on the
// refusing server, which sees no write again: the next Watch listens on
// the new primary. A pool given to New is the caller's: give it
// target_session_attrs=read-write, and close connections that got 25006
// (pgxpool.Config.AfterRelease).
//
// Operating requirement: every standby that can be promoted while claims
// are live must be synchronous. A keep-alive or a takeover the primary
// acknowledged but a promoted standby never received is lost; a follower
// that saw the earlier beat, and not the renewal, judges the claim expired
// a TTL after its sighting while the holder's deadline counts from its
// later renewal: two holders. (Tokens repeat too, see above.) Open
// therefore refuses, with an error wrapping backends.ErrUnsupported that
// names the setting, a primary that streams to physical standbys (as
// pg_stat_replication shows them) while synchronous_standby_names is
// empty, or names none of them (sync_state async), or synchronous_commit
// is local or off; and, since it cannot tell, a role that may not read
// sync_state there (grant pg_read_all_stats or pg_monitor).
// WithAsyncStandbys (URL: async_standbys=accept) opens anyway, for
// deployments that never promote an asynchronous standby while claims
// are live. A server in recovery is refused with ErrUnavailable. The check
// runs at open only; a standby attached later, or a promotion that is
// not the synchronous standby's (with several candidates, promote the one
// in sync state), is the operator's to avoid. What can be seen at run time
// is: see the row going back, above.
//
// # Watch
//
// Watch uses LISTEN/NOTIFY: the trigger sends one notice per write at
// commit, in commit order (a value too large for a notice is read from the
// table). Every watch of a Store shares one listening connection, opened at
// the first Watch; a watch begins at a marker it sends through the channel,
// so it sees exactly the writes committed after it. Nothing is replayed
// across a disconnect, so every stream ends when the connection breaks.
// Expiry is not a write and yields no event (Capabilities.ExpiryEvents is
// false): followers time their next attempt to the observed expiry, as on
// other stores without expiry events. The listening connection needs a
// session of its own: behind a transaction-mode pooler, see Poolers.
//
// # Poolers
//
// Through a pooler in session mode (PgBouncer's pool_mode = session) a
// client keeps its server connection, and the store works as on a direct
// one. Through one in transaction mode (pool_mode = transaction) each
// transaction may run on another server connection, and what a session
// holds does not follow the client: LISTEN, SET, session advisory locks,
// and prepared statements (which PgBouncer carries between server
// connections only from version 1.21). Say so with
// WithPooler(PoolerTransaction), or pooler=transaction in a URL; the store
// then:
//
//   - sends every statement unprepared, still in one round trip (pgx's
//     QueryExecModeExec): Open configures its pool so, and New refuses a
//     pool that would prepare statements;
//   - relies on no session state, as in every mode: each write is one
//     statement or one transaction, and the advisory locks of Txn and
//     Setup are transaction-scoped (pg_advisory_xact_lock);
//   - watches over a direct connection to the server, when given one
//     (WithListen; listen=HOST[:PORT] in a URL): the LISTEN runs there,
//     while the watch's start markers and every write go through the
//     pooler, so a watch sees each write as on a direct connection;
//   - without one, declares no watch (no CapWatch; Watch returns an error
//     wrapping backends.ErrUnsupported). An elector's followers then
//     learn of a release only at their next attempt, which they time to
//     the claim's observed expiry: a graceful handover may wait up to
//     about a TTL instead of following the release at once. The requests
//     stay what they are with a watch, about one attempt per follower per
//     TTL while the leader renews: expiry yields no event here, so
//     followers time their attempts to it either way. BenchmarkStores in
//     internal/storebench measures both as postgres-pgbouncer, beside
//     postgres (make bench-report puts them in docs/performance.md).
//
// Why no watch that polls through the pooler: a poll sees the table at
// each poll, not the writes between two polls (a delete and a create, two
// compare-and-sets), while a watch promises every write, in order; a
// stream that ended at each change it could not account for would end at
// every handover. The followers' attempts are already a poll that needs
// no such promise, paced by the TTL.
//
// A store not told of a transaction-mode pooler fails rather than
// misbehaves: a prepared statement found missing or doubled on the
// server connection (SQLSTATE 26000, 42P05) is a fatal error naming
// pooler=transaction, and a Watch whose LISTEN does not hold fails after
// 15 s, saying so, instead of waiting for its start marker for ever.
//
// # Opening
//
// Open takes a libpq connection string; New takes a *pgxpool.Pool the
// caller keeps. A program that imports the package opens stores by URL
// (storeurl): postgres://USER:PASSWORD@HOST:PORT/DATABASE?table=SCHEMA.TABLE
// (or postgresql://), with create=true to run Setup, connect_timeout and
// application_name as libpq reads them, and host=/DIR for a unix socket;
// see url.go for the form. What a URL leaves out (a user, a password, TLS
// files) comes from libpq's environment variables and password file, as
// pgx reads them (PGUSER, PGPASSWORD, PGPASSFILE, PGSSLMODE, ...). A URL
// that cannot be opened fails with one line naming the database, the
// servers and the cause ("connection refused", or the server's message
// and SQLSTATE). Errors never show the password.
//
// # Testing
//
// The tests run against real servers that package pgtest starts (initdb and
// postgres from the machine, as nobody when run as root); without the
// binaries they fail and say what to install. The conformance suite and
// an elector test also run through a real PgBouncer in transaction mode
// (pgtest.Server.StartBouncer), with and without a direct connection for
// the watch. Fault tests kill, pause
// (SIGSTOP) and restart the server, cut a client off through a TCP proxy,
// and end the listening connection; failover tests start a primary and a
// streaming standby (pg_basebackup), kill the primary and promote the
// standby. The store is benchmarked beside the
// etcd and NATS stores, in one run: BenchmarkStores in internal/storebench
// (TTL 2 s, renewal every 500 ms, three candidates); docs/performance.md
// has the figures.
//
// # Not guaranteed
//
//   - Tokens after a point-in-time restore or an asynchronous failover (see
//     above), and one holder after an asynchronous failover opened with
//     WithAsyncStandbys (see Failover).
//   - The token of a key deleted before its sequence was lost (dropped,
//     reset, or a table restored without it): no row keeps it. DROP TABLE
//     drops the sequence with the table.
//   - Changes to the sequence's settings (ALTER SEQUENCE ... CACHE) while
//     stores run: they are checked at open. Sessions keep values they
//     cached, so restart every store after altering it back.
//   - Expiry of entries no Store reads: they are judged only when read.
//   - Watch events for expiry.
//   - Watch behind a transaction-mode pooler (PgBouncer's pool_mode =
//     transaction) without a direct connection to listen on (WithListen):
//     LISTEN needs a session of its own, and the store declares no watch.
//   - Memory for keys read once and never again: a Store remembers what it
//     saw of each key it read (to judge its expiry, and to tell a row
//     going back) until it reads the key absent or lists its prefix
//     without it.
package postgres
