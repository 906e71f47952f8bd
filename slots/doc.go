// Package slots implements N-slot groups: a claim that at most N holders
// hold at once, each in its own numbered slot with its own fencing token.
//
// A Group is a backends.Locker, so an elector runs unchanged over a group:
// with N = 1 it is a leader election, with N = 3 it elects three holders, each
// of which learns its slot index and token from its lease.
//
// # Layout in the store
//
// A group key G owns the store keys G + "/slot-<i>" (one claim per slot,
// created with create-if-absent and kept alive with keep-alive) and
// G + "/size" (the group's N, shared by every process that uses the group).
// The first process to use a group records its configured size; later
// processes read it from the store, so processes configured differently still
// agree, and a process whose configured size differs from the stored one is
// told so through Config.Logger, with both numbers. Resize changes it with a
// compare-and-set. The library never deletes the size entry.
//
// # A key is a single claim or a slot group, never both
//
// A single claim (backends.NewLocker) on key G lives in the store key G
// itself, a group in the keys under G + "/", so the store alone would let
// both lead on G, each with token 1. They refuse each other instead, with
// an error wrapping backends.ErrInvalid (class fatal): a group's
// TryAcquire refuses while a live claim is stored at G, and a single
// claim's TryAcquire refuses once G + "/size" exists. The claim is written
// first and the size read after it, while a group reads the claim only once
// its size entry exists; so of a claim and a group starting on G at once,
// at most one leads, on every store (both may refuse, and the next attempt
// of the group then succeeds). Once a group has used G, G stays a group.
// The generic Locker's Holders(G) lists a group's slot holders, and its
// WatchClaim(G) signals their changes; a Group watches through it.
//
// # Guarantees
//
//   - At most N slot claims of a group are live at any backend state, where
//     N is the largest size the group had while they were acquired: every
//     slot is one key that goes from absent to present atomically, and an
//     acquirer gets a lease only for a slot below the size current at the
//     moment of its write.
//   - Resize is atomic with acquisitions and renewals: once Resize(n) has
//     returned, no TryAcquire gets a lease for, and no Renew extends the
//     lease of, a slot at or above n (until the size is raised again). On a
//     store with transactions (backends.CapTxn: memstore, etcd) a slot is
//     created in one transaction with a compare on the size entry's
//     revision, so no slot at or above the size is ever written. On a store
//     without (filestore, kube) the acquirer reads the size again after its
//     write and releases a slot the size no longer covers. Renew, on every
//     store, keeps the slot alive and then reads the size (a transaction
//     can write but not keep alive, and a rewrite would change the revision
//     and wake every watcher at each renewal); a renewal whose keep-alive
//     landed after a Resize is refused.
//   - A holder (identity plus per-instance nonce) holds at most one slot of a
//     group, provided it does not call TryAcquire concurrently with itself
//     for the same group through different Group values. Within one Group
//     value that is enforced.
//   - Tokens of one slot strictly increase; tokens of different slots are not
//     comparable.
//   - Lowering N: acquisitions respect the new size at once; a holder of a
//     slot at or above it is refused at its next Renew (an error of class
//     lost, wrapping backends.ErrNotHolder), so an elector steps down
//     gracefully. Renew does not release the slot, since its holder may
//     still be acting on it: the holder's next TryAcquire releases it, and an
//     elector calls that only once its OnElected has returned, so the slot
//     is free as soon as the holder has stopped. Until then the group has
//     more holders than the new N, never more than the old one.
//   - During a store outage nothing spins: a Group retries a call only on a
//     conflict the store answered, never on an error, so the electors over
//     it pace the calls with their backoff (from RetryPeriod, doubling up to
//     a cap of TTL, jittered).
//
// # What a reader may see meanwhile
//
// Holders, List and watches read the store, not the leases. Around a
// lowering Resize they may show a slot at or above the new size that no
// holder acts on beyond its existing deadline:
//
//   - on a store without transactions, a slot written by an acquirer that
//     read the old size, from its write until the acquirer releases it
//     (one read and one delete later; if that delete fails, until the
//     slot's TTL runs out); the acquirer never gets a lease for it;
//   - on every store, a slot whose keep-alive landed after the Resize, with
//     its TTL extended from that keep-alive; the renewal is refused, so its
//     holder gets no new deadline and steps down;
//   - a retired slot whose holder was refused, until that holder's next
//     TryAcquire or Release, or the slot's expiry if the holder stops.
//
// # Non-guarantees
//
// The group is only as safe as its store: its scope is the store's scope. A
// holder that already holds a live slot below the size and asks again is
// told the group is held; it does not get its old slot back (an elector
// that finds its own claim among the holders releases it, exactly as with
// a single claim).
package slots
