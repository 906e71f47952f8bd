package filestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/check"
	"github.com/tenure-go/tenure/internal/closer"
	"golang.org/x/sys/unix"
)

// Store is a backends.Store kept in one directory of a local filesystem. It
// is safe for concurrent use by goroutines, and several Store values (in one
// process or in many) may share a directory. Close it when done; it holds no
// resources but its watches between calls.
type Store struct {
	dir      string
	lockPath string
	judge    judge
	wall     clock.Clock // real time, only for pacing lock retries
	// disk holds a token for each write of this Store writing and fsyncing
	// its temp file (see diskSlots).
	disk chan struct{}
	// dirSync makes this Store's renames durable (see durable).
	dirSync dirSync

	readOnly bool // opened WithReadOnly: writes are refused, temp files left be

	closing closer.Once

	mu      sync.Mutex
	watches map[*watch]struct{} // guarded by mu; nil once closed
	wg      sync.WaitGroup      // one per watch goroutine
}

var (
	_ backends.Store   = (*Store)(nil)
	_ backends.Watcher = (*Store)(nil)
)

// Option configures Open.
type Option func(*options)

type options struct {
	judge    *judge
	create   bool
	readOnly bool
}

// WithCreate makes Open create the store's directory (and its missing
// parents, mode 0755 before umask) when it does not exist. Without it,
// Open refuses a directory that does not exist, so that a mistyped path
// never gives a process a store of its own.
func WithCreate() Option { return func(o *options) { o.create = true } }

// WithReadOnly opens the store for a program that only reads it: Open
// writes nothing to the directory. It makes neither the directory nor the
// store's lock file, nor removes the temp files dead writers left. An
// empty directory opens as the empty store it becomes when a writer first
// opens it; a directory with other files but no lock file is not a store,
// and is refused with an error that names it and wraps
// backends.ErrMissingResource (fatal). The store's reads and watches work
// as usual; its writes fail with an error wrapping backends.ErrPermission
// (fatal). It cannot go with WithCreate.
func WithReadOnly() Option { return func(o *options) { o.readOnly = true } }

// WithClock makes c stand in for the host's CLOCK_MONOTONIC and bootID (1 to
// 64 bytes of [A-Za-z0-9._-]) for its boot id when the store judges expiry.
// Tests use it to move time with a fake clock, and to simulate a reboot by
// opening the same directory with another boot id. Every Store sharing a
// directory must use the same clock and boot id, and it must be the clock
// the holders time their deadlines on; production code leaves the default
// (the host's own).
func WithClock(bootID string, c clock.Clock) Option {
	return func(o *options) {
		j := clockJudge(bootID, c)
		o.judge = &j
	}
}

// Open opens the store kept in dir. It removes temp files that writers
// which died mid-write left behind.
//
// dir must exist, unless WithCreate is given: a directory that does not
// exist is refused with an error that names it and wraps
// backends.ErrMissingResource (fatal), so that a mistyped path never gives
// a process a private store beside the one its peers share. An existing
// empty directory becomes a store. dir must not be empty (an error
// wrapping backends.ErrInvalid). A relative
// dir is resolved against the working directory once, here: the store stays
// in that directory whatever the process does to its working directory
// later, and [Store.Dir] reports it. Two processes share a store only if
// their paths resolve to the same directory.
//
// Open refuses, with an error wrapping backends.ErrPermission (fatal), a
// store this process cannot write: a directory it may not create files in,
// a lock file it may not open for writing, a read-only filesystem. A store
// that opens is one the process could take claims in. A store that becomes
// read-only after Open fails every write the same way; reads go on working.
//
// ctx bounds Open. A ctx already done when Open is called fails it before
// it touches dir. When ctx ends while a filesystem call has not returned
// (a hung network mount, a special file in dir that blocks whoever opens
// it), Open returns an error wrapping backends.ErrUnavailable (transient)
// and ctx's error; the call left behind ends when the filesystem answers,
// and Open's remaining steps are not taken.
func Open(ctx context.Context, dir string, opts ...Option) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("filestore: open %s: %w", dir, err)
	}
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	var j judge
	if o.judge != nil {
		j = *o.judge
		if !validBootID(j.bootID) {
			return nil, fmt.Errorf("filestore: open: boot id %q: %w", j.bootID, backends.ErrInvalid)
		}
	} else {
		var err error
		if j, err = hostJudge(); err != nil {
			return nil, fmt.Errorf("filestore: open: %w", err)
		}
	}
	if dir == "" {
		return nil, fmt.Errorf("filestore: open: empty directory path: %w", backends.ErrInvalid)
	}
	if o.create && o.readOnly {
		return nil, fmt.Errorf("filestore: open %s: WithCreate and WithReadOnly: a store opened read-only is never made: %w", dir, backends.ErrInvalid)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("filestore: open %s: %w", dir, err)
	}
	type opened struct {
		s   *Store
		err error
	}
	// The steps run on a goroutine of their own so that a filesystem call
	// that does not return cannot hold the caller past ctx. The goroutine
	// ends when its last call returns; a Store it opens after Open gave up
	// holds nothing that needs closing.
	done := make(chan opened, 1)
	go func() {
		s, err := open(ctx, abs, j, o)
		done <- opened{s, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("filestore: open %s: %w", abs, r.err)
		}
		return r.s, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("filestore: open %s: the filesystem did not answer in time: %w: %w", abs, backends.ErrUnavailable, ctx.Err())
	}
}

