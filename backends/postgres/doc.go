// Package postgres is a backends.Store over one PostgreSQL table, for teams
// that run PostgreSQL long before they run etcd. It enforces create-if-absent,
// compare-and-set, compare-and-delete, keep-alive, watch and multi-key
// transactions among processes on any hosts that reach the database.
// docs/stores/postgres.md describes how each part works.
//
// # Schema
//
// Entries live in one table (WithTable; default public.tenure_entries), with
// a sequence the table owns and a notify trigger. New creates them if they
// are missing (Setup, serialized so that many processes may start at once);
// a role that may not create objects opens with WithoutSetup over objects
// made from SetupSQL. A sequence Setup creates is named TABLE$rev; a table
// made by an earlier version keeps its sequence, TABLE_rev: Setup makes the
// table own it, and WithoutSetup uses it as it is. A store of an earlier
// version does not know TABLE$rev, and its Setup would make a TABLE_rev of
// its own beside it: upgrade every store before one creates a new table (or
// open the older ones WithoutSetup). Every open checks that the objects are
// what the store needs (the table's columns and collation, a sequence with
// CACHE 1, a positive increment and NO CYCLE, an enabled trigger) and
// refuses with a fatal error wrapping ErrSchema that names the object and
// what is wrong.
//
// The table's column recorded (timestamptz) is optional: a table made by
// an earlier version lacks it. Setup adds it (New too, unless the role
// may not alter the table or the table stays locked by its writers for
// 5 s: the store then opens without it); a store over a table without it
// works and records no time (see Entry.Recorded below). If the column is
// there, it must be a timestamptz.
//
// # Revisions and tokens
//
// Revision and CreateRevision come from the table's sequence, and the
// fencing token of a claim is CreateRevision: values only increase (with
// gaps) for as long as the sequence is kept with the table. Every open, and
// every statement that draws a revision, checks that the sequence is past
// every revision and token the table and the store have seen; if not (a
// migration dropped the sequence, a restore, a reset), the store moves it
// forward, or fails fatally, naming the setval to run, if its role may not.
//
// # Writes
//
// Every write is one statement at read committed, atomic per row; Txn runs
// in one transaction (see Store.Txn). A keep-alive sets the TTL and bumps
// the row's beat and leaves Revision and the value alone. Serialization
// failures and deadlocks, a server shutting down and a lost connection are
// transient (backends.ErrUnavailable): the outcome of a write is unknown.
// Every statement, and the rollback of a refused transaction, is bounded by
// the caller's ctx (the rollback by 5 s if ctx has none or has ended), and
// a connection whose rollback did not complete is never handed out again.
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
// This store never reads a clock of the server or a time another host
// wrote, since a step forward of the server's wall clock would expire
// every claim at once while the holders' deadlines have not passed. Like
// backends/kube, it judges expiry by local observation: an entry with a TTL
// is expired for a Store only once that Store has seen the same revision
// and beat for the whole TTL on its own monotonic clock (the injected
// clock.Clock). A takeover names the revision and beat it saw unchanged, so
// a keep-alive committed in between makes it match nothing. Wall-clock
// steps on any host, the server's included, change nothing.
//
// A row read going back (a revision, or a beat at the same revision, below
// what the store saw before it asked) is history the server lost; the
// store judges nothing on it and returns backends.ErrUnavailable, and every
// sighting it holds starts counting again.
//
// The price: a store that has just started (or never read a key) waits a
// whole TTL from its first read before it may take an abandoned claim, and
// Remaining is that store's own estimate (Capabilities.ObservedExpiry says
// so: it is never the time the holder has left). Entries that nobody reads
// stay in the table until someone takes them over or deletes them.
//
// Entry.Recorded is the server's clock_timestamp() at the row's last write
// or keep-alive, as the statement that made it stored it: for people to
// read, never judged (a server's wall clock may step). It is zero over a
// table without the recorded column, for a row no store that records the
// time has written, and in watch events. Writes and keep-alives by stores
// of an earlier version leave it as it was, so during an upgrade a row may
// show the time of an older write, or none.
//
// # Failover
//
// A store connects only to a server that accepts writes (a store URL asks
// for target_session_attrs=read-write unless it gives primary). With
// several hosts, a failover needs no reopening: a connection to a killed or
// read-only server is not reused, the refused write is transient, and
// every watch stream ends, so the next Watch listens on the new primary. A
// pool given to New is the caller's: give it target_session_attrs=read-write,
// and close connections that got SQLSTATE 25006 (pgxpool.Config.AfterRelease).
//
// Operating requirement: every standby that can be promoted while claims
// are live must be synchronous; a write the primary acknowledged but a
// promoted standby never received can give a claim two holders, and tokens
// can repeat. Open therefore refuses, with an error wrapping
// backends.ErrUnsupported that names the setting, a primary that streams to
// a standby it does not wait for, and a role that may not read sync_state
// (grant pg_read_all_stats or pg_monitor). WithAsyncStandbys (URL:
// async_standbys=accept) opens anyway, for deployments that never promote an
// asynchronous standby while claims are live. WithReadOnly (a program
// that only reads, as storeurl's Location.ReadOnly asks) skips these
// checks and the wait below: such a store refuses its own writes with
// backends.ErrPermission, so it cannot make a holder. A server in
// recovery is refused with ErrUnavailable. A primary with synchronous_standby_names
// set and no synchronous standby streaming (a promoted standby that kept
// the old primary's setting) makes every commit wait: Open waits for one,
// and when its ctx ends first fails with ErrUnavailable naming the
// setting. The check runs at open; on a store already open, a write
// that runs out of time makes the store look again (on a connection of
// its own, at most every few seconds, without delaying the write), and
// its timed-out writes then name the setting too, still transient.
//
// # Watch
//
// Watch uses LISTEN/NOTIFY and sees exactly the writes committed after it
// began, in commit order, over one listening connection per Store. Nothing
// is replayed across a disconnect, so every stream ends when the connection
// breaks. Expiry is not a write and yields no event (Capabilities.ExpiryEvents
// is false): followers time their next attempt to the observed expiry,
// and an elector's follower reads the claim at least once per renew period
// (package elector), so it sees a holder's last keep-alive within one renew
// period of it and takes a crashed holder's claim within TTL + RenewPeriod.
//
// # Poolers
//
// Through a pooler in session mode the store works as on a direct
// connection. Behind one in transaction mode (PgBouncer's pool_mode =
// transaction), say so with WithPooler(PoolerTransaction), or
// pooler=transaction in a URL: the store then sends every statement
// unprepared and relies on no session state, and watches over a direct
// connection to the server when given one (WithListen; listen=HOST[:PORT]
// in a URL). Without one it declares no watch (no CapWatch): followers
// learn of a release only at their next attempt, which an elector's
// follower makes at most a renew period later, so a graceful handover may
// wait up to about a renew period. A
// store not told of a transaction-mode pooler fails rather than misbehaves:
// a prepared statement found missing or doubled is a fatal error naming
// pooler=transaction, and a Watch whose LISTEN does not hold fails after
// 15 s.
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
