package etcd

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/closer"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// leaseBook is a store's bookkeeping of the entries it wrote with a TTL and
// of the leases they are on: the registry of entries (held), the marks of
// writes with unknown outcomes on a shared lease (unknown), the writes in
// flight (inflight), the shared leases by TTL (groups) and those given up
// (abandoned), and what the sentinel has seen. It sends no request and
// starts no goroutine: the store does the I/O and records its outcome here.
//
// Its mutex guards every field below it, the store's closed state among
// them; no method holds it across I/O or a callback, and the methods named
// ...Locked expect the caller to hold it. What the book keeps, and what it
// keeps true, is:
//
//   - held has at most one entry per etcd key, the one the store last
//     wrote, kept alive or found by a read there; an entry is on one lease,
//     and shared says whether that lease is a group's.
//   - An entry is vouched for only if the store wrote it itself (own), no
//     write of the store's own on its key had an unknown outcome while it
//     was current (unsure), and the sentinel saw no later change of its
//     key. Once unsure, never vouched again; while the sentinel's watch is
//     down (watchDown), nothing is (vouchedLocked).
//   - inflight counts the writes of a key begun and not ended; an entry
//     whose key has a write in flight is neither vouched for nor garbage,
//     and seenWriting holds a key only while it has a write in flight.
//   - A group's lease found unfit to be kept alive (fitLocked: past
//     keepUntil of its last keep-alive) is abandoned: the group drops it
//     for good, and abandoned keeps it for a while, so that a renewal of an
//     entry found on it by a read is refused too.
//   - An entry's renewed and keptAt, and a group's keptAt for one lease,
//     only move forward; so do watchFrom and seen.
type leaseBook struct {
	clock clock.Clock
	log   *slog.Logger
	// wake wakes the shared-lease batcher (an entry or a mark it must
	// serve or collect appeared); nil without a shared lease. Safe under mu.
	wake func()

	mu sync.Mutex
	// closing is the store's closed state, marked under mu.
	closing  closer.Once
	held     map[string]*heldEntry // guarded by mu; by etcd key
	unknown  map[string]writeLease // guarded by mu; writes on a shared lease with unknown outcomes, by etcd key
	inflight map[string]int        // guarded by mu; writes in flight, by etcd key
	groups   map[int64]*leaseGroup // guarded by mu; shared leases by TTL in seconds
	// abandoned holds the shared leases the store stopped using because
	// they may be close to their expiry (see leaseGuard), with when; they
	// are never kept alive again.
	abandoned map[clientv3.LeaseID]time.Time // guarded by mu
	pruneAt   int                            // guarded by mu; len(held) that triggers a prune

	// The sentinel (see sentinel.go). watchFrom is the revision from
	// which its watch has seen every change under the prefix, 0 until it
	// starts; seen is the last revision it saw a change at.
	watchFrom    int64 // guarded by mu
	seen         int64 // guarded by mu
	watchCreated bool  // guarded by mu; for tests: the watch is established
	// watchDown: the sentinel's watch ended, and is not established again
	// yet; the store vouches for nothing meanwhile (see watchEnded).
	watchDown bool // guarded by mu
	// seenWriting holds, for each key with a write of ours in flight,
	// the last revision the sentinel saw that key change at meanwhile: a
	// write it delivers before the writer registers its entry would
	// otherwise be missed (changed finds no entry of that write to
	// withdraw). It is dropped with the key's last write in flight, so it
	// never holds more keys than there are writes in flight.
	seenWriting map[string]int64 // guarded by mu; by etcd key
}

// init readies an empty book that judges time by c and logs to log.
func (b *leaseBook) init(c clock.Clock, log *slog.Logger) {
	b.clock, b.log = c, log
	b.held = make(map[string]*heldEntry)
	b.unknown = make(map[string]writeLease)
	b.inflight = make(map[string]int)
	b.seenWriting = make(map[string]int64)
	b.groups = make(map[int64]*leaseGroup)
	b.abandoned = make(map[clientv3.LeaseID]time.Time)
	b.pruneAt = 64
}