// open takes Open's filesystem steps in abs. It checks ctx between them,
// and stops cleaning temp files once ctx is done.
func open(ctx context.Context, abs string, j judge, o options) (*Store, error) {
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		if !o.create {
			return nil, fmt.Errorf("no such directory (make it, or ask for it: WithCreate, or create=true in a file:// URL): %w", backends.ErrMissingResource)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err = os.MkdirAll(abs, 0o755); err == nil {
			fi, err = os.Stat(abs)
		}
	}
	if err != nil {
		return nil, fsError(err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("not a directory: %w", backends.ErrInvalid)
	}
	s := &Store{
		dir:      abs,
		lockPath: filepath.Join(abs, lockName),
		judge:    j,
		wall:     clock.New(),
		disk:     make(chan struct{}, diskSlots),
		watches:  make(map[*watch]struct{}),
		readOnly: o.readOnly,
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o.readOnly {
		return s, s.checkIsStore()
	}
	if err := s.ensureLockFile(); err != nil {
		return nil, err
	}
	if err := s.checkWritable(); err != nil {
		return nil, err
	}
	if names, err := s.readDirNames(); err == nil {
		s.cleanTemps(ctx, names)
	}
	return s, nil
}

// checkIsStore checks that a directory opened read-only is a store: that
// it holds the lock file the first Open with write access made, or is
// empty, as a store is before its first writer opens it.
func (s *Store) checkIsStore() error {
	fi, err := os.Lstat(s.lockPath)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("not a store (%s is not a regular file): %w", lockName, backends.ErrInvalid)
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fsError(err)
	}
	names, err := s.readDirNames()
	if err != nil {
		return err
	}
	if len(names) > 0 {
		return fmt.Errorf("not a store (no %s file, and it holds other files, such as %q): %w", lockName, names[0], backends.ErrMissingResource)
	}
	return nil
}

// ensureLockFile creates the lock file if it is missing. Its content is never
// written; only byte-range locks are taken on it.
func (s *Store) ensureLockFile() error {
	if _, err := os.Stat(s.lockPath); err == nil {
		return nil
	}
	f, err := os.OpenFile(s.lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fsError(err)
	}
	if err := f.Close(); err != nil {
		return fsError(err)
	}
	return s.syncDir("")
}

// checkWritable checks what every write needs: to open the lock file for
// writing and to create files in the directory. The kernel answers for the
// directory (faccessat with the effective ids), which covers permission
// bits, ACLs, security modules and read-only mounts without writing.
func (s *Store) checkWritable() error {
	fd, err := unix.Open(s.lockPath, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open lock file %s for writing: %w", s.lockPath, fsError(err))
	}
	unix.Close(fd)
	if err := unix.Faccessat(unix.AT_FDCWD, s.dir, unix.W_OK|unix.X_OK, unix.AT_EACCESS); err != nil {
		return fmt.Errorf("directory not writable: %w", fsError(err))
	}
	return nil
}

// Dir is the absolute path of the directory the store keeps its files in,
// as Open resolved it. Log it at start: it tells an operator which
// directory is the store, whatever path the process was given.
func (s *Store) Dir() string { return s.dir }

// Capabilities implements backends.Store. Txn is not declared: with one file
// per key, a reader could see some of a transaction's writes without the
// others.
func (s *Store) Capabilities() backends.Capabilities {
	return backends.Capabilities{
		Atomic: backends.CapCreateIfAbsent | backends.CapCompareAndSet |
			backends.CapCompareAndDelete | backends.CapKeepAlive | backends.CapWatch,
		Scope:       backends.ScopeHost,
		ExpiryJudge: "host boot id + CLOCK_MONOTONIC",
	}
}

// Close implements backends.Store: it ends every watch (closing their
// channels) and waits for their goroutines. Entries stay on disk.
func (s *Store) Close() error {
	// No mutex orders the mark: a watch registers under mu only while
	// s.watches is not nil, which the teardown clears under mu.
	return s.closing.Close(nil, func() error {
		s.mu.Lock()
		ws := s.watches
		s.watches = nil
		s.mu.Unlock()
		for w := range ws {
			w.stop()
		}
		s.wg.Wait()
		return nil
	})
}

func (s *Store) usable(ctx context.Context, op, key string) error {
	if s.closing.Closed() {
		return fmt.Errorf("filestore: %s %q: %w", op, key, backends.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("filestore: %s %q: %w", op, key, err)
	}
	return nil
}

// Get implements backends.Store.
func (s *Store) Get(ctx context.Context, key string) (backends.Entry, error) {
	if err := s.usable(ctx, "get", key); err != nil {
		return backends.Entry{}, err
	}
	if err := backends.ValidateKey(key); err != nil {
		return backends.Entry{}, fmt.Errorf("filestore: get: %w", err)
	}
	_, r, found, err := s.readKey(key, nil, record{})
	if err != nil {
		return backends.Entry{}, fmt.Errorf("filestore: get %q: %w", key, err)
	}
	if found {
		if live, left := s.judge.live(r, s.judge.now()); live {
			return entryOf(r, left), nil
		}
	}
	return backends.Entry{}, fmt.Errorf("filestore: get %q: %w", key, backends.ErrNotFound)
}

// List implements backends.Store. It also removes temp files left by dead
// writers that it comes across.
func (s *Store) List(ctx context.Context, prefix string) ([]backends.Entry, error) {
	if err := s.usable(ctx, "list", prefix); err != nil {
		return nil, err
	}
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("filestore: list: %w", err)
	}
	names, err := s.readDirNames()
	if err != nil {
		return nil, fmt.Errorf("filestore: list %q: %w", prefix, err)
	}
	var out []backends.Entry
	var temps []string
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("filestore: list %q: %w", prefix, err)
		}
		kind, key, err := parseName(name)
		switch {
		case err != nil:
			return nil, fmt.Errorf("filestore: list %q: %w", prefix, s.corruptFile(name, err))
		case kind == nameTemp:
			temps = append(temps, name)
			continue
		case kind == nameOther:
			continue
		case kind == nameInline && !strings.HasPrefix(key, prefix):
			continue
		}
		r, found, err := s.readFile(name)
		if err != nil {
			return nil, fmt.Errorf("filestore: list %q: %w", prefix, err)
		}
		if !found || !strings.HasPrefix(r.Key, prefix) {
			continue
		}
		if live, left := s.judge.live(r, s.judge.now()); live {
			out = append(out, entryOf(r, left))
		}
	}
	if !s.readOnly {
		s.cleanTemps(ctx, temps)
	}
	slices.SortFunc(out, func(a, b backends.Entry) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// CreateIfAbsent implements backends.Store.
func (s *Store) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	return s.create(ctx, "create", key, value, ttl)
}

