package etcd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/check"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultSharedBatch is how long KeepAlive calls on a shared lease wait, at
// most, to be answered together when WithSharedLease is given no interval.
const DefaultSharedBatch = 500 * time.Millisecond

// Store is a backends.Store over etcd. Keys live under the store's prefix;
// values are stored as they are. Revision is the etcd ModRevision and
// CreateRevision the etcd CreateRevision of the key. TTLs are etcd leases.
//
// A Store is safe for concurrent use. Close releases what it started
// (watches, the keep-alive stream, the shared-lease batcher, and the client
// if the store opened it); it deletes nothing and revokes no lease.
type Store struct {
	cli        *clientv3.Client
	ownsClient bool
	prefix     string
	clock      clock.Clock
	log        *slog.Logger
	minTTL     time.Duration

	shared *shared // nil unless WithSharedLease
	keeper keeper  // the stream of lease keep-alives

	// ctx is done when Close is called; watches, the keep-alive stream and
	// the batcher derive from it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the goroutines of watches, of the keep-alive stream and of the batcher

	// book is what the store knows of the entries it wrote with a TTL and
	// of its leases; Close marks the store closed under its mutex.
	book leaseBook

	// freed holds the etcd keys that a watch of this store (Watch) last
	// saw deleted, with no write of them seen since: a create of such a
	// key, made on that news (a follower woken by a release or an
	// expiry), most likely succeeds, and Txn sends its lease request
	// without checking the conditions first. A hint for cost only, never
	// for safety (the transaction decides); at most maxFreed keys.
	freedMu sync.Mutex
	freed   map[string]struct{} // guarded by freedMu
}

// maxFreed bounds Store.freed: a store that sees more keys deleted and not
// written again forgets them all, and its next creates check first.
const maxFreed = 1024

var (
	_ backends.Store   = (*Store)(nil)
	_ backends.Watcher = (*Store)(nil)
	_ backends.Txner   = (*Store)(nil)
	_ backends.Scanner = (*Store)(nil)
)

// Option configures a Store.
type Option func(*options)

type options struct {
	clock  clock.Clock
	log    *slog.Logger
	shared bool
	batch  time.Duration
}

