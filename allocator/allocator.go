package allocator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/tenure-go/tenure/backends"
)

// need is what the allocator requires of a store: conditional creates,
// revision bumps, conditional deletes, renewable references and a watch for
// the cache.
const need = backends.CapCreateIfAbsent | backends.CapCompareAndSet |
	backends.CapCompareAndDelete | backends.CapKeepAlive | backends.CapWatch

// maxAttempts bounds the retries of one Allocate against concurrent writers.
const maxAttempts = 64

// Store key layout under Config.Prefix.
const (
	idDir    = "id/"    // id/<n>            -> key   (the master: n is taken)
	keyDir   = "key/"   // key/<key>         -> "n" or "n pending" (the index)
	valueDir = "value/" // value/<key>/<mbr> -> "n"   (one member's reference)
)

// EventKind says what happened to a mapping.
type EventKind int

const (
	// EventCreated reports that key now maps to ID.
	EventCreated EventKind = iota + 1
	// EventDeleted reports that key no longer maps to ID (garbage collection
	// removed it).
	EventDeleted
)

func (k EventKind) String() string {
	switch k {
	case EventCreated:
		return "created"
	case EventDeleted:
		return "deleted"
	}
	return fmt.Sprintf("event(%d)", int(k))
}

// Event is one change of the cluster-wide mapping, as the watch saw it.
type Event struct {
	Kind EventKind
	ID   uint64
	Key  string
}

// Allocator hands out cluster-wide numeric IDs for keys. It is safe for
// concurrent use. It runs three goroutines (watch, renewal, garbage
// collection) from New until Close, which joins them; an Allocator must be
// closed and cannot be reused after Close.
type Allocator struct {
	store   backends.Store
	watcher backends.Watcher
	cfg     Config
	member  string // Config.Member + "~" + nonce: this instance's reference suffix

	bg     context.Context // ends at Close; parent of the background loops
	cancel context.CancelFunc
	wg     sync.WaitGroup // the background loops
	ops    sync.WaitGroup // Allocate and Release calls past lock, until unpin

	mu     sync.Mutex
	closed bool            // guarded by mu
	local  map[string]*use // guarded by mu: keys this process uses or is acquiring

	cmu   sync.RWMutex
	keys  map[string]cached // guarded by cmu: the watched index, key -> entry
	ids   map[uint64]string // guarded by cmu: id -> key, for every indexed key
	gcmu  chan struct{}     // one garbage collection pass at a time
	cands map[string]cand   // guarded by gcmu: entries seen unreferenced
}

// use is this process's use of one key.
type use struct {
	// sem serializes the slow paths (store I/O) of one key in this process.
	// It is a channel so that waiting for it honours ctx.
	sem chan struct{}

	// guarded by Allocator.mu:
	count int            // local uses; 0 while being acquired or released
	pins  int            // callers holding or waiting for sem
	id    uint64         // valid while count > 0
	ref   backends.Entry // this member's reference entry, valid while count > 0
}

// cached is one index entry as the watch last saw it.
type cached struct {
	id    uint64
	ready bool
	rev   int64
}

// New returns an Allocator over store. It fails with an error wrapping
// backends.ErrInvalid for a bad cfg and with one wrapping
// backends.ErrUnsupported if store does not enforce create-if-absent,
// compare-and-set, compare-and-delete and keep-alive or cannot watch.
func New(store backends.Store, cfg Config) (*Allocator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := backends.Require(store, need); err != nil {
		return nil, fmt.Errorf("allocator: new: %w", err)
	}
	var nonce [6]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("allocator: new: member nonce: %w", err)
	}
	cfg = cfg.withDefaults()
	a := &Allocator{
		store:   store,
		watcher: store.(backends.Watcher),
		cfg:     cfg,
		member:  cfg.Member + "~" + hex.EncodeToString(nonce[:]),
		local:   make(map[string]*use),
		keys:    make(map[string]cached),
		ids:     make(map[uint64]string),
		gcmu:    make(chan struct{}, 1),
		cands:   make(map[string]cand),
	}
	if err := backends.ValidateKey(a.refKey("k")); err != nil {
		return nil, fmt.Errorf("allocator: new: prefix and member too long: %w", err)
	}
	a.bg, a.cancel = context.WithCancel(context.Background())
	a.wg.Add(2)
	go a.watchLoop()
	go a.renewLoop()
	if cfg.GCInterval > 0 {
		a.wg.Add(1)
		go a.gcLoop()
	}
	return a, nil
}

