package etcd

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/batch"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// maxRound bounds one batch's requests when no caller in it has a
	// deadline; callers with deadlines end it sooner by giving up.
	maxRound = 30 * time.Second
	// exactRead is the number of keys up to which a batch reads exactly
	// those keys (one transaction of gets); above it, it reads the key range
	// they span, so that a batch stays one request however many entries it
	// verifies. Also the number of deletes per garbage-collecting request.
	exactRead = 64
)

// shared answers KeepAlive calls on entries of the store's shared leases in
// batches. One batch keeps each shared lease involved alive with one
// keep-alive, and reads, in one request after it, only the entries the
// store does not vouch for. It also deletes entries nobody keeps alive any more, so that a shared
// lease never keeps a dead claim alive.
type shared struct {
	s     *Store
	batch time.Duration
	kick  chan struct{} // buffered; wakes the batcher when its schedule may move earlier

	mu    sync.Mutex
	queue batch.Queue[*keepReq] // guarded by mu
}

// keepReq is one KeepAlive call waiting for a batch.
type keepReq struct {
	ctx   context.Context
	k     string // etcd key
	key   string // store key
	rev   int64
	lease clientv3.LeaseID // the lease the store wrote the entry at rev on
	start time.Time
	// granted is what the batch's keep-alive renewed the lease for.
	granted time.Duration
	done    chan keepResult // buffered: the batcher never blocks on a caller that left
}

type keepResult struct {
	e   backends.Entry
	err error
}

func newShared(s *Store, batch time.Duration) *shared {
	return &shared{s: s, batch: batch, kick: make(chan struct{}, 1)}
}

// keepAlive serves a KeepAlive call if the registry knows k at rev on a
// shared lease; ok is false otherwise, and the caller takes the direct path.
func (sh *shared) keepAlive(ctx context.Context, k, key string, rev, secs int64, start time.Time) (e backends.Entry, ok bool, err error) {
	s := sh.s
	s.book.mu.Lock()
	h := s.book.held[k]
	if h == nil || !h.shared || h.rev != rev {
		s.book.mu.Unlock()
		return backends.Entry{}, false, nil
	}
	granted, lease := h.granted, h.lease
	if h.vouched {
		s.startSentinelLocked()
	}
	var until time.Time // when the batch must have kept the entry's lease alive
	if g := s.book.groupOfLocked(h.lease); g != nil {
		until = s.book.keepUntilLocked(g).Add(-leaseGuard(g.granted) / 4)
	}
	s.book.mu.Unlock()
	if seconds(secs) > granted {
		return backends.Entry{}, true, fmt.Errorf("etcd: keepalive %q: ttl %v is longer than the %v its shared lease was granted: %w",
			key, seconds(secs), granted, backends.ErrInvalid)
	}

	req := &keepReq{ctx: ctx, k: k, key: key, rev: rev, lease: lease, start: start, done: make(chan keepResult, 1)}
	due := batch.CallDue(ctx, start, sh.batch, seconds(secs))
	if !until.IsZero() && until.Before(due) {
		// Its lease would come too close to its expiry to be kept alive
		// (see leaseGuard) before the batch: serve it before, leaving a
		// quarter of the guard for the batch's read.
		due = maxTime(until, start)
	}
	sh.mu.Lock()
	wake, queued := sh.queue.Add(req, due)
	sh.mu.Unlock()
	if !queued {
		return backends.Entry{}, true, fmt.Errorf("etcd: keepalive %q: %w", key, backends.ErrClosed)
	}
	if wake {
		sh.wake()
	}
	select {
	case r := <-req.done:
		return r.e, true, r.err
	case <-ctx.Done():
		return backends.Entry{}, true, fmt.Errorf("etcd: keepalive %q: %w", key, ctx.Err())
	}
}