// CompareAndSet implements backends.Store.
func (s *Store) CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	if rev == 0 {
		return s.create(ctx, "cas", key, value, ttl)
	}
	if err := check.Write(key, rev, value, ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("filestore: cas: %w", err)
	}
	return s.update(ctx, "cas", key, func(cur state) (record, error) {
		if err := cur.expect("cas", rev); err != nil {
			return record{}, err
		}
		return withTTL(record{
			Key: key, Value: bytes.Clone(value), Revision: cur.rec.Revision + 1, CreateRevision: cur.rec.CreateRevision,
		}, ttl, s.judge.bootID, cur.now), nil
	})
}

func (s *Store) create(ctx context.Context, op, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	if err := check.Write(key, 0, value, ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("filestore: %s: %w", op, err)
	}
	return s.update(ctx, op, key, func(cur state) (record, error) {
		if err := cur.expect(op, 0); err != nil {
			return record{}, err
		}
		// A tombstone or an expired entry still holds the key's last
		// revision: the new entry continues above it.
		rev := cur.rec.Revision + 1
		return withTTL(record{Key: key, Value: bytes.Clone(value), Revision: rev, CreateRevision: rev}, ttl, s.judge.bootID, cur.now), nil
	})
}

// CompareAndDelete implements backends.Store. The key's file is replaced by
// a tombstone that keeps its last revision.
func (s *Store) CompareAndDelete(ctx context.Context, key string, rev int64) error {
	if err := backends.ValidateKey(key); err != nil {
		return fmt.Errorf("filestore: delete: %w", err)
	}
	if err := check.Revision(rev, true); err != nil {
		return fmt.Errorf("filestore: delete %q: %w", key, err)
	}
	_, err := s.update(ctx, "delete", key, func(cur state) (record, error) {
		if err := cur.expect("delete", rev); err != nil {
			return record{}, err
		}
		return record{Key: key, Revision: cur.rec.Revision, CreateRevision: cur.rec.CreateRevision, Deleted: true}, nil
	})
	return err
}