func (a *Allocator) idKey(n uint64) string    { return a.cfg.Prefix + idDir + strconv.FormatUint(n, 10) }
func (a *Allocator) indexKey(k string) string { return a.cfg.Prefix + keyDir + k }
func (a *Allocator) refKey(k string) string {
	return a.cfg.Prefix + valueDir + k + "/" + a.member
}

// checkKey refuses keys whose store keys would be refused.
func (a *Allocator) checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("empty key: %w", backends.ErrInvalid)
	}
	return backends.ValidateKey(a.refKey(key))
}

func encodeIndex(n uint64, ready bool) []byte {
	v := strconv.FormatUint(n, 10)
	if !ready {
		v += " pending"
	}
	return []byte(v)
}

func decodeIndex(v []byte) (n uint64, ready bool, err error) {
	s, pending := strings.CutSuffix(string(v), " pending")
	n, err = strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, false, fmt.Errorf("index value %q: %w", v, backends.ErrCorrupt)
	}
	return n, !pending, nil
}

// Allocate returns the ID of key, allocating one if key has none, and
// counts one more local use of it. isNew reports that this call took a
// fresh ID for key. A key this process already uses is answered from
// memory; otherwise Allocate writes this member's reference entry, which
// keeps the ID from garbage collection until the last local use is
// released (or this process stops renewing it for TTL).
//
// Errors wrap ErrNoIDs when [Min, Max] is full, backends.ErrInvalid for a
// key the store cannot hold, backends.ErrClosed after Close, or the store's
// error.
func (a *Allocator) Allocate(ctx context.Context, key string) (id uint64, isNew bool, err error) {
	a.mu.Lock()
	if u := a.local[key]; u != nil && u.count > 0 {
		u.count++
		id = u.id
		a.mu.Unlock()
		return id, false, nil
	}
	a.mu.Unlock()
	if err := a.checkKey(key); err != nil {
		return 0, false, fmt.Errorf("allocator: allocate %q: %w", key, err)
	}
	u, err := a.lock(ctx, key)
	if err != nil {
		return 0, false, fmt.Errorf("allocator: allocate %q: %w", key, err)
	}
	defer a.unlock(key, u)

	a.mu.Lock()
	if u.count > 0 {
		u.count++
		id = u.id
		a.mu.Unlock()
		return id, false, nil
	}
	a.mu.Unlock()

	id, isNew, ref, err := a.acquire(ctx, key, 0, backends.Entry{})
	if err != nil {
		return 0, false, fmt.Errorf("allocator: allocate %q: %w", key, err)
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		a.drop(ref)
		return 0, false, fmt.Errorf("allocator: allocate %q: %w", key, backends.ErrClosed)
	}
	u.count, u.id, u.ref = 1, id, ref
	a.mu.Unlock()
	return id, isNew, nil
}

// lock pins key's use record and takes its slow-path semaphore.
func (a *Allocator) lock(ctx context.Context, key string) (*use, error) {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil, backends.ErrClosed
	}
	u := a.local[key]
	if u == nil {
		u = &use{sem: make(chan struct{}, 1)}
		a.local[key] = u
	}
	u.pins++
	a.ops.Add(1) // under mu while not closed: Close waits for every such call
	a.mu.Unlock()
	select {
	case u.sem <- struct{}{}:
		return u, nil
	case <-ctx.Done():
		a.unpin(key, u)
		return nil, ctx.Err()
	}
}