// wake makes the batcher recompute when its next batch is due: a call or
// an entry may need one sooner. It never blocks, and is safe under the
// store's lock.
func (sh *shared) wake() {
	select {
	case sh.kick <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// run is the batcher's loop. It is owned by the Store and ends at Close.
func (sh *shared) run() {
	defer sh.s.wg.Done()
	var last time.Time
	for {
		wake, ok := sh.nextWake(last)
		if !ok || wake.After(sh.s.clock.Now()) {
			var fire <-chan time.Time
			var timer interface{ Stop() bool }
			if ok {
				t := sh.s.clock.Timer(wake.Sub(sh.s.clock.Now()))
				fire, timer = t.C, t
			}
			select {
			case <-sh.s.ctx.Done():
				if timer != nil {
					timer.Stop()
				}
				sh.stop()
				return
			case <-sh.kick:
				if timer != nil {
					timer.Stop()
				}
				continue
			case <-fire:
			}
		}
		last = sh.s.clock.Now()
		sh.round(sh.take())
	}
}

// nextWake is when the next batch is due: no sooner than one interval after
// the last, unless a pending call's TTL needs it sooner; and when an entry
// nobody kept alive becomes garbage.
func (sh *shared) nextWake(last time.Time) (time.Time, bool) {
	var wake time.Time
	sh.mu.Lock()
	if sh.queue.Len() > 0 {
		wake = maxTime(last.Add(sh.batch), sh.queue.First().start)
		if due := sh.queue.Due(); due.Before(wake) {
			wake = due
		}
	}
	sh.mu.Unlock()
	if gc, ok := sh.s.book.garbageAt(); ok {
		gc = maxTime(gc, last.Add(sh.batch))
		if wake.IsZero() || gc.Before(wake) {
			wake = gc
		}
	}
	return wake, !wake.IsZero()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (sh *shared) take() []*keepReq {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.queue.Take()
}

// stop fails every waiting call; later calls fail at once.
func (sh *shared) stop() {
	sh.mu.Lock()
	reqs := sh.queue.Stop()
	sh.mu.Unlock()
	for _, r := range reqs {
		r.done <- keepResult{err: fmt.Errorf("etcd: keepalive %q: %w", r.key, backends.ErrClosed)}
	}
}

// round runs one batch: garbage first, then the keep-alives.
func (sh *shared) round(reqs []*keepReq) {
	s := sh.s
	ctx, cancel := context.WithTimeout(s.ctx, maxRound)
	defer cancel()
	defer batch.CancelWhenAllDone(cancel, reqs, func(r *keepReq) context.Context { return r.ctx })()
	busy := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		busy[r.k] = true
	}
	// Garbage is never urgent, and the batch's keep-alives wait behind it:
	// a collection that cannot finish within the server's shortest lease
	// (a cut-off connection) is left for a later batch.
	gctx, gcancel := context.WithTimeout(ctx, s.minTTL)
	s.collectGarbage(gctx, busy)
	gcancel()
	if len(reqs) > 0 {
		sh.serve(ctx, reqs)
	}
}

// serve keeps the shared leases of the callers' entries alive, one
// keep-alive per lease, and answers each caller.
//
// An entry the store vouches for (vouchedLocked) needs nothing more, unless
// a write of ours on its key began, or the sentinel withdrew the store's
// word for it, before the keep-alive's answer. Those, and the entries the
// store does not vouch for, are verified by one read of their keys after
// the keep-alive: a read after the send that finds the key at the caller's
// revision proves it was at it at the send, since a key never comes back
// to a revision it left. (A read before the send would prove nothing about
// the send: a write with an unknown outcome may be applied in between.)
func (sh *shared) serve(ctx context.Context, reqs []*keepReq) {
	s := sh.s
	type word struct {
		h       *heldEntry // nil: the registry does not know the entry at the caller's revision
		touched uint64
		vouched bool
	}
	words := make([]word, len(reqs))
	live := make([]bool, len(reqs)) // still to be kept alive and answered
	s.book.mu.Lock()
	for i, r := range reqs {
		if h := s.book.held[r.k]; h != nil && h.shared && h.lease == r.lease && h.rev == r.rev {
			words[i] = word{h, h.touched, s.book.vouchedLocked(r.k, h, r.rev)}
		}
		live[i] = words[i].h != nil
	}
	s.book.mu.Unlock()
	for i, r := range reqs {
		if !live[i] {
			// The registry no longer has the entry at the caller's
			// revision: our own write, delete or garbage collection took
			// it, or its lease is gone.
			r.done <- keepResult{err: s.lost(r.key, r.rev)}
		}
	}

	byLease := make(map[clientv3.LeaseID][]int)
	for i, r := range reqs {
		if live[i] {
			byLease[r.lease] = append(byLease[r.lease], i)
		}
	}
	var again []int // read after the keep-alive: every entry not vouched for
	for id, is := range byLease {
		ttl, err := s.keepShared(ctx, id)
		if errors.Is(err, errTooLate) {
			// The lease may be close to its expiry at the server (or was
			// abandoned for that): keeping it alive could be answered
			// with success while etcd revokes it. Its entries are lost;
			// their holders' deadlines pass before the lease expires.
			for _, i := range is {
				s.book.forgetRev(reqs[i].k, reqs[i].rev)
				reqs[i].done <- keepResult{err: s.refusedLate(ctx, reqs[i].k, reqs[i].key, reqs[i].rev)}
				live[i] = false
			}
			continue
		}
		if isLeaseNotFound(err) {
			s.book.leaseGone(id)
			for _, i := range is {
				reqs[i].done <- keepResult{err: s.lost(reqs[i].key, reqs[i].rev)}
				live[i] = false
			}
			continue
		}
		if err != nil {
			for _, i := range is {
				reqs[i].done <- keepResult{err: s.fail("keepalive", reqs[i].key, err)}
				live[i] = false
			}
			continue
		}
		granted := seconds(ttl)
		for _, i := range is {
			reqs[i].granted = granted
			w := words[i]
			if w.vouched && s.book.unchanged(reqs[i].k, w.h, w.touched, true) {
				continue
			}
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		sh.check(ctx, reqs, again, live)
	}
	for i, r := range reqs {
		if live[i] {
			s.answer(r, r.lease, r.granted)
		}
	}
}

// check reads the keys of reqs[i] for i in which, in one request, and
// answers (and marks not live) those not at their callers' revisions; if
// the read fails, all of them, with its error.
//
// The read is keys-only: etcd from v3.7 answers it from its index, without
// the keys' leases (Lease 0), so the lease of an entry found at the caller's
// revision is the one the store wrote it on (keepReq.lease).
func (sh *shared) check(ctx context.Context, reqs []*keepReq, which []int, live []bool) {
	s := sh.s
	keys := make([]string, 0, len(which))
	for _, i := range which {
		keys = append(keys, reqs[i].k)
	}
	kvs, readRev, err := s.readKeys(ctx, keys, true)
	for _, i := range which {
		r := reqs[i]
		if err == nil {
			err := s.verify(ctx, r.k, r.key, r.rev, kvs[r.k], readRev, true)
			if err == nil {
				continue
			}
			r.done <- keepResult{err: err}
		} else {
			r.done <- keepResult{err: s.fail("keepalive", r.key, err)}
		}
		live[i] = false
	}
}

// answer answers r, whose entry's lease id was kept alive for granted.
func (s *Store) answer(r *keepReq, id clientv3.LeaseID, granted time.Duration) {
	e, ok := s.book.renewed(r.k, r.rev, id, granted, r.start, time.Time{})
	if !ok {
		// Our own write replaced the entry meanwhile; the caller's
		// revision is no longer current.
		r.done <- keepResult{err: s.lost(r.key, r.rev)}
		return
	}
	e.Key = r.key
	r.done <- keepResult{e: e}
}

// readKeys reads keys in one request: exactly those keys when they are
// few, else the key range they span, and returns them with the revision
// they were read at. With keysOnly it reads them without
// their values, and then without their leases too: etcd from v3.7 answers
// a keys-only read from its index, whose entries carry the revisions but
// not the lease (Lease is 0 whatever the key's lease).
func (s *Store) readKeys(ctx context.Context, keys []string, keysOnly bool) (map[string]*mvccpb.KeyValue, int64, error) {
	var only []clientv3.OpOption
	if keysOnly {
		only = append(only, clientv3.WithKeysOnly())
	}
	sort.Strings(keys)
	out := make(map[string]*mvccpb.KeyValue, len(keys))
	if len(keys) == 0 {
		return out, 0, nil
	}
	if len(keys) > exactRead {
		resp, err := s.cli.Get(opctx(ctx), keys[0], append([]clientv3.OpOption{clientv3.WithRange(keys[len(keys)-1] + "\x00")}, only...)...)
		if err != nil {
			return nil, 0, err
		}
		want := make(map[string]bool, len(keys))
		for _, k := range keys {
			want[k] = true
		}
		for _, kv := range resp.Kvs {
			if want[string(kv.Key)] {
				out[string(kv.Key)] = kv
			}
		}
		return out, resp.Header.Revision, nil
	}
	ops := make([]clientv3.Op, 0, len(keys))
	for i, k := range keys {
		if i > 0 && k == keys[i-1] {
			continue
		}
		ops = append(ops, clientv3.OpGet(k, only...))
	}
	resp, err := s.cli.Txn(opctx(ctx)).Then(ops...).Commit()
	if err != nil {
		return nil, 0, err
	}
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().GetKvs() {
			out[string(kv.Key)] = kv
		}
	}
	return out, resp.Header.Revision, nil
}

type garbage struct {
	k   string
	rev int64
	h   *heldEntry // the registry entry, for a dead one
	wl  writeLease // the lease, for an unknown write
}

// collectGarbage deletes the entries of our shared leases that nobody keeps
// alive: those not kept alive for their whole TTL (their holders' deadlines
// have passed, so they stopped acting), and those a write with an unknown
// outcome may have left. Each delete is conditional on the revision and the
// lease, so an entry anyone wrote since is never touched. Keys in busy are
// being kept alive by this batch and are skipped.
//
// An entry a write with an unknown outcome may have left is deleted only if
// its revision is none the registry knows: a revision the registry knows
// was made by a write whose outcome is known, and its holder may still be
// acting (its deadline is the registry's to judge, above).
func (s *Store) collectGarbage(ctx context.Context, busy map[string]bool) {
	dead, unknown := s.book.garbage(s.clock.Now(), busy)

	if len(unknown) > 0 {
		keys := make([]string, 0, len(unknown))
		for _, g := range unknown {
			keys = append(keys, g.k)
		}
		kvs, _, err := s.readKeys(ctx, keys, false) // the leases decide
		if err != nil {
			return // next time
		}
		for _, g := range unknown {
			kv := kvs[g.k]
			ok := s.book.settleUnknown(g, kv)
			if ok {
				dead = append(dead, garbage{k: g.k, rev: kv.ModRevision, wl: g.wl})
			}
		}
	}
	for len(dead) > 0 {
		n := min(len(dead), exactRead)
		chunk := dead[:n]
		dead = dead[n:]
		ops := make([]clientv3.Op, 0, n)
		for _, g := range chunk {
			ops = append(ops, clientv3.OpTxn(
				[]clientv3.Cmp{
					clientv3.Compare(clientv3.ModRevision(g.k), "=", g.rev),
					clientv3.Compare(clientv3.LeaseValue(g.k), "=", g.wl.id),
				},
				[]clientv3.Op{clientv3.OpDelete(g.k)}, nil))
		}
		resp, err := s.cli.Txn(opctx(ctx)).Then(ops...).Commit()
		if err != nil {
			return // next time
		}
		for i, g := range chunk {
			if resp.Responses[i].GetResponseTxn().GetSucceeded() {
				s.log.Info("etcd: deleted an entry of a shared lease that was not kept alive",
					"key", g.k[len(s.prefix):], "rev", g.rev, "lease", fmt.Sprintf("%x", int64(g.wl.id)))
			}
			s.book.dropGarbage(g)
		}
	}
}

// sharedLease returns the shared lease for secs, granting one if the store
// has none (fresh). With later, one the store kept alive less than half its
// TTL ago is returned without a request (see leaseFor): etcd keeps it at
// least that long, so a write on it finds it alive. Otherwise it is kept
// alive first, after the call started, so that an entry written on it lives
// at least secs from the call's start.
func (s *Store) sharedLease(ctx context.Context, secs int64, later bool) (writeLease, error) {
	for {
		s.book.mu.Lock()
		g := s.book.groups[secs]
		if g == nil {
			g = &leaseGroup{}
			s.book.groups[secs] = g
		}
		if ch := g.granting; ch != nil {
			s.book.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return writeLease{}, ctx.Err()
			}
		}
		if g.id != clientv3.NoLease && !s.book.fitLocked(g) {
			// It may be close to its expiry at the server: never keep it
			// alive, never write on it (see keepUntilLocked).
			s.book.abandonLocked(g)
		}
		if id := g.id; id != clientv3.NoLease {
			granted, ready, until := g.granted, s.book.readyLocked(g), s.book.keepUntilLocked(g)
			s.book.mu.Unlock()
			if later && ready {
				return writeLease{id: id, granted: granted, shared: true}, nil
			}
			sent := s.clock.Now()
			ttl, err := s.keepAliveOnce(ctx, id, until)
			if isLeaseNotFound(err) {
				s.book.leaseGone(id)
				continue
			}
			if errors.Is(err, errTooLate) {
				s.book.abandon(id)
				continue
			}
			if err != nil {
				return writeLease{}, err
			}
			s.book.kept(id, sent)
			return writeLease{id: id, granted: seconds(ttl), shared: true, fresh: true}, nil
		}
		ch := make(chan struct{})
		g.granting = ch
		s.book.mu.Unlock()

		sent := s.clock.Now()
		resp, err := s.cli.Grant(opctx(ctx), secs)
		s.book.mu.Lock()
		g.granting = nil
		close(ch)
		if err == nil {
			g.id, g.granted, g.keptAt = resp.ID, seconds(resp.TTL), sent
		}
		s.book.mu.Unlock()
		if err != nil {
			return writeLease{}, err
		}
		return writeLease{id: resp.ID, granted: seconds(resp.TTL), shared: true, fresh: true}, nil
	}
}

// leaseReady reports whether a write of secs seconds can go out without a
// lease request first: the store has a shared lease for secs that it kept
// alive less than half its TTL ago.
func (s *Store) leaseReady(secs int64) bool {
	if s.shared == nil {
		return false
	}
	return s.book.ready(secs)
}

// leaseGuard is how long before the earliest moment etcd may expire a
// lease of granted TTL the store stops keeping it alive, and, for a shared
// lease, writing on it. It is one rule for both lease modes (keepUntil):
// a per-entry lease meets the same race when its holder's renewal comes
// about a TTL after the last one that succeeded. etcd's lessor checks whether a lease has expired, and refreshes it,
// in two steps, apart from its revoke loop (every 500 ms, it collects the
// leases past their expiry and proposes their revocation through raft): a
// keep-alive that reaches the lessor about when the lease expires can be
// answered with success while the revocation already decided goes on and
// deletes every key on the lease, even one written after the keep-alive.
// A keep-alive must therefore be decided well before the expiry: it waits
// on the server for a leadership check (a heartbeat round), for the applied
// index (an fsync-bound apply backlog), and on the store's one stream
// behind a keep-alive that waits for a revocation (up to a revoke tick plus
// a raft round). One second covers a revoke tick and that latency twice
// over; a quarter of the TTL scales with longer leases, where the store can
// afford it. It is never more than half the TTL, so that a lease ready for
// a write without a request (readyLocked) is always fit to be kept alive.
func leaseGuard(granted time.Duration) time.Duration {
	return min(max(granted/4, time.Second), granted/2)
}

// keepUntil is the latest time the store may send a keep-alive of a lease
// granted for granted whose last grant or keep-alive that etcd answered
// alive was sent at keptAt (a clock reading taken before the send): etcd
// keeps the lease at least until keptAt + granted, and leaseGuard keeps the
// store's keep-alives away from that moment. A keep-alive that would be
// sent later is not sent (keepAliveOnce), and the renewal is lost
// (tooLate). Both lease modes use it: a shared lease with its group's
// keptAt, a per-entry lease with its entry's.
func keepUntil(keptAt time.Time, granted time.Duration) time.Time {
	return keptAt.Add(granted - leaseGuard(granted))
}

// tooLate is the error of a renewal refused because its lease may be close
// to its expiry at the server (errTooLate): the claim is lost (class lost),
// and left to lapse; its holder's deadline passes before the lease can
// expire. It is no *ConflictError: nothing was sent, and the entry is
// still there at rev until its lease expires, so the error must not say
// the key is absent or changed (ErrNotFound, ErrConflict).
func (s *Store) tooLate(key string, rev int64) error {
	return fmt.Errorf("etcd: keepalive %q at revision %d: %w", key, rev,
		&backends.ClassError{Class: backends.ClassLost, Err: errTooLate})
}

// keepShared keeps shared lease id alive once and records it (kept),
// unless the lease may be close to its expiry at the server (see
// leaseGuard) or is none of the store's current shared leases: then nothing
// is sent, the lease is abandoned, and the error is errTooLate.
func (s *Store) keepShared(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	until, ok := s.book.keepUntil(id)
	sent := s.clock.Now()
	if !ok || !sent.Before(until) {
		s.book.abandon(id)
		return 0, errTooLate
	}
	ttl, err := s.keepAliveOnce(ctx, id, until)
	if errors.Is(err, errTooLate) {
		s.book.abandon(id)
		return 0, err
	}
	if err == nil {
		s.book.kept(id, sent)
	}
	return ttl, err
}