// garbage lists the entries of shared leases that are garbage at now (not
// kept alive for their whole granted TTL since their last renewal began),
// and the marks of writes with unknown outcomes, leaving out keys with a
// write of ours in flight and, among entries, keys in busy.
func (b *leaseBook) garbage(now time.Time, busy map[string]bool) (dead, unknown []garbage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, wl := range b.unknown {
		if b.inflight[k] == 0 {
			unknown = append(unknown, garbage{k: k, wl: wl})
		}
	}
	for k, h := range b.held {
		if !h.shared || busy[k] || b.inflight[k] > 0 {
			continue
		}
		if now.After(h.renewed.Add(h.granted)) {
			dead = append(dead, garbage{k: k, rev: h.rev, h: h, wl: writeLease{id: h.lease}})
		}
	}
	return dead, unknown
}

// settleUnknown judges the mark g of a write with an unknown outcome by kv,
// its key as a read after the mark found it (nil: absent). It reports
// whether kv may be deleted as what the write left: only if kv is on the
// write's lease, no write of ours has started since the read that could
// have made this very revision (any would show in inflight or have
// dropped the mark), and the registry does not know kv's revision. A mark
// with nothing of the write's left is dropped.
func (b *leaseBook) settleUnknown(g garbage, kv *mvccpb.KeyValue) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	wl, marked := b.unknown[g.k]
	h := b.held[g.k]
	mine := kv != nil && clientv3.LeaseID(kv.Lease) == g.wl.id
	known := kv != nil && h != nil && h.rev == kv.ModRevision
	ok := mine && !known && marked && wl == g.wl && b.inflight[g.k] == 0
	if marked && wl == g.wl && (!mine || known) {
		delete(b.unknown, g.k) // nothing of the write's is left
	}
	return ok
}

// ready reports whether the book has a shared lease for secs, not being
// granted, that was kept alive less than half its TTL ago (readyLocked).
func (b *leaseBook) ready(secs int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := b.groups[secs]
	return g != nil && g.id != clientv3.NoLease && g.granting == nil && b.readyLocked(g)
}

// wakeShared wakes the shared-lease batcher, if there is one.
func (b *leaseBook) wakeShared() {
	if b.wake != nil {
		b.wake()
	}
}

// grantedOf is the granted TTL of the entry of k on lease id, if the
// store wrote or kept alive that entry itself; 0 otherwise.
func (b *leaseBook) grantedOf(k string, id clientv3.LeaseID) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.held[k]; h != nil && h.lease == id {
		return h.granted
	}
	return 0
}

// sentinelFromLocked reports the revision from which the sentinel must
// watch, and records it, if it is not running yet and there is an entry
// to vouch for; 0 if nothing is to start. The caller holds mu and starts
// the watch.
func (b *leaseBook) sentinelFromLocked() int64 {
	if b.watchFrom != 0 || b.closing.Closed() {
		return 0
	}
	from := int64(0)
	for _, h := range b.held {
		if h.vouched && (from == 0 || h.rev < from) {
			from = h.rev
		}
	}
	b.watchFrom = from
	return from
}