func (a *Allocator) unlock(key string, u *use) {
	<-u.sem
	a.unpin(key, u)
}

func (a *Allocator) unpin(key string, u *use) {
	defer a.ops.Done()
	a.mu.Lock()
	defer a.mu.Unlock()
	u.pins--
	if u.pins == 0 && u.count == 0 && a.local[key] == u {
		delete(a.local, key)
	}
}

// acquire runs the allocation protocol for key (see the package doc) and
// returns the ID, whether this call created its master, and this member's
// reference entry. If want is not 0, acquire only re-establishes a
// reference to want and fails with errLost if key no longer maps to it.
// ref is a reference entry of this member already in the store, if any.
func (a *Allocator) acquire(ctx context.Context, key string, want uint64, ref backends.Entry) (id uint64, isNew bool, _ backends.Entry, err error) {
	q := &acquisition{key: key, idx: a.indexKey(key), want: want, ref: ref}
	defer func() {
		if err != nil && q.ref.Revision > 0 {
			a.drop(q.ref)
		}
		if err != nil && q.wrote > 0 {
			a.drop(backends.Entry{Key: q.idx, Revision: q.wrote})
		}
	}()
	if c, ok := a.cachedIndex(key); ok {
		q.e, q.have = backends.Entry{Key: q.idx, Value: encodeIndex(c.id, c.ready), Revision: c.rev}, true
	}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if !q.have {
			again, err := a.readIndex(ctx, q)
			if err != nil {
				return 0, false, q.ref, err
			}
			if again {
				continue
			}
		}
		n, ready, err := decodeIndex(q.e.Value)
		if err != nil {
			return 0, false, q.ref, err
		}
		if want != 0 && (n != want || !ready) {
			return 0, false, q.ref, errLost
		}
		if !ready {
			again, err := a.takeMaster(ctx, q, n)
			if err != nil {
				return 0, false, q.ref, err
			}
			if again {
				continue
			}
		}
		done, err := a.confirm(ctx, q, n)
		if err != nil {
			return 0, false, q.ref, err
		}
		if done {
			return n, q.created == n, q.ref, nil
		}
	}
	return 0, false, q.ref, fmt.Errorf("gave up after %d attempts against concurrent writers: %w", maxAttempts, backends.ErrConflict)
}

// acquisition is what one acquire call knows across its attempts.
type acquisition struct {
	key, idx string
	want     uint64          // the ID the key must still map to; 0 for any
	e        backends.Entry  // the index as this call last read or wrote it
	have     bool            // e is the index as far as this call knows
	taken    map[uint64]bool // IDs this call found taken by other keys
	listed   bool            // taken holds every master in the store
	created  uint64          // the master this call created, if any
	wrote    int64           // revision of this call's last pending index write
	ref      backends.Entry  // this call's reference, once written
}

// indexRefused records in q what a conditional write of the index that
// failed with err tells: the index a conflict carries, or, from a conflict
// without it, that the index must be read again. Any other error is
// returned.
func (q *acquisition) indexRefused(err error) error {
	if cur, ok := current(err); ok {
		q.e = cur
		return nil
	}
	if errors.Is(err, backends.ErrConflict) {
		q.have = false
		return nil
	}
	return err
}

// readIndex reads the key's index into q or, if it is absent and any ID
// will do, creates it pointing at a free ID, not ready yet. again is true
// when the attempt must start over with the index a refused create found.
func (a *Allocator) readIndex(ctx context.Context, q *acquisition) (again bool, _ error) {
	got, err := a.store.Get(ctx, q.idx)
	switch {
	case err == nil:
		q.e, q.have = got, true
		return false, nil
	case !errors.Is(err, backends.ErrNotFound):
		return false, err
	case q.want != 0:
		return false, errLost
	}
	n, err := a.pick(ctx, q.key, q.taken, &q.listed)
	if err != nil {
		return false, err
	}
	got, err = a.store.CreateIfAbsent(ctx, q.idx, encodeIndex(n, false), 0)
	if cur, ok := current(err); ok {
		q.e, q.have = cur, true
		return true, nil
	} else if err != nil {
		return false, err
	}
	q.e, q.have, q.wrote = got, true, got.Revision
	return false, nil
}

