// Package backends is the contract between tenure's runtime (elector, slots)
// and the stores that hold claims.
//
// The contract has two levels. A backend implements the lower one, [Store]: a
// revisioned key-value store with TTLs and conditional writes. The upper one,
// [Locker], is the claim level the elector runs on; [NewLocker] writes it once
// over any Store, and slots.Group is a Locker over N slot keys.
//
// # Guarantees every Store makes
//
//   - Writes are linearizable per key. CreateIfAbsent succeeds for exactly one
//     of any number of concurrent callers; CompareAndSet, CompareAndDelete and
//     KeepAlive succeed only while the key's current Revision equals the one
//     the caller names.
//   - Revisions of one key strictly increase over the key's whole history:
//     across updates, deletes, expiry, re-creation and restarts of the process
//     or the backend. A create sets Revision = CreateRevision, and that value
//     is greater than every revision the key had before. CreateRevision is
//     therefore a fencing token: whoever created the current entry holds the
//     highest token the key has ever issued.
//   - KeepAlive extends an entry's TTL without changing its Revision or value.
//   - An expired entry is absent for every operation (Get, List, the
//     conditional writes, Txn). Each backend documents who judges expiry.
//   - Operations after Close fail with an error wrapping [ErrClosed]; bad input
//     fails with an error wrapping [ErrInvalid]. Neither panics.
//   - Every TTL from 0 (no expiry) to [MaxTTL] is kept (rounded up at most to
//     the store's granularity); a longer one is refused with [ErrInvalid] by
//     every write that takes a TTL, and nothing is written.
//   - Capabilities states what the backend enforces atomically and the scope
//     in which its guarantees hold. What it does not declare it does not
//     provide: [Require] fails closed.
//
// # What the contract does not promise
//
//   - Revisions are comparable only between entries of the same key. Some
//     backends use one counter for the whole store; callers must not rely on it.
//   - Entry.Remaining is an estimate for scheduling a retry, not a safety bound.
//     A holder's own deadline is computed by the holder from its own monotonic
//     clock (see package elector).
//   - Watch streams are hints that something changed. They may end at any
//     time (the channel is closed); the consumer re-reads and watches again.
//     Expiry is delivered as an event only where a store declares
//     Capabilities.ExpiryEvents; a Locker over such a store says so with
//     ClaimWatcher.ExpiryEvents.
//   - A Store's scope bounds its safety: a memory store is safe within one
//     process, a file store within one host.
//   - Revisions survive restarts, not restores: putting a backend's state
//     back from a backup (an etcd snapshot, a copied directory) can bring
//     old revisions back, and tokens can then repeat.
//
// # Single claims and slot groups share one key space
//
// A single claim on key K ([NewLocker]) is the store key K, and a transfer
// of it ([Transferer]) the store key K + "/transfer" while it lasts; a
// slot group on K (package slots) is the store keys K + "/size" (its N)
// and K + "/slot-<i>" (slots.SizeKey and slots.SlotKey name them). Left alone,
// a claim and a group on the same K would each lead with token 1, so each
// refuses a key the other kind uses, with an error wrapping [ErrInvalid]:
// [StoreLocker.TryAcquire] refuses K once the group's size entry exists,
// and a group refuses K while a claim is live at K. The size entry is
// never deleted, so the claim's refusal also wraps [ErrUsage]: no retry can
// succeed, and an elector stops at once with a usage error. A claim at K
// can end (a single claim's deployment replaced by a group's), so the
// group's refusal is a plain ErrInvalid, which an elector retries with
// backoff. Each kind writes its own key before reading the other's, so two
// processes starting at once, one of each kind, never both lead; on a
// store that declares CapTxn, a single claim's create and its check of the
// size entry are one transaction (see [StoreLocker.TryAcquire] for what
// an attempt costs). [StoreLocker.Holders] on a
// group's key lists the group's slot holders, and [StoreLocker.WatchClaim]
// on it signals their changes.
//
// # Holders
//
// A claim entry names its [Holder]: the identity, the per-instance nonce
// and the value the holder advertises ([Holder.Advertised], at most
// [MaxAdvertisedBytes], checked by [ValidateAdvertised]). Every Locker
// stores the advertised value with the claim and reports it wherever it
// reports the holder; it needs no write of its own.
//
// # Errors
//
// Callers branch on sentinel errors with [errors.Is] and on [*ConflictError]
// with [errors.As]. [Classify] sorts any error into the three classes the
// elector acts on: [ClassLost] (someone else holds the claim), [ClassTransient]
// (the outcome is unknown; retry until the deadline) and [ClassFatal]
// (retrying will not help; stop and report). Among fatal errors,
// [ErrUsage] marks a misuse the store answered plainly: one to fix in the
// program or its configuration, not in the backend.
package backends