// WithClock sets the clock the store schedules its batches and judges its
// shared entries by. The default is the system clock.
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sets the logger for what the store does on its own (deleting
// abandoned entries of a shared lease). The default discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithSharedLease makes every entry written with the same TTL share one etcd
// lease, and answers KeepAlive calls on those entries in batches: at most one
// batch per interval (DefaultSharedBatch if interval is not positive, and
// sooner for entries whose TTL is under four intervals or whose callers'
// deadlines need it), each costing one
// keep-alive whatever the number of entries (and a read for entries the
// store does not vouch for). See the package
// documentation for what changes.
func WithSharedLease(interval time.Duration) Option {
	return func(o *options) {
		o.shared = true
		o.batch = interval
	}
}

// New returns a Store over cli whose keys live under prefix (prefix + key
// is the etcd key; an empty prefix means the whole keyspace). The caller
// keeps ownership of cli: Close does not close it.
//
// New asks etcd for the shortest lease it grants (one Grant and one Revoke),
// so it fails if etcd cannot be reached before ctx is done.
func New(ctx context.Context, cli *clientv3.Client, prefix string, opts ...Option) (*Store, error) {
	return newStore(ctx, cli, false, prefix, opts)
}

func newStore(ctx context.Context, cli *clientv3.Client, owns bool, prefix string, opts []Option) (*Store, error) {
	if cli == nil {
		return nil, fmt.Errorf("etcd: new: nil client: %w", backends.ErrInvalid)
	}
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("etcd: new: prefix: %w", err)
	}
	o := options{clock: clock.New(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.clock == nil || o.log == nil {
		return nil, fmt.Errorf("etcd: new: nil clock or logger: %w", backends.ErrInvalid)
	}
	if o.batch <= 0 {
		o.batch = DefaultSharedBatch
	}
	s := &Store{
		cli:        cli,
		ownsClient: owns,
		prefix:     prefix,
		clock:      o.clock,
		log:        o.log,
		freed:      make(map[string]struct{}),
	}
	minTTL, err := s.probeMinTTL(ctx)
	if err != nil {
		return nil, err
	}
	s.minTTL = minTTL
	s.book.init(o.clock, o.log)
	s.keeper = newKeeper(s)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if o.shared {
		s.shared = newShared(s, o.batch)
		s.book.wake = s.shared.wake
		s.wg.Add(1)
		go s.shared.run()
	}
	return s, nil
}

// probeMinTTL grants the shortest lease there is and reads what etcd made of
// it: the server raises short TTLs to its minimum, ceil(1.5 × election
// timeout) in whole seconds.
func (s *Store) probeMinTTL(ctx context.Context) (time.Duration, error) {
	resp, err := s.cli.Grant(clientv3.WithRequireLeader(ctx), 1)
	if err != nil {
		return 0, s.fail("probe lease ttl", "", err)
	}
	// The probe lease carries no key; revoking it is tidiness, and if it
	// fails the lease simply expires.
	_, _ = s.cli.Revoke(clientv3.WithRequireLeader(ctx), resp.ID)
	return time.Duration(resp.TTL) * time.Second, nil
}

// Capabilities implements backends.Store. The shortest TTL is what the
// server granted when the store was created.
func (s *Store) Capabilities() backends.Capabilities {
	judge := "etcd server (per-entry lease)"
	if s.shared != nil {
		judge = "etcd server (a lease shared by the writing store's entries of one TTL; the writing store deletes entries not kept alive)"
	}
	return backends.Capabilities{
		Atomic: backends.CapCreateIfAbsent | backends.CapCompareAndSet | backends.CapCompareAndDelete |
			backends.CapKeepAlive | backends.CapWatch | backends.CapTxn,
		Scope:          backends.ScopeDistributed,
		ExpiryJudge:    judge,
		ExpiryEvents:   true, // etcd deletes the keys of an expired lease
		TTLGranularity: time.Second,
		MinTTL:         s.minTTL,
	}
}

// Prefix is the prefix of every etcd key the store uses.
func (s *Store) Prefix() string { return s.prefix }

// Close implements backends.Store. It stops the store's watches, its
// keep-alive stream and its shared-lease batcher and waits for them, and
// closes the client if the store made it (opened from a URL by
// storeurl.Open). It deletes nothing and revokes nothing: entries on a shared
// lease expire with that lease, which nobody keeps alive any more.
func (s *Store) Close() error {
	return s.book.closing.Close(&s.book.mu, func() error {
		s.cancel()
		s.wg.Wait()
		if s.ownsClient {
			if err := s.cli.Close(); err != nil {
				return fmt.Errorf("etcd: close client: %w", err)
			}
		}
		return nil
	})
}

func (s *Store) isClosed() bool { return s.book.closing.Closed() }

func (s *Store) checkOpen(op, key string) error {
	if s.isClosed() {
		return fmt.Errorf("etcd: %s %q: %w", op, key, backends.ErrClosed)
	}
	return nil
}

// opctx marks a request so that a member without a leader refuses it at once
// (ErrUnavailable) instead of letting it wait for the caller's deadline.
func opctx(ctx context.Context) context.Context { return clientv3.WithRequireLeader(ctx) }

// ttlSeconds converts a TTL to the whole seconds etcd keeps, rounding up:
// a longer TTL than asked is safe for the holder, whose deadline comes from
// the TTL it asked for; a shorter one never happens. check.TTL bounds it by
// backends.MaxTTL, far below the longest lease etcd grants (9e9 seconds).
func ttlSeconds(op, key string, ttl time.Duration) (int64, error) {
	if err := check.TTL(ttl); err != nil {
		return 0, fmt.Errorf("etcd: %s %q: %w", op, key, err)
	}
	return int64((ttl + time.Second - 1) / time.Second), nil
}

func seconds(n int64) time.Duration { return time.Duration(n) * time.Second }

// entry converts an etcd key-value to an Entry without TTL information.
func (s *Store) entry(kv *mvccpb.KeyValue) backends.Entry {
	return backends.Entry{
		Key:            string(kv.Key[len(s.prefix):]),
		Value:          kv.Value,
		Revision:       kv.ModRevision,
		CreateRevision: kv.CreateRevision,
	}
}

// leaseTTL is what etcd says about a lease.
type leaseTTL struct {
	granted, remaining time.Duration
	gone               bool // the lease expired or was revoked
}

// leaseTTLs asks etcd for the granted and remaining TTL of each distinct
// lease in ids (one request per lease, sent at once).
func (s *Store) leaseTTLs(ctx context.Context, ids []clientv3.LeaseID) (map[clientv3.LeaseID]leaseTTL, error) {
	var uniq []clientv3.LeaseID
	seen := make(map[clientv3.LeaseID]bool, len(ids))
	for _, id := range ids {
		if id != clientv3.NoLease && !seen[id] {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	ttls := make([]leaseTTL, len(uniq))
	errs := make([]error, len(uniq))
	if len(uniq) == 1 {
		ttls[0], errs[0] = s.leaseTTL(ctx, uniq[0])
	} else {
		// The leases are asked at once, at most leaseLookups at a time: a
		// listing of candidates or of a group's slots, each entry on a
		// lease of its own, waits for one round trip, not one per lease.
		sem := make(chan struct{}, leaseLookups)
		var wg sync.WaitGroup
		for i, id := range uniq {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				ttls[i], errs[i] = s.leaseTTL(ctx, id)
			})
		}
		wg.Wait()
	}
	out := make(map[clientv3.LeaseID]leaseTTL, len(uniq))
	for i, id := range uniq {
		if errs[i] != nil {
			return nil, errs[i]
		}
		out[id] = ttls[i]
	}
	return out, nil
}

// leaseLookups bounds the TimeToLive requests one listing has in flight.
const leaseLookups = 16

// leaseTTL asks etcd for the TTL of lease id.
func (s *Store) leaseTTL(ctx context.Context, id clientv3.LeaseID) (leaseTTL, error) {
	resp, err := s.cli.TimeToLive(opctx(ctx), id)
	switch {
	case isLeaseNotFound(err):
		return leaseTTL{gone: true}, nil
	case err != nil:
		return leaseTTL{}, err
	case resp.TTL < 0:
		return leaseTTL{gone: true}, nil
	}
	return leaseTTL{granted: seconds(resp.GrantedTTL), remaining: seconds(resp.TTL)}, nil
}

// current converts the entry a failed compare found into the Current of a
// ConflictError. It sends no request: a conflict is what a follower's
// attempt meets, and the attempt costs its one transaction, no more. TTL is
// the granted TTL of the entry's lease when the store wrote the entry
// itself, else the server's minimum (the lease had at least that);
// Remaining is 0, unknown. Get reports both as etcd sees them.
func (s *Store) current(kv *mvccpb.KeyValue) backends.Entry {
	e := s.entry(kv)
	if kv.Lease == 0 {
		return e
	}
	e.TTL = s.minTTL
	if granted := s.book.grantedOf(string(kv.Key), clientv3.LeaseID(kv.Lease)); granted > 0 {
		e.TTL = granted
	}
	return e
}

// Get implements backends.Store. It costs two requests for an entry with a
// TTL (the key, then its lease's TTL) and one otherwise.
func (s *Store) Get(ctx context.Context, key string) (backends.Entry, error) {
	if err := backends.ValidateKey(key); err != nil {
		return backends.Entry{}, fmt.Errorf("etcd: get: %w", err)
	}
	if err := s.checkOpen("get", key); err != nil {
		return backends.Entry{}, err
	}
	resp, err := s.cli.Get(opctx(ctx), s.prefix+key)
	if err != nil {
		return backends.Entry{}, s.fail("get", key, err)
	}
	entries, err := s.withTTLs(ctx, resp.Kvs)
	if err != nil {
		return backends.Entry{}, s.fail("get", key, err)
	}
	if len(entries) == 0 {
		return backends.Entry{}, fmt.Errorf("etcd: get %q: %w", key, backends.ErrNotFound)
	}
	return entries[0], nil
}

// List implements backends.Store. It costs one request, plus one per
// distinct lease among the entries (entries on a shared lease cost one
// together).
func (s *Store) List(ctx context.Context, prefix string) ([]backends.Entry, error) {
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("etcd: list: %w", err)
	}
	if err := s.checkOpen("list", prefix); err != nil {
		return nil, err
	}
	resp, err := s.cli.Get(opctx(ctx), s.prefix+prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, s.fail("list", prefix, err)
	}
	entries, err := s.withTTLs(ctx, resp.Kvs)
	if err != nil {
		return nil, s.fail("list", prefix, err)
	}
	return entries, nil
}

// Scan implements backends.Scanner. It costs two requests whatever the
// number of leases among the entries: the range read, then, if an entry has
// a lease, one listing of the leases etcd holds (LeaseLeases), sent after
// the read, so that an entry whose lease was revoked in between is left out.
// TTL is the granted TTL of the entry's lease where this store wrote the
// entry, else the server's minimum.
func (s *Store) Scan(ctx context.Context, prefix string) ([]backends.Entry, error) {
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("etcd: scan: %w", err)
	}
	if err := s.checkOpen("scan", prefix); err != nil {
		return nil, err
	}
	resp, err := s.cli.Get(opctx(ctx), s.prefix+prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, s.fail("scan", prefix, err)
	}
	var alive map[clientv3.LeaseID]bool
	if slices.ContainsFunc(resp.Kvs, func(kv *mvccpb.KeyValue) bool { return kv.Lease != 0 }) {
		lr, err := s.cli.Leases(opctx(ctx))
		if err != nil {
			return nil, s.fail("scan", prefix, err)
		}
		alive = make(map[clientv3.LeaseID]bool, len(lr.Leases))
		for _, l := range lr.Leases {
			alive[l.ID] = true
		}
	}
	out := make([]backends.Entry, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if kv.Lease != 0 && !alive[clientv3.LeaseID(kv.Lease)] {
			continue // revoked: etcd has deleted it since the read
		}
		out = append(out, s.current(kv))
	}
	return out, nil
}

