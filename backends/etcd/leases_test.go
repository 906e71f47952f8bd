package etcd

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/clocktest"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// These tests pin the lease book's invariants without a server: the book
// sends nothing, so what it records is all there is to check.

func newTestBook(t *testing.T) (*leaseBook, *clocktest.Clock) {
	t.Helper()
	clk := clocktest.New(time.Unix(1_000_000, 0))
	b := &leaseBook{}
	b.init(clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return b, clk
}

// ownWrite records a successful write of k at rev on lease id, as put does.
func ownWrite(b *leaseBook, k string, rev int64, id clientv3.LeaseID, shared bool, at time.Time) {
	b.beginWrite(k)
	b.wrote(k, backends.Entry{Revision: rev, CreateRevision: rev}, writeLease{id: id, granted: 10 * time.Second, shared: shared, sent: at}, at, true)
	b.endWrite(k)
}

func vouched(b *leaseBook, k string, rev int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	h := b.held[k]
	return h != nil && b.vouchedLocked(k, h, rev)
}

func TestLeaseBookVouchesForOwnWritesOnly(t *testing.T) {
	b, clk := newTestBook(t)
	ownWrite(b, "k", 5, 1, false, clk.Now())
	if !vouched(b, "k", 5) {
		t.Fatalf("own write at 5: not vouched for")
	}
	if vouched(b, "k", 4) {
		t.Errorf("own write at 5: vouched for at 4")
	}
	b.wrote("found", backends.Entry{Revision: 7}, writeLease{id: 2, granted: 10 * time.Second}, clk.Now(), false)
	if vouched(b, "found", 7) {
		t.Errorf("entry found by a read: vouched for")
	}
	b.revouch("found", 7, 7)
	if vouched(b, "found", 7) {
		t.Errorf("entry found by a read, after revouch: vouched for")
	}
}

func TestLeaseBookWriteInFlightSuspendsWord(t *testing.T) {
	b, clk := newTestBook(t)
	ownWrite(b, "k", 5, 1, false, clk.Now())
	b.beginWrite("k")
	if vouched(b, "k", 5) {
		t.Errorf("with a write of k in flight: vouched for")
	}
	b.endWrite("k")
	if !vouched(b, "k", 5) {
		t.Errorf("after the write in flight ended: not vouched for")
	}
	if n := len(b.inflight); n != 0 {
		t.Errorf("after every write ended: inflight has %d keys, want 0", n)
	}
}

func TestLeaseBookUnsureIsForGood(t *testing.T) {
	b, clk := newTestBook(t)
	ownWrite(b, "k", 5, 1, false, clk.Now())
	b.unsure("k")
	if vouched(b, "k", 5) {
		t.Fatalf("after an unknown outcome: vouched for")
	}
	b.revouch("k", 5, 5)
	if vouched(b, "k", 5) {
		t.Errorf("after an unknown outcome and revouch: vouched for")
	}
}

func TestLeaseBookChangeSeenDuringWrite(t *testing.T) {
	b, clk := newTestBook(t)
	b.mu.Lock()
	b.watchFrom = 1 // the sentinel runs
	b.mu.Unlock()
	b.beginWrite("k")
	// The sentinel delivers a change of k at 9 before our write at 8
	// registers: that write cannot be vouched for.
	b.changed("k", 9)
	b.wrote("k", backends.Entry{Revision: 8}, writeLease{id: 1, granted: 10 * time.Second}, clk.Now(), true)
	b.endWrite("k")
	if vouched(b, "k", 8) {
		t.Errorf("write at 8 after a change at 9 seen while it was in flight: vouched for")
	}
	if _, ok := b.seenWriting["k"]; ok {
		t.Errorf("after the last write of k ended: seenWriting still holds k")
	}
	if b.seen != 9 {
		t.Errorf("seen = %d, want 9", b.seen)
	}
	b.changed("k", 3)
	if b.seen != 9 {
		t.Errorf("after a change at 3: seen = %d, want 9 (it only moves forward)", b.seen)
	}
}

func TestLeaseBookWatchDownVouchesForNothing(t *testing.T) {
	b, clk := newTestBook(t)
	b.mu.Lock()
	b.watchFrom = 1
	b.mu.Unlock()
	ownWrite(b, "k", 5, 1, false, clk.Now())
	b.watchEnded()
	if vouched(b, "k", 5) {
		t.Fatalf("watch down: vouched for k")
	}
	ownWrite(b, "j", 6, 2, false, clk.Now())
	if vouched(b, "j", 6) {
		t.Errorf("watch down: vouched for an entry written meanwhile")
	}
	b.revouch("k", 5, 10)
	if vouched(b, "k", 5) {
		t.Errorf("watch down: revouch gave the word back")
	}
	b.watchUp()
	if vouched(b, "k", 5) {
		t.Errorf("watch up again: vouched for k before a read")
	}
	b.revouch("k", 5, 10)
	if !vouched(b, "k", 5) {
		t.Errorf("watch up, read at 10 found k at 5: not vouched for")
	}
}

func TestLeaseBookRenewalsOnlyMoveForward(t *testing.T) {
	b, clk := newTestBook(t)
	t0 := clk.Now()
	ownWrite(b, "k", 5, 1, false, t0)
	early := t0.Add(-time.Second)
	b.wrote("k", backends.Entry{Revision: 5}, writeLease{id: 1, granted: 10 * time.Second, sent: early}, early, false)
	if _, ok := b.renewed("k", 5, 1, 10*time.Second, early, early); !ok {
		t.Fatalf("renewed k at 5 on its lease: not recorded")
	}
	h := b.held["k"]
	if !h.renewed.Equal(t0) || !h.keptAt.Equal(t0) {
		t.Errorf("after records from before %v: renewed %v, keptAt %v; want both %v", t0, h.renewed, h.keptAt, t0)
	}
	if _, ok := b.renewed("k", 5, 2, 10*time.Second, t0, t0); ok {
		t.Errorf("renewed k at 5 on another lease: recorded")
	}
}

func TestLeaseBookGarbage(t *testing.T) {
	b, clk := newTestBook(t)
	ownWrite(b, "idle", 5, 1, true, clk.Now())
	ownWrite(b, "busy", 6, 1, true, clk.Now())
	ownWrite(b, "writing", 7, 1, true, clk.Now())
	ownWrite(b, "own", 8, 2, false, clk.Now())
	b.writeUnknown("lost", writeLease{id: 1, granted: 10 * time.Second, shared: true})
	b.beginWrite("writing")
	defer b.endWrite("writing")

	dead, unknown := b.garbage(clk.Now(), nil)
	if len(dead) != 0 || len(unknown) != 1 || unknown[0].k != "lost" {
		t.Fatalf("before any TTL passed: dead %v, unknown %v; want none dead and the mark of lost", dead, unknown)
	}
	clk.Add(10*time.Second + time.Millisecond)
	dead, _ = b.garbage(clk.Now(), map[string]bool{"busy": true})
	if len(dead) != 1 || dead[0].k != "idle" || dead[0].rev != 5 {
		t.Errorf("a TTL later, busy being kept alive and writing in flight: dead %v, want only idle at 5", dead)
	}
	b.beginWrite("lost")
	if _, unknown := b.garbage(clk.Now(), nil); len(unknown) != 0 {
		t.Errorf("with a write of lost in flight: unknown %v, want none", unknown)
	}
	b.endWrite("lost")
}

func TestLeaseBookSettleUnknown(t *testing.T) {
	mark := writeLease{id: 1, granted: 10 * time.Second, shared: true}
	for _, tc := range []struct {
		name      string
		kv        *mvccpb.KeyValue
		known     bool // the registry holds the key at kv's revision
		delete    bool
		markStays bool
	}{
		{name: "absent", kv: nil, delete: false, markStays: false},
		{name: "on another lease", kv: &mvccpb.KeyValue{ModRevision: 9, Lease: 2}, delete: false, markStays: false},
		{name: "on its lease", kv: &mvccpb.KeyValue{ModRevision: 9, Lease: 1}, delete: true, markStays: true},
		{name: "on its lease, known", kv: &mvccpb.KeyValue{ModRevision: 9, Lease: 1}, known: true, delete: false, markStays: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, clk := newTestBook(t)
			if tc.known {
				ownWrite(b, "k", 9, 1, true, clk.Now())
			}
			b.writeUnknown("k", mark)
			got := b.settleUnknown(garbage{k: "k", wl: mark}, tc.kv)
			_, stays := b.unknown["k"]
			if got != tc.delete || stays != tc.markStays {
				t.Errorf("settleUnknown(%+v) = %v, mark kept %v; want %v, %v", tc.kv, got, stays, tc.delete, tc.markStays)
			}
		})
	}
}