// KeepAlive implements backends.Store. It rewrites the key's file with a new
// expiry and the same revision; watches report nothing for it.
func (s *Store) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	if err := backends.ValidateKey(key); err != nil {
		return backends.Entry{}, fmt.Errorf("filestore: keepalive: %w", err)
	}
	if err := check.Revision(rev, true); err != nil {
		return backends.Entry{}, fmt.Errorf("filestore: keepalive %q: %w", key, err)
	}
	if err := check.KeepAliveTTL(ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("filestore: keepalive %q: %w", key, err)
	}
	return s.update(ctx, "keepalive", key, func(cur state) (record, error) {
		if err := cur.expect("keepalive", rev); err != nil {
			return record{}, err
		}
		next := cur.rec
		return withTTL(next, ttl, s.judge.bootID, cur.now), nil
	})
}

// state is what a conditional write sees under the key's lock.
type state struct {
	key   string
	rec   record // zero if the key has no file
	live  bool
	left  time.Duration
	now   int64
	found bool // the key has a file (live, expired or a tombstone)
}

// expect checks that the key's live revision is rev (0: absent).
func (c state) expect(op string, rev int64) error {
	switch {
	case rev == 0 && !c.live:
		return nil
	case rev != 0 && c.live && c.rec.Revision == rev:
		return nil
	}
	ce := &backends.ConflictError{Op: op, Key: c.key, Expected: rev, Found: c.live}
	if c.live {
		ce.Current = entryOf(c.rec, c.left)
	}
	return ce
}

func withTTL(r record, ttl time.Duration, bootID string, now int64) record {
	r.TTL, r.BootID, r.Expiry = 0, "", 0
	if ttl > 0 {
		r.TTL, r.BootID = ttl, bootID
		r.Expiry = math.MaxInt64
		if int64(ttl) < math.MaxInt64-now {
			r.Expiry = now + int64(ttl)
		}
	}
	return r
}

func entryOf(r record, left time.Duration) backends.Entry {
	return backends.Entry{
		Key: r.Key, Value: r.Value, Revision: r.Revision, CreateRevision: r.CreateRevision,
		TTL: r.TTL, Remaining: left,
	}
}