// withTTLs converts kvs to entries with their TTLs. An entry whose lease is
// already gone is expired: etcd is deleting it, and it is left out.
func (s *Store) withTTLs(ctx context.Context, kvs []*mvccpb.KeyValue) ([]backends.Entry, error) {
	ids := make([]clientv3.LeaseID, 0, len(kvs))
	for _, kv := range kvs {
		ids = append(ids, clientv3.LeaseID(kv.Lease))
	}
	ttls, err := s.leaseTTLs(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]backends.Entry, 0, len(kvs))
	for _, kv := range kvs {
		e := s.entry(kv)
		if kv.Lease != 0 {
			t := ttls[clientv3.LeaseID(kv.Lease)]
			if t.gone {
				continue
			}
			e.TTL, e.Remaining = t.granted, t.remaining
		}
		out = append(out, e)
	}
	return out, nil
}

// CreateIfAbsent implements backends.Store: one etcd transaction comparing
// the key's Version with 0, after a lease grant (or, with a shared lease, a
// keep-alive of the shared lease) when ttl is positive.
func (s *Store) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	return s.put(ctx, "create", key, 0, value, ttl)
}

// CompareAndSet implements backends.Store: one etcd transaction comparing
// the key's ModRevision with rev (its Version with 0 when rev is 0).
func (s *Store) CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	return s.put(ctx, "cas", key, rev, value, ttl)
}