func TestLeaseBookAbandonedLeaseIsNotReused(t *testing.T) {
	b, clk := newTestBook(t)
	g := &leaseGroup{id: 7, granted: 10 * time.Second, keptAt: clk.Now()}
	b.groups[10] = g
	if !b.ready(10) || !b.owns(7) {
		t.Fatalf("freshly kept group: ready %v, owns %v; want both", b.ready(10), b.owns(7))
	}
	clk.Add(10*time.Second - leaseGuard(10*time.Second))
	b.mu.Lock()
	fit := b.fitLocked(g)
	b.mu.Unlock()
	if fit {
		t.Fatalf("at keepUntil: the group's lease is still fit")
	}
	b.abandon(7)
	if b.owns(7) || b.ready(10) || !b.isAbandoned(7) {
		t.Errorf("after abandon: owns %v, ready %v, abandoned %v; want false, false, true", b.owns(7), b.ready(10), b.isAbandoned(7))
	}
	if _, ok := b.keepUntil(7); ok {
		t.Errorf("after abandon: keepUntil of the lease is known")
	}
	b.kept(7, clk.Now())
	if g.id != clientv3.NoLease {
		t.Errorf("a late keep-alive of the abandoned lease gave it back to its group")
	}
}

func TestLeaseBookLeaseGoneForgetsItsEntries(t *testing.T) {
	b, clk := newTestBook(t)
	b.groups[10] = &leaseGroup{id: 1, granted: 10 * time.Second, keptAt: clk.Now()}
	ownWrite(b, "a", 5, 1, true, clk.Now())
	ownWrite(b, "b", 6, 2, false, clk.Now())
	b.writeUnknown("c", writeLease{id: 1, shared: true})
	b.leaseGone(1)
	if _, ok := b.held["a"]; ok {
		t.Errorf("entry on the gone lease still held")
	}
	if _, ok := b.held["b"]; !ok {
		t.Errorf("entry on another lease forgotten")
	}
	if _, ok := b.unknown["c"]; ok {
		t.Errorf("mark on the gone lease still kept")
	}
	if b.owns(1) {
		t.Errorf("gone lease still a group's")
	}
}

func TestLeaseBookPrunesExpiredPerEntryRecords(t *testing.T) {
	b, clk := newTestBook(t)
	for i := range 63 {
		ownWrite(b, string(rune('A'+i)), int64(i+1), clientv3.LeaseID(i+1), false, clk.Now())
	}
	clk.Add(21 * time.Second) // past twice the granted TTL
	ownWrite(b, "new", 100, 100, false, clk.Now())
	if n := len(b.held); n != 1 {
		t.Errorf("after a write past twice every TTL: %d records, want 1", n)
	}
}
