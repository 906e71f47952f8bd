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
// agree. Resize changes it with a compare-and-set.
//
// # Guarantees
//
//   - At most N slot claims of a group are live at any backend state, where
//     N is the largest size the group had while they were acquired: every
//     slot is one key that goes from absent to present atomically, and only
//     slots below the current size are ever created.
//   - A holder (identity plus per-instance nonce) holds at most one slot of a
//     group, provided it does not call TryAcquire concurrently with itself
//     for the same group through different Group values. Within one Group
//     value that is enforced.
//   - Tokens of one slot strictly increase; tokens of different slots are not
//     comparable.
//   - Lowering N: acquisitions respect the new size at once; a holder of a
//     slot at or above it is refused at its next Renew (an error of class
//     lost, wrapping backends.ErrNotHolder), so an elector steps down
//     gracefully and releases the slot. Until then the group has more
//     holders than the new N, never more than the old one.
//
// # Non-guarantees
//
// The group is only as safe as its store: its scope is the store's scope. A
// holder that already holds a live slot and asks again is told the group is
// held; it does not get its old slot back (an elector waits for it to
// expire, exactly as with a single claim).
package slots