// heldEntry is what the store knows about an entry it wrote with a TTL.
//
// For a per-entry lease it records that the lease was granted by this store
// for this key alone, so that KeepAlive need not ask etcd which keys the lease
// carries. For a shared lease it is the registry the batcher verifies and
// collects garbage from.
type heldEntry struct {
	rev, createRev int64
	value          []byte
	lease          clientv3.LeaseID
	granted        time.Duration
	shared         bool

	// renewed is the start of the last successful write or keep-alive: the
	// holder's deadline is at most renewed + granted. A shared entry not kept
	// alive past that is garbage (its holder stopped acting) and the batcher
	// deletes it.
	renewed time.Time
	// keptAt, for a per-entry lease, is when the last grant or keep-alive
	// of lease that etcd answered alive was sent (a clock reading before
	// the send): etcd keeps the lease at least until keptAt + granted, and
	// the store sends no keep-alive of it after keepUntil(keptAt, granted).
	// A shared lease's is its group's.
	keptAt time.Time

	// vouched: the store wrote the entry itself, and vouches that it is
	// still at rev on lease as long as its lease lives, no write of its own
	// on the key is in flight, and the sentinel saw no change of the key
	// (see vouchedLocked). A KeepAlive of a vouched entry is a keep-alive
	// alone; of any other, a keep-alive checked by a read.
	vouched bool
	// own: the store wrote the entry itself (it did not find it by a read).
	own bool
	// unsure: a write of ours on the key had an unknown outcome while this
	// entry was current. It may still be applied, so the entry is never
	// vouched for again.
	unsure bool
	// touched counts the writes of ours on the key begun while this entry
	// was current: a keep-alive that saw it change while in flight cannot
	// vouch for its entry at its send.
	touched uint64
}

// leaseGroup is the shared lease of one TTL.
type leaseGroup struct {
	id       clientv3.LeaseID // 0 while there is none
	granted  time.Duration
	granting chan struct{} // non-nil while a Grant is in flight; closed after it
	// keptAt is when the last successful grant or keep-alive of id was
	// sent: etcd keeps the lease at least until keptAt + granted.
	keptAt time.Time
}

// vouchedLocked reports whether the store vouches that k is at rev on h's
// lease for as long as that lease lives. It does when it wrote h itself,
// no write of its own on k is in flight, none had an unknown outcome, and
// the sentinel saw no change of k after rev.
//
// This rests on one rule of use: an entry a store wrote with a TTL is
// changed afterwards only by that store's own writes or by the expiry of its
// lease (the contract's claims, leases and slots are used that way: a
// holder renews and releases what it created, and others take a claim only
// once it is absent). The store's own writes show in the registry and in
// inflight; expiry shows in the keep-alive's answer (the lease is gone).
// Anything else, another process or an etcd client deleting or rewriting the
// key, is outside the rule and is caught by the sentinel: from the moment its
// watch delivers the change, the store no longer vouches for the entry. A
// keep-alive sent before that moment (the watch's delay, usually a
// millisecond) may still succeed.
func (b *leaseBook) vouchedLocked(k string, h *heldEntry, rev int64) bool {
	return h.rev == rev && h.vouched && b.inflight[k] == 0 && !b.watchDown
}

// unchanged reports whether h is still the entry of k, with no write of
// ours on k begun since touched was read, and, if vouched, still vouched
// for.
func (b *leaseBook) unchanged(k string, h *heldEntry, touched uint64, vouched bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held[k] == h && h.touched == touched && (h.vouched || !vouched)
}

// revouch gives the store's word back to the entry of k at rev, which a
// read at revision readRev found unchanged, if it lost it only because the
// sentinel may have missed changes: the sentinel's watch is established
// (not down: see watchEnded), covers every change from before readRev on,
// and has seen none after it (a change it saw after the read would mean
// the read is already stale). An entry the store
// did not write, or one a write of ours with an unknown outcome may still
// change, never gets it back.
func (b *leaseBook) revouch(k string, rev, readRev int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.held[k]
	if h == nil || h.rev != rev || !h.own || h.unsure || h.vouched {
		return
	}
	if b.watchFrom != 0 && !b.watchDown && b.watchFrom <= readRev+1 && b.seen <= readRev {
		h.vouched = true
	}
}

// beginWrite and endWrite bracket every write of k, so that the shared-lease
// garbage collector never deletes an entry a write of ours may have just
// made.
func (b *leaseBook) beginWrite(k string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inflight[k]++
	if h := b.held[k]; h != nil {
		h.touched++
	}
}