// diskSlots is how many writes of one Store write and fsync their temp
// files at once. The others wait for a turn, in the order they came. Small
// writes to one directory contend for its lock and for the filesystem's
// journal: run all at once they all finish late, while in turns half of
// them finish in about half the time. Measured on ext4 with a graceful
// leave of a shard member (64 shards released by one process and taken by
// three others, six interleaved runs), two turns brought the median
// handover from 107 to 66 ms, and the time until all 64 were taken from
// 150 to 101 ms; one turn or four did worse than two. Measured again once
// the directory fsyncs had left the turns (five interleaved runs each), one
// turn did worse with the members in one process (49–65 against 32–47 ms),
// four the same as two and eight worse with a process per member (40–69
// and 67–80 against 41–62 ms). A write never holds a turn while it waits
// for a key's lock, and never waits for a turn while it holds one.
const diskSlots = 2

// maxAttempts bounds how often a write decides again because its key's file
// changed between its decision and its turn under the lock.
const maxAttempts = 8

// update is every conditional write. It holds the key's operation lock only
// for what must be atomic, so that a writer stopped in its slow part (the
// temp file's fsync, the directory's) blocks no other writer of the key:
//
//  1. Without the lock, it reads the key's file and lets decide compute the
//     next record; it writes that record to a temp file of its own and
//     fsyncs it (prepare).
//  2. Under the lock, it reads the file again and decides again on what it
//     reads, with the clock read under the lock. A conflict is returned
//     from there, exactly as if the whole write ran under the lock. If the
//     file is byte for byte the one it decided on, the prepared record is
//     still the right next state (the same condition holds now; only its
//     expiry was computed at the earlier reading, which ends it sooner,
//     never later), and it renames the temp file over the key's file. If the
//     file changed, it unlocks, drops the temp file and starts over, at most
//     maxAttempts times.
//  3. After unlocking, it waits until a directory fsync begun after its
//     rename has ended (durable), then returns.
//
// The temp file's write and fsync (step 1) wait for a turn at the disk
// (diskSlots); a write whose context ends while it waits for its turn gives
// up, having written nothing. The directory fsync (step 3) is waited for
// whatever the context says, since the rename is done by then, and it
// waits for no turn: a write whose rename is visible, and which a new
// owner may already be acting on, is not held back behind the temp files
// of the writes queued after it.
//
// Renames happen only under the lock and only onto the state they were
// decided on, so the key's states form one sequence in which every write's
// condition held when it took effect: writes are linearizable per key, and
// revisions never go back. The directory fsync after the unlock may find a
// later writer's rename already made; it then makes that newer state
// durable, which holds this write's state among its history, never an older
// one: a directory fsync persists every rename done in the directory before
// it, in order.
func (s *Store) update(ctx context.Context, op, key string, decide func(state) (record, error)) (backends.Entry, error) {
	if err := s.usable(ctx, op, key); err != nil {
		return backends.Entry{}, err
	}
	fail := func(err error) (backends.Entry, error) {
		return backends.Entry{}, fmt.Errorf("filestore: %s %q: %w", op, key, err)
	}
	if s.readOnly {
		return fail(fmt.Errorf("store opened read-only: %w", backends.ErrPermission))
	}
	off := lockOffset(key)
	for range maxAttempts {
		// Decide and prepare without the lock.
		raw, r, found, err := s.readKey(key, nil, record{})
		if err != nil {
			return fail(err)
		}
		var tmp *tempFile
		next, derr := decide(s.stateOf(key, r, found))
		if derr == nil {
			next.History = nextHistory(next, r, found)
			select {
			case s.disk <- struct{}{}:
			case <-ctx.Done():
				return fail(ctx.Err())
			}
			tmp, err = s.prepare(off, next)
			<-s.disk
			if err != nil {
				return fail(err)
			}
		}

		// Check and rename under the lock.
		l, err := s.lock(ctx, off)
		if err != nil {
			tmp.discard()
			return fail(fsError(err))
		}
		var start time.Time
		if lockHeldHook != nil {
			start = s.wall.Now()
		}
		done, cur, err := s.commit(key, raw, r, tmp, decide)
		l.unlock()
		if h := lockHeldHook; h != nil {
			h(s.wall.Since(start))
		}
		if err != nil || !done {
			tmp.discard()
		}
		switch {
		case errors.As(err, new(*backends.ConflictError)):
			return backends.Entry{}, fmt.Errorf("filestore: %w", err)
		case err != nil:
			return fail(err)
		case !done:
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
			continue
		}

		// Make the rename durable before acknowledging it. The rename is
		// done, so the wait does not end with ctx.
		if err := s.durable(); err != nil {
			// The new file is in place and visible, but may not survive a
			// power loss: the outcome is unknown, so the error is transient.
			return fail(&backends.ClassError{Class: backends.ClassTransient,
				Err: fmt.Errorf("written but not yet durable: %w", err)})
		}
		_, left := s.judge.live(next, cur.now)
		return entryOf(next, left), nil
	}
	// Every attempt found the file changed since its decision: other writers
	// keep the key busy. Nothing was written.
	return fail(&backends.ClassError{Class: backends.ClassTransient,
		Err: fmt.Errorf("key's file changed under %d attempts in a row: %w", maxAttempts, errContended)})
}