func (s *Store) put(ctx context.Context, op, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	if err := check.Write(key, rev, value, ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("etcd: %s: %w", op, err)
	}
	secs, err := ttlSeconds(op, key, ttl)
	if err != nil {
		return backends.Entry{}, err
	}
	if err := s.checkOpen(op, key); err != nil {
		return backends.Entry{}, err
	}
	value = bytes.Clone(value) // the caller may reuse its buffer; the entry and the registry keep this one
	k := s.prefix + key
	start := s.clock.Now()
	s.book.beginWrite(k)
	defer s.book.endWrite(k)

	if secs > 0 && rev == 0 && !s.leaseReady(secs) {
		// A follower's create meets a held claim far more often than a free
		// one: when the write would need a lease request first (a grant, or
		// a keep-alive of a shared lease the store has not kept alive
		// lately), read first, so that a refused create costs one request.
		resp, err := s.cli.Get(opctx(ctx), k)
		if err != nil {
			return backends.Entry{}, s.fail(op, key, err)
		}
		if len(resp.Kvs) > 0 {
			ce := &backends.ConflictError{Op: op, Key: key, Expected: rev, Current: s.current(resp.Kvs[0]), Found: true}
			return backends.Entry{}, fmt.Errorf("etcd: %w", ce)
		}
	}
	var wl writeLease
	var resp *clientv3.TxnResponse
	for {
		wl, err = s.leaseFor(ctx, secs, true)
		if err != nil {
			return backends.Entry{}, s.fail(op, key, err)
		}
		putOpts := []clientv3.OpOption{clientv3.WithPrevKV()}
		if wl.id != clientv3.NoLease {
			putOpts = append(putOpts, clientv3.WithLease(wl.id))
		}
		resp, err = s.cli.Txn(opctx(ctx)).
			If(cmpRevision(k, rev)).
			Then(clientv3.OpPut(k, string(value), putOpts...)).
			Else(clientv3.OpGet(k)).
			Commit()
		if err != nil && wl.shared && !wl.fresh && isLeaseNotFound(err) {
			// The shared lease expired since its last keep-alive: etcd
			// refused the put. Grant a new one.
			s.book.leaseGone(wl.id)
			continue
		}
		break
	}
	if err != nil {
		if unknownOutcome(err) {
			s.book.writeUnknown(k, wl)
		} else {
			s.discardLease(ctx, wl)
		}
		return backends.Entry{}, s.fail(op, key, err)
	}
	if !resp.Succeeded {
		s.discardLease(ctx, wl)
		ce := &backends.ConflictError{Op: op, Key: key, Expected: rev}
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			ce.Current, ce.Found = s.current(kvs[0]), true
		}
		return backends.Entry{}, fmt.Errorf("etcd: %w", ce)
	}
	if err := s.confirmShared(ctx, k, &wl); err != nil {
		return backends.Entry{}, s.fail(op, key, err)
	}
	e := backends.Entry{
		Key:            key,
		Value:          value,
		Revision:       resp.Header.Revision,
		CreateRevision: resp.Header.Revision,
		TTL:            wl.granted,
		Remaining:      wl.granted,
	}
	if prev := resp.Responses[0].GetResponsePut().GetPrevKv(); prev != nil {
		e.CreateRevision = prev.CreateRevision
	}
	s.book.wrote(k, e, wl, start, true)
	return e, nil
}