func (b *leaseBook) endWrite(k string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inflight[k]--; b.inflight[k] <= 0 {
		delete(b.inflight, k)
		delete(b.seenWriting, k)
	}
}

// wrote records a successful write of k at e.Revision (own), or a
// keep-alive of an entry the store found by a read (not own, and so not
// vouched for: another store may have written it, and rewrite it).
func (b *leaseBook) wrote(k string, e backends.Entry, wl writeLease, start time.Time, own bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if wl.id == clientv3.NoLease {
		delete(b.held, k)
		return
	}
	if own {
		delete(b.unknown, k) // a write of ours took the key over
	}
	if h := b.held[k]; h != nil && h.rev == e.Revision && h.lease == wl.id {
		if start.After(h.renewed) {
			h.renewed = start
		}
		if wl.sent.After(h.keptAt) {
			h.keptAt = wl.sent
		}
		h.granted = wl.granted
		return
	}
	b.held[k] = &heldEntry{
		rev: e.Revision, createRev: e.CreateRevision, value: e.Value,
		lease: wl.id, granted: wl.granted, shared: wl.shared, renewed: start, keptAt: wl.sent,
		// Once the sentinel runs, it covers only revisions from watchFrom,
		// and a change of k it delivered while this write was in flight
		// withdrew nothing: it is compared here.
		vouched: own && !b.watchDown && (b.watchFrom == 0 || e.Revision >= b.watchFrom) && b.seenWriting[k] <= e.Revision,
		own:     own,
	}
	b.pruneLocked()
	if wl.shared {
		b.wakeShared()
	}
}

// adopt registers an entry found on one of our shared leases.
func (b *leaseBook) adopt(k string, kv *mvccpb.KeyValue, id clientv3.LeaseID, start time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.held[k]; h != nil && h.rev == kv.ModRevision && h.lease == id {
		return
	}
	granted := time.Duration(0)
	for _, g := range b.groups {
		if g.id == id {
			granted = g.granted
		}
	}
	b.held[k] = &heldEntry{
		rev: kv.ModRevision, createRev: kv.CreateRevision, value: kv.Value,
		lease: id, granted: granted, shared: true, renewed: start,
	}
	b.wakeShared()
}

// writeUnknown records that a write of k may or may not have happened. On a
// shared lease the possible entry is marked for the garbage collector: no
// holder knows its revision, so nobody would ever delete it, and the shared
// lease would keep it alive. The mark sits beside the registry, never in
// it: the key may be held, by an entry of ours that another caller keeps
// alive, and that entry is not garbage because a write next to it failed.
func (b *leaseBook) writeUnknown(k string, wl writeLease) {
	b.unsure(k)
	if !wl.shared {
		return // a per-entry lease expires by itself
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.unknown[k] = wl
	b.wakeShared()
}

// unsure records that a write of ours on k had an unknown outcome: it may
// have changed the entry the registry knows, now or later, so the store
// never vouches for that entry again.
func (b *leaseBook) unsure(k string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.held[k]; h != nil {
		h.vouched, h.unsure = false, true
	}
}

func (b *leaseBook) deleted(k string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.held, k)
	delete(b.unknown, k)
}

// forget drops k if it is still recorded on lease id.
func (b *leaseBook) forget(k string, id clientv3.LeaseID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.held[k]; h != nil && h.lease == id {
		delete(b.held, k)
	}
}

// forgetRev drops k if it is still recorded at rev.
func (b *leaseBook) forgetRev(k string, rev int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.held[k]; h != nil && h.rev == rev {
		delete(b.held, k)
	}
}

// perEntryLease reports the lease of k at rev, its granted TTL, and when it
// was last kept alive (heldEntry.keptAt), if this store knows that lease
// as a per-entry lease of k alone.
func (b *leaseBook) perEntryLease(k string, rev int64) (id clientv3.LeaseID, granted time.Duration, keptAt time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.held[k]
	if h == nil || h.shared || h.rev != rev {
		return clientv3.NoLease, 0, time.Time{}, false
	}
	return h.lease, h.granted, h.keptAt, true
}