// errContended is why a write gave up on a key other writers kept changing.
var errContended = errors.New("contended")

// commit is the part of a write done under the key's lock: it reads the
// key's file and decides again on it (a conflict is returned as the error).
// If the file is the one the write decided on (raw, which decoded to prev)
// and tmp holds the prepared record, it renames tmp over the key's file and
// done is true.
// Otherwise done is false and nothing was written.
func (s *Store) commit(key string, raw []byte, prev record, tmp *tempFile, decide func(state) (record, error)) (done bool, cur state, err error) {
	raw1, r, found, err := s.readKey(key, raw, prev)
	if err != nil {
		return false, state{}, err
	}
	cur = s.stateOf(key, r, found)
	// The decision under the lock rules: a conflict now is the write's
	// outcome, whatever was decided before.
	if _, err := decide(cur); err != nil {
		return false, cur, err
	}
	if tmp == nil || !bytes.Equal(raw1, raw) {
		return false, cur, nil
	}
	atStep(stepBeforeRename)
	if err := tmp.renameTo(filepath.Join(s.dir, fileName(key))); err != nil {
		return false, cur, err
	}
	atStep(stepAfterRename)
	return true, cur, nil
}

// stateOf is what a write decides on: the key's file as read, judged now.
func (s *Store) stateOf(key string, r record, found bool) state {
	cur := state{key: key, rec: r, found: found, now: s.judge.now()}
	if found {
		cur.live, cur.left = s.judge.live(r, cur.now)
	}
	return cur
}

// nextHistory is the history the file written for next keeps, given the
// file r it replaces (if found).
func nextHistory(next, r record, found bool) []record {
	switch {
	case !found:
		return nil
	case next.Revision != r.Revision || next.Deleted != r.Deleted:
		return history(r) // a new state: the old one joins the history
	default:
		return r.History // a keep-alive: same state, same history
	}
}

// tempFile is a write's prepared record: a temp file in the store directory,
// written and fsynced, kept open with a write lock on its first byte. The
// lock tells cleanTemps that its writer is alive (see cleanTemps).
type tempFile struct {
	f    *os.File
	path string
}

// prepare writes r to a fresh temp file for a write under the lock at off
// and fsyncs it. It takes no operation lock.
func (s *Store) prepare(off int64, r record) (*tempFile, error) {
	data := encodeRecord(r)
	atStep(stepBeforeTempWrite)
	t, err := s.createTemp(off)
	if err != nil {
		return nil, err
	}
	if _, err := t.f.Write(data); err != nil {
		t.discard()
		return nil, fsError(err)
	}
	atStep(stepAfterTempWrite)
	if err := t.f.Sync(); err != nil {
		t.discard()
		return nil, fsError(err)
	}
	atStep(stepAfterTempSync)
	return t, nil
}

// createTemp creates an empty temp file and takes its lock. A cleaner may
// open the new file between its creation and the lock, find it unlocked and
// remove it: then the lock fails (the cleaner holds its own) or the file is
// found unlinked, and createTemp tries a new name, a few times.
func (s *Store) createTemp(off int64) (*tempFile, error) {
	for range maxAttempts {
		path := filepath.Join(s.dir, tempName(off, rand.Uint64()))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, fsError(err)
		}
		t := &tempFile{f: f, path: path}
		ok, err := tryLock(int(f.Fd()), unix.F_WRLCK, 0)
		if err == nil && ok {
			var st unix.Stat_t
			if err = unix.Fstat(int(f.Fd()), &st); err == nil && st.Nlink > 0 {
				return t, nil
			}
		}
		t.discard()
		if err != nil {
			return nil, fsError(err)
		}
	}
	return nil, &backends.ClassError{Class: backends.ClassTransient,
		Err: fmt.Errorf("temp files removed by cleaners under %d attempts in a row: %w", maxAttempts, errContended)}
}