// cmpRevision is the compare of a conditional write: the key is absent
// (Version 0) when rev is 0, else its ModRevision is rev.
func cmpRevision(k string, rev int64) clientv3.Cmp {
	if rev == 0 {
		return clientv3.Compare(clientv3.Version(k), "=", 0)
	}
	return clientv3.Compare(clientv3.ModRevision(k), "=", rev)
}

// CompareAndDelete implements backends.Store: one etcd transaction comparing
// the key's ModRevision with rev. The entry's lease, if any, is left to
// expire: it carries nothing any more.
func (s *Store) CompareAndDelete(ctx context.Context, key string, rev int64) error {
	if err := backends.ValidateKey(key); err != nil {
		return fmt.Errorf("etcd: delete: %w", err)
	}
	if err := check.Revision(rev, true); err != nil {
		return fmt.Errorf("etcd: delete %q: %w", key, err)
	}
	if err := s.checkOpen("delete", key); err != nil {
		return err
	}
	k := s.prefix + key
	s.book.beginWrite(k)
	defer s.book.endWrite(k)
	resp, err := s.cli.Txn(opctx(ctx)).
		If(clientv3.Compare(clientv3.ModRevision(k), "=", rev)).
		Then(clientv3.OpDelete(k)).
		Else(clientv3.OpGet(k)).
		Commit()
	if err != nil {
		if unknownOutcome(err) {
			s.book.unsure(k)
		}
		return s.fail("delete", key, err)
	}
	if !resp.Succeeded {
		ce := &backends.ConflictError{Op: "delete", Key: key, Expected: rev}
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			ce.Current, ce.Found = s.current(kvs[0]), true
		}
		return fmt.Errorf("etcd: %w", ce)
	}
	s.book.deleted(k)
	return nil
}

// writeLease is the lease a write attaches its key to.
type writeLease struct {
	id      clientv3.LeaseID // NoLease for an entry without TTL
	granted time.Duration
	shared  bool
	// fresh: granted for this write, after it began. A shared lease that
	// is not fresh was kept alive last before the write began, and the
	// write must keep it alive once it has succeeded (confirmShared).
	fresh bool
	// sent, for a per-entry lease, is when the request that last made etcd
	// keep it alive (its grant, or a keep-alive) was sent: heldEntry.keptAt.
	sent time.Time
}

// leaseFor returns a lease for a write of secs seconds: a fresh per-entry
// grant, or the shared lease of that TTL. With later, a shared lease the
// store already has is returned without a request, and the writer keeps it
// alive after a successful write (confirmShared): a refused write, which is
// what most writes on a claim are, then costs its transaction alone.
// Without later, it is kept alive now, so that it lives at least secs from
// the call's start.
func (s *Store) leaseFor(ctx context.Context, secs int64, later bool) (writeLease, error) {
	if secs == 0 {
		return writeLease{}, nil
	}
	if s.shared != nil {
		return s.sharedLease(ctx, secs, later)
	}
	sent := s.clock.Now()
	resp, err := s.cli.Grant(opctx(ctx), secs)
	if err != nil {
		return writeLease{}, err
	}
	return writeLease{id: resp.ID, granted: seconds(resp.TTL), fresh: true, sent: sent}, nil
}

