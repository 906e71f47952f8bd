// Package filestore is a [backends.Store] kept in one directory of a local
// filesystem, safe among the processes of one host.
//
// It declares create-if-absent, compare-and-set, compare-and-delete,
// keep-alive and watch with [backends.ScopeHost]. It does not declare Txn and
// has no Txn method: with one file per key a reader could see some of a
// transaction's writes without the others, so [backends.Require] fails
// closed for it.
//
// Each key has one canonical file, its serialization point. A write
// prepares and fsyncs a temp file without any lock, renames it over the
// key's file under the key's operation lock (an OFD lock the kernel
// releases when its holder dies) only if the file is still the one it
// decided on, and returns once a directory fsync that began after its
// rename has ended. docs/stores/filestore.md describes the protocol.
//
// # Guarantees
//
//   - On one host, among any number of processes and Store values sharing a
//     directory on a local filesystem (ext4, xfs, tmpfs), every write
//     is atomic and linearizable per key.
//   - Readers (Get, List, Watch) take no lock and never see a partial write
//     or a temp file: canonical files are only ever replaced by rename.
//   - A write that returned success is on disk: its file and the directory
//     entry were fsynced before it returned. A process killed at any point of
//     a write leaves the old content or the new one, never a mix.
//   - Revisions never go back. A key's revision lives in its file; a delete
//     leaves a tombstone that keeps the last revision, and an expired entry
//     keeps its revision until it is replaced, so a re-created key continues
//     above every revision it had — across deletes, expiry, crashes and
//     restarts. CreateRevision is therefore a fencing token.
//   - Expiry is judged by the host's boot id and CLOCK_MONOTONIC, never the
//     wall clock: setting the time of day changes nothing, and after a
//     reboot every entry with a TTL is expired. CLOCK_MONOTONIC is the clock
//     of Go's monotonic readings, so the store judges expiry on the very
//     clock every holder on the host times its local deadline on (the
//     elector's default clock). It stops while the host is suspended, for
//     the store and the holders alike: a suspend, however long, moves no
//     expiry closer to a holder's deadline.
//   - Bad state fails closed: a truncated, corrupted or foreign file where a
//     key's file belongs is an error wrapping [backends.ErrCorrupt] (a
//     [*CorruptFileError] naming the file), never "absent".
//   - Temp files of writers that died, at any step, are removed by Open,
//     and by List when it comes across them; a live writer's temp file is
//     never touched.
//   - Each key's file keeps its previous states (up to 16, with up to 8 KiB
//     of their values), written atomically with the current one, so a
//     watch that reads late still reports every revision in order.
//
// # Errors
//
// Errors are classed for [backends.Classify]. Fatal, because no retry can
// fix them (an operator must):
//
//   - [backends.ErrPermission]: permission denied (EACCES, EPERM) on the
//     directory, the lock file or a key's file, and a read-only filesystem
//     (EROFS), such as one the kernel remounted read-only after an I/O
//     error. [Open] refuses a store it cannot write; a store that becomes
//     read-only later fails every write, renewals included, while reads go
//     on working.
//   - [backends.ErrMissingResource]: the directory or its lock file was
//     removed (ENOENT, ENOTDIR).
//   - [backends.ErrCorrupt]: a file that is not what the store wrote.
//   - [backends.ErrInvalid]: an invalid argument, an empty path given to
//     Open, a path that is not a directory.
//   - [backends.ErrClosed]: the Store was closed.
//
// Transient, because the condition can clear or the outcome is unknown: a
// full disk or quota (ENOSPC, EDQUOT: the write did not happen and the old
// state is intact), a write whose directory fsync failed after its rename
// (visible, maybe not durable), a write that found its key's file changed by
// other writers under each of its attempts while its condition still held
// (nothing written), a cancelled context, and any other filesystem error. A holder retries a transient error until its deadline
// and no longer, which never extends its leadership. Conflicts are lost.
//
// # What it does not promise
//
//   - A process stopped while it holds a key's operation lock (SIGSTOP, a
//     debugger, a frozen cgroup, a paused VM) blocks every other writer of
//     that key until it continues or dies, however long that is: a claim
//     whose holder is stopped there cannot be taken over, though its TTL
//     has passed. Safety holds; liveness for that key does not. The lock is
//     held only between a write's second read and its rename, microseconds
//     without any fsync, so a process is rarely stopped inside it; a
//     process stopped anywhere else in a write, its fsyncs included, blocks
//     no one (its write then decides again when it continues).
//   - A write that the disk does not answer (an fsync that hangs) holds its
//     turn, or the Store's directory fsync, until it returns; two such
//     writes, or one hung directory fsync, hold up every other write of
//     their Store, which a disk that stopped answering would hold up
//     anyway. Writes of other Stores and processes never wait for them.
//   - Nothing on network or distributed filesystems (NFS, SMB, CephFS,
//     FUSE): their locking, rename and fsync semantics vary, and their
//     clients do not share a boot id or a clock.
//   - Nothing across hosts, even ones that share the directory: expiry is
//     judged on each host's own monotonic clock, which means nothing on
//     another host. Use backends/etcd or backends/kube there.
//   - Nothing across time namespaces. A time namespace (unshare --time,
//     some container runtimes, CRIU restores) offsets CLOCK_MONOTONIC and
//     CLOCK_BOOTTIME for the processes in it, while the boot id stays the
//     host's. Processes sharing one directory from namespaces with different
//     monotonic offsets read each other's expiry times shifted by the
//     difference, which the store cannot see: a reader whose clock is ahead
//     judges a live claim expired early (two holders), one whose clock is
//     behind judges it live too long (a late takeover). Every process that
//     shares a directory must run in one time namespace, or in namespaces
//     with the same monotonic offset; containers that share a host's
//     directory share its clocks unless they were given a time namespace of
//     their own.
//   - Deleted keys are not forgotten: each leaves a tombstone file that
//     keeps the key's recent history (that is how its revisions stay
//     monotonic). A store of short-lived keys with distinct names grows.
//   - Watch reports every revision in order only while it keeps up within
//     the history a key's file keeps; a watch that falls further behind
//     ends its stream rather than skip a revision. Expiry produces no
//     event. Each Watch uses one inotify instance, a per-user kernel
//     resource (fs.inotify.max_user_instances), and reads every key file
//     replaced under its prefix, keep-alives included.
//   - Writes to the store directory by anything but this package (editing,
//     removing or renaming key files, rolling back a backup) void the
//     revision guarantee; the store detects what it can and fails closed.
//
// # Time in tests
//
// [WithClock] replaces CLOCK_MONOTONIC with a clock.Clock and the boot id
// with a given string, so that tests move expiry with a fake clock and
// simulate a reboot by reopening with another boot id. The holders' clock
// must be that same clock, as on a real host.
//
// # Opening
//
// [Open] opens a store in a directory that exists, and refuses one that
// does not (naming it), so that a mistyped path never gives a process a
// store of its own beside the one its peers share; [WithCreate] makes the
// directory. A program that imports this package opens the same store by
// URL with package storeurl: file:///DIR, or file:///DIR?create=true to
// make DIR. An empty directory that exists becomes a store when opened.
package filestore
