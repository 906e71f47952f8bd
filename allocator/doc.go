// Package allocator hands out cluster-wide numeric IDs for arbitrary keys
// over any backends.Store: processes on many hosts ask, in parallel, for the
// ID of a key and all get the same ID for the same key, and never the same
// ID for two keys.
//
// # Use
//
// Each process makes one [Allocator] with [New] (its member identity, the
// shared Prefix, the ID range) and calls [Allocator.Allocate] for every key
// it starts to use and [Allocator.Release] when it stops. Uses are counted
// per process: only the first Allocate and the last Release of a key touch
// the store. [Allocator.Get] and [Allocator.GetByID] look mappings up
// without allocating; Config.OnChange reports mappings as they appear and
// disappear cluster-wide.
//
// # Entries
//
// Under Config.Prefix the allocator keeps three kinds of entries:
//
//	id/<n>              -> key            the master: ID n is taken by key
//	key/<key>           -> "n" | "n pending"  the index: key's one ID
//	value/<key>/<member> -> "n"           one member's reference (TTL)
//
// A master is created with create-if-absent, so an ID has at most one
// master; an index entry is created with create-if-absent, so a key has at
// most one index entry. An index entry is written "pending" first and made
// ready only after its master is known to be the key's, so a key maps to an
// ID (Get, GetByID, the cache) only through a ready index entry whose master
// names the key. References carry the member's TTL and are renewed every
// RenewInterval; a process that dies stops referencing its IDs TTL after
// its last renewal.
//
// # Garbage collection
//
// A pass ([Allocator.RunGC]) deletes an index entry that no reference
// backs, and a master no index entry points to, each only when two passes
// at least Grace apart read it at the same revision, and only by
// compare-and-delete on that revision; an allocation bumps the revision
// after writing its reference. So the collector never takes an ID an
// allocation returned, without multi-key transactions; docs/allocator.md
// gives the argument in full. The grace period is not needed for safety:
// it keeps the collector from churning entries that allocations in flight
// are about to use, and it is the promise below.
//
// # Guarantees
//
//   - No two keys share an ID while either is referenced: every returned ID
//     has a master naming its key, and a master is unique per ID.
//   - Every member referencing a key holds the same ID: a key has at most
//     one index entry, and a returned ID is the one it held at Allocate's
//     bump.
//   - An ID changes key only after no reference backed it for at least Grace
//     (as the collector's clock measures it) and, where the store's
//     references lapse, after the last holder's TTL.
//   - A store that lacks create-if-absent, compare-and-set,
//     compare-and-delete, keep-alive or watch is refused by New (an error
//     wrapping backends.ErrUnsupported): it never gets advisory IDs.
//   - During a store outage nothing spins: the watch is retried after waits
//     from 50 ms doubling up to a cap of 5 s, jittered by 15 %, renewals and
//     collection passes keep their intervals, and an Allocate returns the
//     store's error after a bounded number of calls.
//
// # What is not guaranteed
//
//   - A process that cannot renew its references for TTL loses them. The
//     renewal re-establishes a lapsed reference with the same protocol if
//     the key still maps to the same ID; if garbage collection has moved
//     the key on, the local uses are dropped and logged, and the next
//     Allocate returns the key's current ID. Users must keep TTL well above
//     their longest stall, and Grace above TTL.
//   - The cache is a hint. Lookups from it may lag the store; every write
//     is checked against the store.
//   - A store scoped to one process (memstore) or one host (filestore)
//     shares IDs only within that scope.
//
// # Costs
//
// Allocate of a key used locally: no store request. Of a key in the cache:
// two writes. Of a key the cache does not know: one read more. Of a new
// key: one read and four writes (plus a listing of the masters when the
// cache believes the range full). Release of the last local use: one
// delete. Each referenced key costs one keep-alive per RenewInterval per
// member. A garbage collection pass costs three listings plus one delete per
// collected entry (on a store that implements backends.Scanner the
// listings are scans: on etcd, three range reads and one listing of the
// leases whatever the number of references, where a List would look up
// each reference's lease),
// and by default every allocator runs one each GCInterval:
// where many processes share a Prefix, let one or a few collect (GCInterval
// negative elsewhere).
//
// Measured by the benchmarks below (figures in docs/performance.md, "ID
// allocator" and "ID allocator on etcd"):
//
//	Allocate, key used locally        0 requests, 0 allocations (BenchmarkAllocateLocal)
//	Allocate, key known from cache    2 writes, 0 reads (BenchmarkAllocateCached)
//	Release, last local use           1 write
//	new IDs/s, 8 concurrent allocators  BenchmarkNewIDs; on etcd BenchmarkNewIDsEtcd
//	GC pass, 10 000 referenced IDs    3 listings (BenchmarkGCPass10000; on etcd
//	                                  BenchmarkGCPass10000Etcd: 4 requests)
package allocator