// confirmShared keeps alive the shared lease a successful write of k put
// its entry on, when it was not kept alive after the write began, so that
// the entry lives at least its TTL from the write's start. If the lease
// expired in between, its revocation deleted the entry with it: the write
// fails as unavailable (nobody holds the key). If the keep-alive's outcome
// is unknown, the entry may outlive nobody's claim: it is marked for the
// garbage collector, and the write fails as the keep-alive did.
func (s *Store) confirmShared(ctx context.Context, k string, wl *writeLease) error {
	if !wl.shared || wl.fresh {
		return nil
	}
	ttl, err := s.keepShared(ctx, wl.id)
	if isLeaseNotFound(err) {
		s.book.leaseGone(wl.id)
		return fmt.Errorf("the shared lease expired as the entry was written, and its revocation deleted the entry: %w", backends.ErrUnavailable)
	}
	if errors.Is(err, errTooLate) {
		// The write took so long that its lease may be close to its
		// expiry at the server (see leaseGuard): the entry cannot be kept
		// alive safely. Nobody holds it; the garbage collector deletes it
		// if the lease's expiry does not come first.
		s.book.writeUnknown(k, *wl)
		return fmt.Errorf("the shared lease came close to its expiry as the entry was written: %w", backends.ErrUnavailable)
	}
	if err != nil {
		s.book.writeUnknown(k, *wl)
		return err
	}
	wl.granted = seconds(ttl)
	return nil
}

// discardLease revokes a per-entry lease whose write certainly did not
// happen, so that leases of lost races do not pile up until they expire.
// Failure is harmless (the lease expires) and ignored.
func (s *Store) discardLease(ctx context.Context, wl writeLease) {
	if wl.id == clientv3.NoLease || wl.shared || ctx.Err() != nil {
		return
	}
	_, _ = s.cli.Revoke(opctx(ctx), wl.id)
}

// KeepAlive implements backends.Store. Under the rule of use in the
// package documentation, it never extends, or reports held, an entry whose
// key was deleted or rewritten before its keep-alive was sent: for an entry
// the store wrote itself and vouches for, it is one keep-alive of its
// lease; for any other entry it keeps the lease alive, then reads the key
// and checks its ModRevision (docs/stores/etcd.md says why that is exact).
// KeepAlive refuses to refresh a lease that carries other keys
// (ErrUnsupported). The new expiry counts from the keep-alive, which is
// later than the call's start, so a holder that counts its deadline from
// before the call is on the safe side. On a shared lease (WithSharedLease)
// calls are answered in batches of one keep-alive each.
//
// ttl may be shorter than the entry's lease (it is then rounded up to it)
// but not longer: etcd cannot lengthen a lease without rewriting the key, so
// a longer ttl fails with ErrInvalid rather than being shortened.
func (s *Store) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	if err := backends.ValidateKey(key); err != nil {
		return backends.Entry{}, fmt.Errorf("etcd: keepalive: %w", err)
	}
	if err := check.Revision(rev, true); err != nil {
		return backends.Entry{}, fmt.Errorf("etcd: keepalive %q: %w", key, err)
	}
	if err := check.KeepAliveTTL(ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("etcd: keepalive %q: %w", key, err)
	}
	secs, err := ttlSeconds("keepalive", key, ttl)
	if err != nil {
		return backends.Entry{}, err
	}
	if err := s.checkOpen("keepalive", key); err != nil {
		return backends.Entry{}, err
	}
	k := s.prefix + key
	start := s.clock.Now()
	if s.shared != nil {
		if e, ok, err := s.shared.keepAlive(ctx, k, key, rev, secs, start); ok {
			return e, err
		}
	}
	if e, ok, err := s.keepVouched(ctx, k, key, rev, secs, start); ok {
		return e, err
	}
	return s.keepChecked(ctx, k, key, rev, secs, ttl, start)
}

