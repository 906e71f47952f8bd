// Package memstore is an in-memory [backends.Store]: one mutex-guarded map,
// safe among the users of one Store value in one process.
//
// It implements the whole contract — [backends.Store], [backends.Watcher] and
// [backends.Txner] — and declares every capability with
// [backends.ScopeProcess]. It is meant for tests, demos and single-process
// programs; it is the reference the other backends are compared against.
//
// # Guarantees
//
//   - Every operation is atomic and linearizable: each one runs in a single
//     critical section of the store's mutex.
//   - One counter for the whole store issues revisions. Every write, delete
//     and expiry moves it forward, so the Revision and CreateRevision of a key
//     strictly increase across updates, deletes, expiry and re-creation.
//   - Expiry is judged by the injected [clock.Clock] (the real clock unless
//     [WithClock] says otherwise): an entry whose TTL has run out by the
//     clock's Now is absent for every operation, whether or not a timer has
//     fired yet.
//   - KeepAlive extends the TTL from the clock's Now without changing
//     Revision or value, and produces no watch event.
//   - Watch delivers the events of one key in revision order, each
//     watcher on its own buffered channel. Writers never block on a watcher:
//     one whose buffer is full has its channel closed and is dropped (the
//     consumer re-reads and watches again). While at least one watch is open,
//     expiry is reported as an EventDelete, delivered when the clock's timer
//     for the earliest expiry fires, or sooner if an operation notices first.
//   - Txn checks every condition and applies every operation in one critical
//     section; all the operations of a Txn share one new revision.
//   - Values are copied in and out: callers cannot change stored state through
//     a slice they passed in or got back (this includes watch events and the
//     entry a *backends.ConflictError carries).
//   - Close is idempotent; it closes every watch channel, stops the expiry
//     timer and waits for the store's own callbacks to return. Every
//     operation afterwards fails with an error wrapping [backends.ErrClosed].
//
// # What it does not promise
//
//   - Nothing outside one process: two Store values never share state, and
//     nothing survives the process. Use backends/filestore across processes
//     on one host and backends/etcd or backends/kube across hosts.
//   - No durability and no restart: there is no Reopen.
//   - Expiry events are hints, as in the contract: a watch may see an expired
//     key's EventDelete late (when the clock's timer fires) and never when no
//     watch was open at the time.
//   - Memory is reclaimed for expired entries when the next operation runs or
//     the expiry timer fires, not at the instant of expiry.
//
// # Clocks and fake clocks
//
// The store reads the clock's Now once per operation, under its mutex. While
// a watch is open and some entry has a TTL, the store keeps exactly one timer
// armed on the clock (an AfterFunc at the earliest expiry); with a fake clock
// that timer counts among the clock's waiters. With no watch open it arms no
// timer at all.
//
// A program that imports this package opens a new, empty store by URL with
// package storeurl: mem://.
package memstore