// takeMaster takes or confirms the master of n for the key before the
// index may say ready: the write changes the master's revision, so a
// collector that read it before the index pointed here cannot delete it.
// If n belongs to another key, it points the index at another free ID.
// again is true when the attempt must start over.
func (a *Allocator) takeMaster(ctx context.Context, q *acquisition, n uint64) (again bool, _ error) {
	mk := a.idKey(n)
	_, err := a.store.CreateIfAbsent(ctx, mk, []byte(q.key), 0)
	if err == nil {
		q.created = n
		return false, nil
	}
	cur, ok := current(err)
	if !ok {
		if !errors.Is(err, backends.ErrConflict) {
			return false, err
		}
		return false, nil
	}
	if string(cur.Value) == q.key {
		_, err = a.store.CompareAndSet(ctx, mk, cur.Revision, []byte(q.key), 0)
		if err != nil && !errors.Is(err, backends.ErrConflict) {
			return false, err
		}
		return err != nil, nil // on a conflict the master changed under us: look again
	}
	// n belongs to another key: point the index elsewhere.
	if q.taken == nil {
		q.taken = make(map[uint64]bool)
	}
	q.taken[n] = true
	m, err := a.pick(ctx, q.key, q.taken, &q.listed)
	if err != nil {
		return false, err
	}
	moved, err := a.store.CompareAndSet(ctx, q.idx, q.e.Revision, encodeIndex(m, false), 0)
	if err == nil {
		q.e, q.wrote = moved, moved.Revision
		return true, nil
	}
	return true, q.indexRefused(err)
}

// confirm writes the key's reference to n, then bumps the index's revision
// marking it ready: a collector that read the index before the bump cannot
// delete the reference, and one that reads it after sees it. done is true
// once the index is ready; false when the attempt must start over.
func (a *Allocator) confirm(ctx context.Context, q *acquisition, n uint64) (done bool, err error) {
	q.ref, err = a.writeRef(ctx, q.key, n, q.ref)
	if err != nil {
		return false, err
	}
	bumped, err := a.store.CompareAndSet(ctx, q.idx, q.e.Revision, encodeIndex(n, true), 0)
	if err == nil {
		a.noteIndex(q.key, bumped)
		return true, nil
	}
	return false, q.indexRefused(err)
}

// errLost: a reference could not be re-established because the key no
// longer maps to the ID it had.
var errLost = errors.New("key no longer maps to its id")

// current returns the entry a conflict error carries, if it carries one.
func current(err error) (backends.Entry, bool) {
	var ce *backends.ConflictError
	if errors.As(err, &ce) && ce.Found {
		return ce.Current, true
	}
	return backends.Entry{}, false
}

// writeRef makes this member's reference for key hold n and returns it.
func (a *Allocator) writeRef(ctx context.Context, key string, n uint64, ref backends.Entry) (backends.Entry, error) {
	val := []byte(strconv.FormatUint(n, 10))
	rk := a.refKey(key)
	for range 3 {
		if ref.Revision > 0 && string(ref.Value) == string(val) {
			return ref, nil
		}
		var (
			got backends.Entry
			err error
		)
		if ref.Revision == 0 {
			got, err = a.store.CreateIfAbsent(ctx, rk, val, a.cfg.TTL)
		} else {
			got, err = a.store.CompareAndSet(ctx, rk, ref.Revision, val, a.cfg.TTL)
		}
		if err == nil {
			return got, nil
		}
		if cur, ok := current(err); ok {
			ref = cur // ours from an earlier use whose delete failed: overwrite
			ref.Value = nil
			continue
		}
		if errors.Is(err, backends.ErrConflict) {
			ref = backends.Entry{} // expired: create again
			continue
		}
		return backends.Entry{}, err
	}
	return backends.Entry{}, fmt.Errorf("write reference %q: %w", rk, backends.ErrConflict)
}