// keepChecked keeps alive an entry on a per-entry lease that the store
// does not vouch for (a peer's, its own from before a restart, or its own
// after a compaction, a write with an unknown outcome or a write below the
// sentinel's start): it keeps the entry's lease alive, then reads the key.
// A read after the send that finds the key at rev proves it was at rev at
// the send, since a key never comes back to a revision it left; a read
// before the send would prove nothing about the send, and the entry's
// writer may delete it in between (a holder releasing what it holds).
//
// The lease comes from the registry when it knows k at rev (a key at a
// revision has one lease, set by the write that made that revision).
// Otherwise the store reads the key first, to learn its lease, and asks
// etcd which keys that lease carries: a lease that carries other keys is
// refused (ErrUnsupported), one that no longer carries k means k was
// deleted or rewritten (lost).
func (s *Store) keepChecked(ctx context.Context, k, key string, rev, secs int64, ttl time.Duration, start time.Time) (backends.Entry, error) {
	id, granted, keptAt, known := s.book.perEntryLease(k, rev)
	var until time.Time // the latest send of a keep-alive (keepUntil)
	if known {
		until = keepUntil(keptAt, granted)
	} else {
		resp, err := s.cli.Get(opctx(ctx), k)
		if err != nil {
			return backends.Entry{}, s.fail("keepalive", key, err)
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != rev {
			ce := &backends.ConflictError{Op: "keepalive", Key: key, Expected: rev}
			if len(resp.Kvs) > 0 {
				ce.Current, ce.Found = s.current(resp.Kvs[0]), true
			}
			return backends.Entry{}, fmt.Errorf("etcd: %w", ce)
		}
		kv := resp.Kvs[0]
		id = clientv3.LeaseID(kv.Lease)
		if id == clientv3.NoLease {
			return backends.Entry{}, fmt.Errorf("etcd: keepalive %q: the entry has no TTL, and etcd cannot give it one without rewriting it: %w", key, backends.ErrInvalid)
		}
		if s.shared != nil && s.book.isAbandoned(id) {
			// Its lease is one the store abandoned close to its expiry, and
			// will never keep alive again.
			return backends.Entry{}, s.tooLate(key, rev)
		}
		if s.shared != nil && s.book.owns(id) {
			// An entry of ours on a shared lease that the registry lost track
			// of (or never knew, after a write with an unknown outcome):
			// register it and let the batch verify it.
			s.book.adopt(k, kv, id, start)
			e, _, err := s.shared.keepAlive(ctx, k, key, rev, secs, start)
			return e, err
		}
		asked := s.clock.Now()
		ttlResp, err := s.cli.TimeToLive(opctx(ctx), id, clientv3.WithAttachedKeys())
		if err != nil && !isLeaseNotFound(err) {
			return backends.Entry{}, s.fail("keepalive", key, err)
		}
		if err != nil || ttlResp.TTL < 0 {
			return backends.Entry{}, s.lost(key, rev)
		}
		if !slices.ContainsFunc(ttlResp.Keys, func(b []byte) bool { return string(b) == k }) {
			// The key left the lease since the read: deleted, or rewritten
			// on another lease. The claim is lost.
			return backends.Entry{}, s.lost(key, rev)
		}
		if len(ttlResp.Keys) != 1 {
			return backends.Entry{}, fmt.Errorf("etcd: keepalive %q: its lease %x carries %d keys; keeping it alive would keep the others alive too: %w",
				key, int64(id), len(ttlResp.Keys), backends.ErrUnsupported)
		}
		granted = seconds(ttlResp.GrantedTTL)
		// The store sent this lease nothing, so it guards the keep-alive
		// by what etcd reports: the lease had at least TTL whole seconds
		// left (etcd rounds down) when it answered, after asked; so it
		// lives at least until asked + TTL, as if last kept alive at
		// asked + TTL − granted.
		until = keepUntil(asked.Add(seconds(ttlResp.TTL)-granted), granted)
	}
	if seconds(secs) > granted {
		return backends.Entry{}, fmt.Errorf("etcd: keepalive %q: ttl %v is longer than the %v its lease was granted, and etcd cannot lengthen a lease without rewriting the key: %w",
			key, ttl, granted, backends.ErrInvalid)
	}
	sent := s.clock.Now()
	renewed, err := s.keepAliveOnce(ctx, id, until)
	if errors.Is(err, errTooLate) {
		return backends.Entry{}, s.refusedLate(ctx, k, key, rev)
	}
	if isLeaseNotFound(err) {
		s.book.forget(k, id)
		return backends.Entry{}, s.lost(key, rev)
	}
	if err != nil {
		return backends.Entry{}, s.fail("keepalive", key, err)
	}
	resp, err := s.cli.Get(opctx(ctx), k)
	if err != nil {
		return backends.Entry{}, s.fail("keepalive", key, err)
	}
	readRev := resp.Header.Revision
	var kv *mvccpb.KeyValue
	if len(resp.Kvs) > 0 {
		kv = resp.Kvs[0]
	}
	if kv == nil || kv.ModRevision != rev {
		return backends.Entry{}, s.verify(ctx, k, key, rev, kv, readRev, false)
	}
	e := s.entry(kv)
	e.TTL = seconds(renewed)
	e.Remaining = e.TTL
	s.book.wrote(k, e, writeLease{id: id, granted: e.TTL, sent: sent}, start, false)
	s.book.revouch(k, rev, readRev)
	return e, nil
}

// keepVouched keeps alive an entry on a per-entry lease that the store
// wrote and vouches for (vouchedLocked) with one request: a keep-alive of
// its lease. ok is false if the store cannot vouch for it, and the caller
// verifies by a read first.
//
// If, while the keep-alive was in flight, a write of ours on the key began
// or the sentinel saw the key change, the store can no longer vouch for the
// entry at the send, and it reads the key: a read after the send that finds
// the key at rev proves it was at rev at the send, since a key never comes
// back to a revision it left.
func (s *Store) keepVouched(ctx context.Context, k, key string, rev, secs int64, start time.Time) (backends.Entry, bool, error) {
	s.book.mu.Lock()
	h := s.book.held[k]
	if h == nil || h.shared || !s.book.vouchedLocked(k, h, rev) {
		s.book.mu.Unlock()
		return backends.Entry{}, false, nil
	}
	id, granted, touched, until := h.lease, h.granted, h.touched, keepUntil(h.keptAt, h.granted)
	s.startSentinelLocked()
	s.book.mu.Unlock()
	if seconds(secs) > granted {
		return backends.Entry{}, true, fmt.Errorf("etcd: keepalive %q: ttl %v is longer than the %v its lease was granted, and etcd cannot lengthen a lease without rewriting the key: %w",
			key, seconds(secs), granted, backends.ErrInvalid)
	}
	sent := s.clock.Now()
	ttl, err := s.keepAliveOnce(ctx, id, until)
	if errors.Is(err, errTooLate) {
		// The lease may be close to its expiry at the server: a
		// keep-alive could be answered alive while etcd revokes it. The
		// claim is left to lapse, and the record stays, so that a retry
		// is refused too.
		return backends.Entry{}, true, s.refusedLate(ctx, k, key, rev)
	}
	if isLeaseNotFound(err) {
		s.book.forget(k, id)
		return backends.Entry{}, true, s.lost(key, rev)
	}
	if err != nil {
		return backends.Entry{}, true, s.fail("keepalive", key, err)
	}
	if !s.book.unchanged(k, h, touched, true) {
		kvs, readRev, err := s.readKeys(ctx, []string{k}, false)
		if err != nil {
			return backends.Entry{}, true, s.fail("keepalive", key, err)
		}
		if err := s.verify(ctx, k, key, rev, kvs[k], readRev, false); err != nil {
			return backends.Entry{}, true, err
		}
	}
	e, ok := s.book.renewed(k, rev, id, seconds(ttl), start, sent)
	if !ok {
		// Our own write replaced the entry meanwhile: rev is no longer
		// current.
		return backends.Entry{}, true, s.lost(key, rev)
	}
	e.Key = key
	return e, true, nil
}

// verify checks that kv, the key k as a read after a keep-alive's send found
// it, is at rev: then it was at rev at the send. If the store's word for
// the entry had been withdrawn only because the sentinel may have missed
// changes, the read gives it back (revouch). Otherwise the entry is
// forgotten and the error is a lost conflict.
func (s *Store) verify(ctx context.Context, k, key string, rev int64, kv *mvccpb.KeyValue, readRev int64, keysOnly bool) error {
	switch {
	case kv == nil:
		s.book.forgetRev(k, rev)
		return s.lost(key, rev)
	case kv.ModRevision != rev:
		s.book.forgetRev(k, rev)
		ce := &backends.ConflictError{Op: "keepalive", Key: key, Expected: rev}
		if keysOnly {
			// Fetch the entry's value for the conflict.
			if resp, err := s.cli.Get(opctx(ctx), k); err == nil && len(resp.Kvs) > 0 {
				kv = resp.Kvs[0]
			}
		}
		ce.Current, ce.Found = s.current(kv), true
		return fmt.Errorf("etcd: %w", ce)
	}
	s.book.revouch(k, rev, readRev)
	return nil
}

// lost is the error of a keep-alive whose entry is gone (its lease expired,
// or it was deleted): a conflict of class lost.
func (s *Store) lost(key string, rev int64) error {
	return fmt.Errorf("etcd: %w", &backends.ConflictError{Op: "keepalive", Key: key, Expected: rev})
}

// refusedLate answers a renewal of an entry the store vouched for, refused
// near its lease's expiry (errTooLate), with what a read of the key shows,
// as a renewal that reads first would: absent, or at another revision, is
// a *ConflictError; still at rev, an error of class lost that says nothing
// of the key (tooLate), since the entry stays until its lease expires. If
// the read fails, tooLate too: the claim is lost either way. The read is
// the one request such a renewal costs; no keep-alive is sent.
func (s *Store) refusedLate(ctx context.Context, k, key string, rev int64) error {
	resp, err := s.cli.Get(opctx(ctx), k)
	if err != nil || (len(resp.Kvs) > 0 && resp.Kvs[0].ModRevision == rev) {
		return s.tooLate(key, rev)
	}
	ce := &backends.ConflictError{Op: "keepalive", Key: key, Expected: rev}
	if len(resp.Kvs) > 0 {
		ce.Current, ce.Found = s.current(resp.Kvs[0]), true
	}
	return fmt.Errorf("etcd: %w", ce)
}