// pruneLocked drops per-entry records whose lease has certainly expired, so
// that a store writing ever new keys does not grow without bound. They are
// only a cache: KeepAlive asks etcd when a record is missing.
func (b *leaseBook) pruneLocked() {
	if len(b.held) < b.pruneAt {
		return
	}
	now := b.clock.Now()
	for k, h := range b.held {
		if !h.shared && now.Sub(h.renewed) > 2*h.granted {
			delete(b.held, k)
		}
	}
	b.pruneAt = 2*len(b.held) + 64
}

// changed withdraws the store's word for the entry of k if the sentinel saw
// k change after the revision the store knows. A change the store made
// itself is either already in the registry (rev is the entry's) or is a
// write in flight. While a write of ours on k is in flight, the change is
// also kept in seenWriting: the write may have committed below rev and not
// be registered yet, and wrote then refuses to vouch for it. The watch
// delivers each change once, so a change it delivers before the entry it
// concerns is registered must not be lost.
func (b *leaseBook) changed(k string, rev int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if h := b.held[k]; h != nil && rev > h.rev {
		h.vouched = false
	}
	if b.inflight[k] > 0 && rev > b.seenWriting[k] {
		b.seenWriting[k] = rev
	}
	if rev > b.seen {
		b.seen = rev
	}
}

// distrustAll withdraws the store's word for every entry: the sentinel may
// have missed changes before revision from.
func (b *leaseBook) distrustAll(from int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range b.held {
		h.vouched = false
	}
	if from > b.watchFrom {
		b.watchFrom = from
	}
}

// watchUp records that the sentinel's watch is established: the store may
// vouch again, for entries written from now on and for those a read gives
// the word back to (revouch). Entries that lost it while the watch was down
// do not get it back here: a change among the revisions the watch replays
// may not be delivered yet.
func (b *leaseBook) watchUp() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.watchCreated, b.watchDown = true, false
}

// watchEnded records that the sentinel's watch ended (not by Close): until
// it is established again, a change of any key would go unseen, so the
// store withdraws its word for every entry and vouches for none.
func (b *leaseBook) watchEnded() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.watchCreated, b.watchDown = false, true
	for _, h := range b.held {
		h.vouched = false
	}
}

// renewed records a successful keep-alive of k at rev, of a call begun at
// start, and returns its entry. sent is when the keep-alive was sent, for a
// per-entry lease (heldEntry.keptAt); zero for a shared one, whose group
// records it (kept).
func (b *leaseBook) renewed(k string, rev int64, id clientv3.LeaseID, granted time.Duration, start, sent time.Time) (backends.Entry, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.held[k]
	if h == nil || h.rev != rev || h.lease != id {
		return backends.Entry{}, false
	}
	if start.After(h.renewed) {
		h.renewed = start
	}
	if sent.After(h.keptAt) {
		h.keptAt = sent
	}
	h.granted = granted
	return backends.Entry{Value: h.value, Revision: h.rev, CreateRevision: h.createRev, TTL: granted, Remaining: granted}, true
}

// garbageAt is when the earliest shared entry becomes garbage: at once for
// an unknown write, else when its holder's deadline has certainly passed.
func (b *leaseBook) garbageAt() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var at time.Time
	for k := range b.unknown {
		if b.inflight[k] == 0 {
			return time.Time{}.Add(1), true // as soon as possible
		}
	}
	for k, h := range b.held {
		if !h.shared || b.inflight[k] > 0 {
			continue
		}
		if t := h.renewed.Add(h.granted); at.IsZero() || t.Before(at) {
			at = t
		}
	}
	return at, !at.IsZero()
}