// drop deletes an entry this call wrote and no longer needs, bounded by
// one TTL. One it cannot delete lapses (a reference) or is collected (a
// pending index entry).
func (a *Allocator) drop(ref backends.Entry) {
	ctx, cancel := a.cfg.Clock.WithTimeout(context.Background(), a.cfg.TTL)
	defer cancel()
	if err := a.store.CompareAndDelete(ctx, ref.Key, ref.Revision); err != nil && backends.Classify(err) != backends.ClassLost {
		a.cfg.Logger.Warn("allocator: entry not deleted; it lapses or is collected", "key", ref.Key, "rev", ref.Revision, "err", err)
	}
}

// pick chooses an ID for key that is neither in the cache nor in taken.
// When none is left it lists every master once (setting *listed) and looks
// again among the IDs no master holds; if there is none, the range is
// full. An ID whose master or cached index names key itself counts as
// free: the allocation adopts that master by bumping its revision.
func (a *Allocator) pick(ctx context.Context, key string, taken map[uint64]bool, listed *bool) (uint64, error) {
	if n, ok := a.probe(key, taken, !*listed); ok {
		return n, nil
	}
	if *listed {
		return 0, ErrNoIDs
	}
	ms, err := a.store.List(ctx, a.cfg.Prefix+idDir)
	if err != nil {
		return 0, err
	}
	*listed = true
	for _, m := range ms {
		if string(m.Value) == key {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimPrefix(m.Key, a.cfg.Prefix+idDir), 10, 64); err == nil {
			if taken == nil {
				taken = make(map[uint64]bool)
			}
			taken[n] = true
		}
	}
	if n, ok := a.probe(key, taken, false); ok {
		return n, nil
	}
	return 0, ErrNoIDs
}

// probeLimit bounds one scan for a free ID.
const probeLimit = 1 << 20

// probe scans from a random point of [Min, Max] for an ID not in taken
// (and, if useCache, not cached as another key's).
func (a *Allocator) probe(key string, taken map[uint64]bool, useCache bool) (uint64, bool) {
	lo, hi := a.cfg.Min, a.cfg.Max
	span := hi - lo // size - 1
	var off uint64
	if span == ^uint64(0) {
		off = mrand.Uint64()
	} else {
		off = mrand.Uint64N(span + 1)
	}
	a.cmu.RLock()
	defer a.cmu.RUnlock()
	for i := uint64(0); i <= span && i < probeLimit; i++ {
		n := lo + (off+i)%(span+1)
		if span == ^uint64(0) {
			n = lo + off + i
		}
		if n == 0 || taken[n] {
			continue
		}
		if k, used := a.ids[n]; useCache && used && k != key {
			continue
		}
		return n, true
	}
	return 0, false
}

// Release counts one local use of key less. The last local use deletes
// this member's reference entry and returns lastUse true; the ID then stays
// key's while any other member references it, and returns to the pool once
// none has for Grace. Releasing a key this process does not use is an error
// wrapping backends.ErrNotFound. If the delete fails, the error is returned,
// the use is gone all the same and the reference lapses after TTL.
func (a *Allocator) Release(ctx context.Context, key string) (lastUse bool, err error) {
	a.mu.Lock()
	if u := a.local[key]; u != nil && u.count > 1 {
		u.count--
		a.mu.Unlock()
		return false, nil
	}
	a.mu.Unlock()
	u, err := a.lock(ctx, key)
	if err != nil {
		return false, fmt.Errorf("allocator: release %q: %w", key, err)
	}
	defer a.unlock(key, u)
	a.mu.Lock()
	switch {
	case u.count == 0:
		a.mu.Unlock()
		return false, fmt.Errorf("allocator: release %q: not in use here: %w", key, backends.ErrNotFound)
	case u.count > 1:
		u.count--
		a.mu.Unlock()
		return false, nil
	}
	u.count = 0
	ref := u.ref
	a.mu.Unlock()
	if err := a.store.CompareAndDelete(ctx, ref.Key, ref.Revision); err != nil && backends.Classify(err) != backends.ClassLost {
		return true, fmt.Errorf("allocator: release %q: delete reference: %w", key, err)
	}
	return true, nil
}