// renameTo makes the temp file the file at path and closes it (which
// releases its lock). Readers see the old file or the new one, never a part
// of it.
func (t *tempFile) renameTo(path string) error {
	if err := os.Rename(t.path, path); err != nil {
		return fsError(err)
	}
	t.f.Close() // written and fsynced: closing reports nothing more
	t.f = nil
	return nil
}

// discard removes the temp file, then closes it, so that no cleaner removes
// it first. It does nothing on nil or on a file already renamed.
func (t *tempFile) discard() {
	if t == nil || t.f == nil {
		return
	}
	os.Remove(t.path)
	t.f.Close()
	t.f = nil
}

// dirSync runs a Store's directory fsyncs one at a time, each for every
// write whose rename was done before it began. The zero value is ready.
type dirSync struct {
	mu      sync.Mutex
	running bool          // a fsync runs; guarded by mu
	begun   uint64        // fsyncs begun; guarded by mu
	done    uint64        // fsyncs ended, which end in the order they begin; guarded by mu
	failed  uint64        // the last of them that failed, 0 if none; guarded by mu
	err     error         // its error; guarded by mu
	ended   chan struct{} // made when a fsync begins, closed when it ends; guarded by mu
}

// durable returns once a fsync of the directory that began after it was
// called has ended (see dirSync.wait). Called after a rename, it makes the
// rename durable: a directory fsync persists every rename done in the
// directory before it.
func (s *Store) durable() error {
	return s.dirSync.wait(func() error { return s.syncDir(stepBeforeDirSync) })
}

// wait returns once a call of sync that began after wait was called has
// ended; it fails if that call, or one that ended after it before wait
// returned, failed. The calls run one at a time, so one serves every wait
// that began before it, and a wait lasts at most for the call in progress
// and one more. A call that fails fails every wait it was for, even if a
// later one succeeds: after a failed fsync the kernel may report the next
// one clean without having written what the failed one lost.
func (d *dirSync) wait(sync func() error) error {
	d.mu.Lock()
	need := d.begun + 1 // one that begins from now on
	for d.done < need {
		if d.running {
			ended := d.ended
			d.mu.Unlock()
			<-ended
			d.mu.Lock()
			continue
		}
		d.running, d.ended = true, make(chan struct{})
		d.begun++
		n := d.begun
		d.mu.Unlock()
		err := sync()
		d.mu.Lock()
		d.running, d.done = false, n
		if err != nil {
			d.failed, d.err = n, err
		}
		close(d.ended)
		d.ended = nil
	}
	var err error
	if d.failed >= need {
		err = d.err
	}
	d.mu.Unlock()
	return err
}

// syncDir makes the directory's entries durable. at names the write step it
// is, if any.
func (s *Store) syncDir(at step) error {
	d, err := os.Open(s.dir)
	if err != nil {
		return fsError(err)
	}
	defer d.Close()
	if at != "" {
		atStep(at)
	}
	if err := d.Sync(); err != nil {
		return fsError(err)
	}
	return nil
}

// readKey reads key's canonical file: its bytes and what they decode to.
// found is false if it has none. If the bytes are last, which decoded to
// rec when read before, it returns rec without decoding them again.
func (s *Store) readKey(key string, last []byte, rec record) ([]byte, record, bool, error) {
	name := fileName(key)
	raw, r, found, err := s.readRaw(name, last, rec)
	if err == nil && found && r.Key != key {
		return nil, record{}, false, s.corruptFile(name, corruptf("holds key %q, not %q", r.Key, key))
	}
	return raw, r, found, err
}

// readFile reads and decodes the canonical file name and checks that it
// holds the key the name belongs to.
func (s *Store) readFile(name string) (record, bool, error) {
	_, r, found, err := s.readRaw(name, nil, record{})
	return r, found, err
}