func (b *leaseBook) dropGarbage(g garbage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g.h == nil {
		if wl, ok := b.unknown[g.k]; ok && wl == g.wl {
			delete(b.unknown, g.k)
		}
		return
	}
	if b.held[g.k] == g.h {
		delete(b.held, g.k)
	}
}

func (b *leaseBook) readyLocked(g *leaseGroup) bool {
	return b.clock.Now().Before(g.keptAt.Add(g.granted / 2))
}

// keepUntilLocked is keepUntil of g's lease.
func (b *leaseBook) keepUntilLocked(g *leaseGroup) time.Time {
	return keepUntil(g.keptAt, g.granted)
}

// fitLocked reports whether g's lease may still be kept alive and written
// on (see leaseGuard).
func (b *leaseBook) fitLocked(g *leaseGroup) bool {
	return b.clock.Now().Before(b.keepUntilLocked(g))
}

// keepUntil returns keepUntilLocked of the group whose lease is id; ok is
// false if id is none of the store's current shared leases (abandoned or
// gone).
func (b *leaseBook) keepUntil(id clientv3.LeaseID) (until time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g := b.groupOfLocked(id); g != nil {
		return b.keepUntilLocked(g), true
	}
	return time.Time{}, false
}

// groupOfLocked returns the group whose current shared lease is id, or nil.
func (b *leaseBook) groupOfLocked(id clientv3.LeaseID) *leaseGroup {
	for _, g := range b.groups {
		if g.id == id {
			return g
		}
	}
	return nil
}

// abandon forgets lease id, if it is still one of the store's shared
// leases, for good: it is never kept alive or written on again, and it
// expires at the server by itself. See abandonLocked.
func (b *leaseBook) abandon(id clientv3.LeaseID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g := b.groupOfLocked(id); g != nil {
		b.abandonLocked(g)
	}
}

// abandonLocked forgets g's lease: the next write of its TTL grants a new
// one. It is not revoked: an entry on it may belong to a holder whose
// deadline has not passed (a holder's deadline is at most keptAt + granted,
// since the lease was kept alive after each of its entries' last renewal
// began), and etcd deletes the entry no sooner than the lease's expiry,
// keptAt + granted at the earliest, by which time that deadline has passed.
// Its entries stay in the registry until their next keep-alive, which they
// lose, or until the garbage collector deletes them once their holders'
// deadlines have passed; a write with an unknown outcome on it stays marked.
func (b *leaseBook) abandonLocked(g *leaseGroup) {
	now := b.clock.Now()
	for id, at := range b.abandoned {
		if now.Sub(at) > 2*maxRound {
			delete(b.abandoned, id) // long expired, whatever happened to a keep-alive in flight
		}
	}
	b.abandoned[g.id] = now
	b.log.Debug("etcd: abandoned a shared lease close to its expiry",
		"lease", fmt.Sprintf("%x", int64(g.id)), "idle", now.Sub(g.keptAt))
	g.id = clientv3.NoLease
}

// isAbandoned reports whether id is a shared lease the store abandoned.
func (b *leaseBook) isAbandoned(id clientv3.LeaseID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.abandoned[id]
	return ok
}

// kept records a successful keep-alive of lease id sent at sent.
func (b *leaseBook) kept(id clientv3.LeaseID, sent time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g := b.groupOfLocked(id); g != nil && sent.After(g.keptAt) {
		g.keptAt = sent
	}
}

// leaseGone forgets a lease etcd no longer has, and every entry on it.
func (b *leaseBook) leaseGone(id clientv3.LeaseID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, g := range b.groups {
		if g.id == id {
			g.id = clientv3.NoLease
		}
	}
	for k, h := range b.held {
		if h.lease == id {
			delete(b.held, k)
		}
	}
	for k, wl := range b.unknown {
		if wl.id == id {
			delete(b.unknown, k)
		}
	}
}

// owns reports whether id is one of the store's shared leases.
func (b *leaseBook) owns(id clientv3.LeaseID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.groupOfLocked(id) != nil
}