// Get returns the ID of key without allocating: from this process's uses,
// the watched cache, or the store. A key with no ID is an error wrapping
// backends.ErrNotFound.
func (a *Allocator) Get(ctx context.Context, key string) (uint64, error) {
	a.mu.Lock()
	if u := a.local[key]; u != nil && u.count > 0 {
		id := u.id
		a.mu.Unlock()
		return id, nil
	}
	a.mu.Unlock()
	if c, ok := a.cachedIndex(key); ok && c.ready {
		return c.id, nil
	}
	if err := a.checkKey(key); err != nil {
		return 0, fmt.Errorf("allocator: get %q: %w", key, err)
	}
	e, err := a.store.Get(ctx, a.indexKey(key))
	if err != nil {
		return 0, fmt.Errorf("allocator: get %q: %w", key, err)
	}
	n, ready, err := decodeIndex(e.Value)
	if err != nil {
		return 0, fmt.Errorf("allocator: get %q: %w", key, err)
	}
	if !ready {
		return 0, fmt.Errorf("allocator: get %q: allocation in progress: %w", key, backends.ErrNotFound)
	}
	return n, nil
}

// GetByID returns the key id is allocated to, from the watched cache or the
// store. An unallocated id is an error wrapping backends.ErrNotFound.
func (a *Allocator) GetByID(ctx context.Context, id uint64) (string, error) {
	a.cmu.RLock()
	key, ok := a.ids[id]
	c := a.keys[key]
	a.cmu.RUnlock()
	if ok && c.ready && c.id == id {
		return key, nil
	}
	op := fmt.Sprintf("allocator: get by id \"%d\"", id)
	m, err := a.store.Get(ctx, a.idKey(id))
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	key = string(m.Value)
	e, err := a.store.Get(ctx, a.indexKey(key))
	if errors.Is(err, backends.ErrNotFound) {
		return "", fmt.Errorf("%s: master of %q is not indexed: %w", op, key, backends.ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	n, ready, err := decodeIndex(e.Value)
	if err != nil {
		return "", fmt.Errorf("%s: %w", op, err)
	}
	if n != id || !ready {
		return "", fmt.Errorf("%s: %q maps elsewhere: %w", op, key, backends.ErrNotFound)
	}
	return key, nil
}

// Close stops renewal, garbage collection and the watch, waits within ctx
// for them and for the Allocate and Release calls in flight (which then fail
// with an error wrapping backends.ErrClosed, deleting what they wrote), and
// then deletes this member's references (those it cannot delete lapse after
// TTL). Allocate and Release called afterwards fail with an error wrapping
// backends.ErrClosed. If ctx ends first, Close returns its error and leaves
// the rest to a later Close, which waits again and deletes what is left;
// once a Close has returned nil, Close returns nil. It does not close the
// store.
func (a *Allocator) Close(ctx context.Context) error {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	done := make(chan struct{})
	go func() {
		a.wg.Wait()
		a.ops.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("allocator: close: %w", ctx.Err())
	}
	a.mu.Lock()
	var refs []backends.Entry
	for _, u := range a.local {
		if u.count > 0 {
			refs = append(refs, u.ref)
			u.count = 0
		}
	}
	a.mu.Unlock()
	var errs []error
	for _, r := range refs {
		if err := a.store.CompareAndDelete(ctx, r.Key, r.Revision); err != nil && backends.Classify(err) != backends.ClassLost {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("allocator: close: %d references left to lapse: %w", len(errs), err)
	}
	return nil
}