// readRaw is readFile that also returns the file's bytes, and that returns
// rec if they are last (see readKey).
func (s *Store) readRaw(name string, last []byte, rec record) ([]byte, record, bool, error) {
	b, err := readLimited(filepath.Join(s.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		if _, derr := os.Stat(s.dir); derr != nil {
			return nil, record{}, false, fsError(derr)
		}
		return nil, record{}, false, nil
	}
	if err != nil {
		return nil, record{}, false, fsError(err)
	}
	if last != nil && bytes.Equal(b, last) {
		return b, rec, true, nil
	}
	r, err := decodeRecord(b)
	if err != nil {
		return nil, record{}, false, s.corruptFile(name, err)
	}
	if fileName(r.Key) != name {
		return nil, record{}, false, s.corruptFile(name, corruptf("holds key %q, whose file is %s", r.Key, fileName(r.Key)))
	}
	return b, r, true, nil
}

func readLimited(path string) ([]byte, error) {
	// Plain system calls rather than package os: a read is two of them
	// fewer (os checks the file's type, and reads again to see its end),
	// and every write reads its key twice and every watch each change.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	// A key's file is never written in place (writes replace it), so its
	// size is known: read it in one buffer. One byte over the limit is
	// enough for decodeRecord to report the size.
	b := make([]byte, min(st.Size, maxFileBytes+1))
	for n := 0; n < len(b); {
		m, err := unix.Read(fd, b[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			return b[:n], nil // shorter than its size said: decodeRecord refuses it
		}
		n += m
	}
	return b, nil
}

// CorruptFileError reports a file in the store directory that is not what
// the store wrote there: truncated, corrupted, of another format or version,
// or holding another key. It wraps backends.ErrCorrupt. The store never
// treats such a key as absent; an operator must inspect Path.
type CorruptFileError struct {
	Path string
	Err  error // wraps backends.ErrCorrupt
}

func (e *CorruptFileError) Error() string { return fmt.Sprintf("file %s: %v", e.Path, e.Err) }
func (e *CorruptFileError) Unwrap() error { return e.Err }

func (s *Store) corruptFile(name string, err error) error {
	return &CorruptFileError{Path: filepath.Join(s.dir, name), Err: err}
}

// fsError classifies a filesystem error for backends.Classify: no permission
// (or a read-only filesystem) is ErrPermission, a vanished directory is
// ErrMissingResource, both fatal; a full disk or quota is transient, because
// the write did not happen, nothing the store holds is damaged, and the
// condition clears when space is freed: a holder retries until its deadline
// and no longer, which never extends its leadership. Anything else is left
// to Classify (transient: outcome unknown).
func fsError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM), errors.Is(err, unix.EROFS):
		return fmt.Errorf("%w: %w", backends.ErrPermission, err)
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%w: %w", backends.ErrMissingResource, err)
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return &backends.ClassError{Class: backends.ClassTransient, Err: fmt.Errorf("no space: %w", err)}
	}
	return err
}

func (s *Store) readDirNames() ([]string, error) {
	d, err := os.Open(s.dir)
	if err != nil {
		return nil, fsError(err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fsError(err)
	}
	return names, nil
}

// cleanTemps removes the temp files among names whose writers are gone.
// A writer holds a write lock on its temp file from its creation until it
// renames or removes it, and the kernel drops that lock when the writer dies.
// A temp file is removed only under its key's operation lock (the key is
// known by the lock offset in the temp file's name) and only once a lock on
// the temp file itself can be taken: so a live writer's temp file, prepared
// or about to be renamed, is never touched, and one whose writer died at any
// step is removed. Errors are ignored: cleaning is opportunistic, and it
// stops when ctx is done.
func (s *Store) cleanTemps(ctx context.Context, names []string) {
	for _, name := range names {
		if ctx.Err() != nil {
			return
		}
		off, err := tempOffset(name)
		if err != nil {
			continue
		}
		l, err := s.tryLockAt(off)
		if err != nil || l == nil {
			continue
		}
		removeOrphan(filepath.Join(s.dir, name))
		l.unlock()
	}
}

// removeOrphan removes the temp file at path if no writer holds its lock.
// The read lock it tests with needs only a read-only descriptor.
func removeOrphan(path string) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if ok, err := tryLock(fd, unix.F_RDLCK, 0); err == nil && ok {
		os.Remove(path)
	}
}
