package etcd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/etcd"
	"github.com/tenure-go/tenure/backends/etcd/etcdtest"
	"github.com/tenure-go/tenure/storeurl"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

func TestCapabilities(t *testing.T) {
	f := newFixture(t)
	caps := f.store.Capabilities()
	if err := backends.Require(f.store, backends.CapClaims|backends.CapCompareAndSet|backends.CapWatch|backends.CapTxn); err != nil {
		t.Errorf("Require(every capability) = %v, want nil", err)
	}
	if got := f.store.Capabilities().Scope; got != backends.ScopeDistributed {
		t.Errorf("Scope = %v, want distributed", got)
	}
	if caps.TTLGranularity != time.Second {
		t.Errorf("TTLGranularity = %v, want 1s", caps.TTLGranularity)
	}
	// etcdtest runs with a 100 ms election timeout: the minimum lease is
	// ceil(0.15 s) = 1 s.
	if caps.MinTTL != time.Second {
		t.Errorf("MinTTL = %v, want 1s", caps.MinTTL)
	}
	if caps.ExpiryJudge == "" {
		t.Errorf("ExpiryJudge is empty")
	}
}

func TestCreateIfAbsent(t *testing.T) {
	f := newFixture(t)
	ctx := testContext(t)
	e := mustCreate(t, f.store, "a/claim", "v1", 2*time.Second)
	if e.Key != "a/claim" || string(e.Value) != "v1" || e.Revision <= 0 || e.CreateRevision != e.Revision || e.TTL != 2*time.Second {
		t.Errorf("CreateIfAbsent = %+v, want key a/claim, value v1, Revision = CreateRevision > 0, TTL 2s", e)
	}

	// The etcd key is prefix + key, the value is stored as it is, and the
	// entry is on a lease of the granted TTL.
	resp, err := f.raw.Get(ctx, f.prefix+"a/claim")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw Get(%q) = %v, %v; want one key", f.prefix+"a/claim", resp, err)
	}
	kv := resp.Kvs[0]
	if string(kv.Value) != "v1" || kv.ModRevision != e.Revision || kv.CreateRevision != e.CreateRevision || kv.Lease == 0 {
		t.Errorf("raw kv = %+v, want value v1, revisions %d/%d and a lease", kv, e.Revision, e.CreateRevision)
	}

	_, err = f.store.CreateIfAbsent(ctx, "a/claim", []byte("v2"), time.Second)
	ce := conflict(t, "second CreateIfAbsent", err)
	if !errors.Is(err, backends.ErrExists) || !ce.Found || ce.Current.Revision != e.Revision || string(ce.Current.Value) != "v1" {
		t.Errorf("second CreateIfAbsent = %v (current %+v), want ErrExists with the first entry", err, ce.Current)
	}
	// A conflict costs no request beyond the write: the current entry's TTL
	// is its lease's when the store wrote it, and Remaining is unknown.
	if ce.Current.TTL != 2*time.Second || ce.Current.Remaining != 0 {
		t.Errorf("conflict's current TTL %v, Remaining %v; want 2s and 0 (unknown)", ce.Current.TTL, ce.Current.Remaining)
	}
	if got := backends.Classify(err); got != backends.ClassLost {
		t.Errorf("Classify(second create) = %v, want lost", got)
	}

	got, err := f.store.Get(ctx, "a/claim")
	if err != nil || got.Revision != e.Revision || got.TTL != 2*time.Second || got.Remaining <= 0 {
		t.Errorf("Get = %+v, %v; want revision %d, TTL 2s, Remaining > 0", got, err, e.Revision)
	}

	// Without a TTL there is no lease.
	p := mustCreate(t, f.store, "plain", "x", 0)
	if p.TTL != 0 {
		t.Errorf("create without ttl: TTL = %v, want 0", p.TTL)
	}
	if resp, _ := f.raw.Get(ctx, f.prefix+"plain"); len(resp.Kvs) != 1 || resp.Kvs[0].Lease != 0 {
		t.Errorf("raw plain = %v, want one key without lease", resp.Kvs)
	}
}

func TestTTLRounding(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		ttl, want time.Duration
	}{
		{time.Nanosecond, time.Second},
		{500 * time.Millisecond, time.Second},
		{time.Second, time.Second},
		{time.Second + time.Nanosecond, 2 * time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{3 * time.Second, 3 * time.Second},
		{time.Hour, time.Hour},
	}
	for i, tt := range tests {
		key := fmt.Sprintf("k%d", i)
		e := mustCreate(t, f.store, key, "v", tt.ttl)
		if e.TTL != tt.want {
			t.Errorf("CreateIfAbsent(ttl %v).TTL = %v, want %v", tt.ttl, e.TTL, tt.want)
		}
		if e.TTL < tt.ttl {
			t.Errorf("CreateIfAbsent(ttl %v) granted %v: shortened", tt.ttl, e.TTL)
		}
	}

	bad := []time.Duration{-time.Second, backends.MaxTTL + time.Second}
	for _, ttl := range bad {
		_, err := f.store.CreateIfAbsent(testContext(t), "bad", []byte("v"), ttl)
		if !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("CreateIfAbsent(ttl %v) = %v, want ErrInvalid", ttl, err)
		}
	}
}

func TestCompareAndSetAndDelete(t *testing.T) {
	f := newFixture(t)
	ctx := testContext(t)
	e1 := mustCreate(t, f.store, "k", "v1", 3*time.Second)

	e2, err := f.store.CompareAndSet(ctx, "k", e1.Revision, []byte("v2"), 3*time.Second)
	if err != nil {
		t.Fatalf("CompareAndSet at the current revision: %v", err)
	}
	if e2.Revision <= e1.Revision || e2.CreateRevision != e1.CreateRevision || string(e2.Value) != "v2" {
		t.Errorf("CompareAndSet = %+v, want a higher revision than %d, CreateRevision %d kept, value v2", e2, e1.Revision, e1.CreateRevision)
	}

	_, err = f.store.CompareAndSet(ctx, "k", e1.Revision, []byte("v3"), time.Second)
	if ce := conflict(t, "stale CompareAndSet", err); !ce.Found || ce.Current.Revision != e2.Revision || ce.Expected != e1.Revision {
		t.Errorf("stale CompareAndSet conflict = %+v, want current revision %d, expected %d", ce, e2.Revision, e1.Revision)
	}
	_, err = f.store.CompareAndSet(ctx, "absent", 7, []byte("v"), 0)
	if ce := conflict(t, "CompareAndSet of an absent key", err); ce.Found || !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("CompareAndSet of an absent key = %v, want a conflict wrapping ErrNotFound", err)
	}
	c0, err := f.store.CompareAndSet(ctx, "fresh", 0, []byte("v"), 0)
	if err != nil || c0.CreateRevision != c0.Revision {
		t.Errorf("CompareAndSet(rev 0) of an absent key = %+v, %v; want a create", c0, err)
	}
	if _, err := f.store.CompareAndSet(ctx, "fresh", 0, []byte("v"), 0); !errors.Is(err, backends.ErrExists) {
		t.Errorf("CompareAndSet(rev 0) of a present key = %v, want ErrExists", err)
	}

	if err := f.store.CompareAndDelete(ctx, "k", e1.Revision); conflict(t, "stale CompareAndDelete", err).Current.Revision != e2.Revision {
		t.Errorf("stale CompareAndDelete = %v, want a conflict at revision %d", err, e2.Revision)
	}
	if err := f.store.CompareAndDelete(ctx, "k", e2.Revision); err != nil {
		t.Fatalf("CompareAndDelete at the current revision: %v", err)
	}
	if _, err := f.store.Get(ctx, "k"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("Get after delete = %v, want ErrNotFound", err)
	}
	if err := f.store.CompareAndDelete(ctx, "k", e2.Revision); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("CompareAndDelete of a deleted key = %v, want a conflict wrapping ErrNotFound", err)
	}
	e3 := mustCreate(t, f.store, "k", "v3", time.Second)
	if e3.CreateRevision <= e2.Revision {
		t.Errorf("recreated CreateRevision %d, want > %d (every earlier revision)", e3.CreateRevision, e2.Revision)
	}
}

func TestKeepAlive(t *testing.T) {
	f := newFixture(t)
	ctx := testContext(t)
	e := mustCreate(t, f.store, "k", "v", 2*time.Second)

	got, err := f.store.KeepAlive(ctx, "k", e.Revision, 2*time.Second)
	if err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	if got.Revision != e.Revision || got.CreateRevision != e.CreateRevision || string(got.Value) != "v" || got.TTL != 2*time.Second {
		t.Errorf("KeepAlive = %+v, want revision %d, value v, TTL 2s", got, e.Revision)
	}
	if cur, _ := f.store.Get(ctx, "k"); cur.Revision != e.Revision {
		t.Errorf("revision after KeepAlive = %d, want %d (unchanged)", cur.Revision, e.Revision)
	}
	// A shorter TTL is rounded up to the lease's; a longer one is refused.
	if got, err := f.store.KeepAlive(ctx, "k", e.Revision, 300*time.Millisecond); err != nil || got.TTL != 2*time.Second {
		t.Errorf("KeepAlive(ttl 300ms) = %+v, %v; want TTL 2s", got, err)
	}
	if _, err := f.store.KeepAlive(ctx, "k", e.Revision, 5*time.Second); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("KeepAlive(ttl 5s) of a 2s lease = %v, want ErrInvalid", err)
	}

	if _, err := f.store.KeepAlive(ctx, "k", e.Revision+100, 2*time.Second); conflict(t, "KeepAlive at a wrong revision", err).Current.Revision != e.Revision {
		t.Errorf("KeepAlive at a wrong revision = %v, want a conflict at %d", err, e.Revision)
	}
	if _, err := f.store.KeepAlive(ctx, "absent", 5, time.Second); !errors.Is(err, backends.ErrNotFound) || backends.Classify(err) != backends.ClassLost {
		t.Errorf("KeepAlive of an absent key = %v, want a lost conflict wrapping ErrNotFound", err)
	}

	p := mustCreate(t, f.store, "plain", "v", 0)
	if _, err := f.store.KeepAlive(ctx, "plain", p.Revision, time.Second); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("KeepAlive of an entry without TTL = %v, want ErrInvalid", err)
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		if _, err := f.store.KeepAlive(ctx, "k", e.Revision, ttl); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("KeepAlive(ttl %v) = %v, want ErrInvalid", ttl, err)
		}
	}
}

// TestKeepAliveByPeer checks that a store that did not write the entry checks
// that its lease carries only that key before keeping it alive.
func TestKeepAliveByPeer(t *testing.T) {
	f := newFixture(t)
	ctx := testContext(t)
	peer := f.peer(t)
	// 5 s: a peer's first renewal is guarded by the whole seconds etcd
	// reports left (TestFirstKeepAliveOfAPeersEntry).
	e := mustCreate(t, f.store, "k", "v", 5*time.Second)
	if got, err := peer.KeepAlive(ctx, "k", e.Revision, 5*time.Second); err != nil || got.Revision != e.Revision {
		t.Errorf("peer KeepAlive = %+v, %v; want revision %d", got, err, e.Revision)
	}

	// A lease that carries two keys (another process's shared lease) is
	// never kept alive through one of them.
	lease, err := f.raw.Grant(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"s1", "s2"} {
		if _, err := f.raw.Put(ctx, f.prefix+k, "v", clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	s1, err := f.store.Get(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.store.KeepAlive(ctx, "s1", s1.Revision, time.Second)
	if !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("KeepAlive through a lease carrying two keys = %v, want ErrUnsupported", err)
	}
}

// TestExpiryAndTakeover checks that an entry nobody keeps alive expires on
// the server, is absent for every operation, and the next create gets a
// higher token.
func TestExpiryAndTakeover(t *testing.T) {
	f := newFixture(t)
	ctx := testContext(t)
	peer := f.peer(t)
	first := mustCreate(t, f.store, "claim", "a", time.Second)
	if _, err := peer.CreateIfAbsent(ctx, "claim", []byte("b"), time.Second); !errors.Is(err, backends.ErrExists) {
		t.Fatalf("peer create while held = %v, want ErrExists", err)
	}
	waitAbsent(t, peer, "claim", 5*time.Second)

	if _, err := f.store.KeepAlive(ctx, "claim", first.Revision, time.Second); backends.Classify(err) != backends.ClassLost {
		t.Errorf("KeepAlive after expiry = %v, want class lost", err)
	}
	if err := f.store.CompareAndDelete(ctx, "claim", first.Revision); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("CompareAndDelete after expiry = %v, want ErrNotFound", err)
	}
	if list, err := f.store.List(ctx, ""); err != nil || len(list) != 0 {
		t.Errorf("List after expiry = %v, %v; want empty", list, err)
	}
	second, err := peer.CreateIfAbsent(ctx, "claim", []byte("b"), time.Second)
	if err != nil {
		t.Fatalf("takeover after expiry: %v", err)
	}
	if second.CreateRevision <= first.CreateRevision {
		t.Errorf("token after takeover %d, want > %d", second.CreateRevision, first.CreateRevision)
	}
}

// TestTokensAcrossRestart checks that tokens keep increasing across a restart
// of etcd, and entries without TTL survive it.
func TestTokensAcrossRestart(t *testing.T) {
	servers(t, func(t *testing.T, start func(testing.TB) server) {
		f := newFixtureOn(t, start(t))
		ctx := testContext(t)
		var last int64
		for i := 0; i < 3; i++ {
			e := mustCreate(t, f.store, "claim", "v", 0)
			if e.CreateRevision <= last {
				t.Fatalf("round %d: token %d, want > %d", i, e.CreateRevision, last)
			}
			last = e.CreateRevision
			if i == 1 {
				f.srv.Restart(t)
				waitFor(t, 10*time.Second, "store answers after restart", func(ctx context.Context) bool {
					got, err := f.store.Get(ctx, "claim")
					return err == nil && got.CreateRevision == last
				})
			}
			if err := f.store.CompareAndDelete(ctx, "claim", e.Revision); err != nil {
				t.Fatalf("round %d: delete: %v", i, err)
			}
		}
	})
}

func TestList(t *testing.T) {
	f := newFixture(t)
	ctx := testContext(t)
	for _, k := range []string{"b/2", "a/1", "b/1", "c"} {
		mustCreate(t, f.store, k, "v-"+k, 2*time.Second)
	}
	mustCreate(t, f.store, "b/plain", "p", 0)
	// A key outside the store's prefix is invisible.
	if _, err := f.raw.Put(ctx, "other/b/3", "x"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"a/1", "b/1", "b/2", "b/plain", "c"}},
		{"b/", []string{"b/1", "b/2", "b/plain"}},
		{"z", nil},
	}
	for _, tt := range tests {
		got, err := f.store.List(ctx, tt.prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", tt.prefix, err)
		}
		var keys []string
		for _, e := range got {
			keys = append(keys, e.Key)
			if string(e.Value) != "v-"+e.Key && e.Key != "b/plain" {
				t.Errorf("List(%q): %q has value %q", tt.prefix, e.Key, e.Value)
			}
			if wantTTL := map[bool]time.Duration{true: 0, false: 2 * time.Second}[e.Key == "b/plain"]; e.TTL != wantTTL {
				t.Errorf("List(%q): %q has TTL %v, want %v", tt.prefix, e.Key, e.TTL, wantTTL)
			}
		}
		if fmt.Sprint(keys) != fmt.Sprint(tt.want) {
			t.Errorf("List(%q) keys = %v, want %v", tt.prefix, keys, tt.want)
		}
	}
}

func TestWatch(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	before := mustCreate(t, f.store, "w/before", "x", 0)
	events, err := f.store.Watch(ctx, "w/")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if err := f.store.CompareAndDelete(ctx, "w/before", before.Revision); err != nil {
		t.Fatal(err)
	}
	a := mustCreate(t, f.store, "w/a", "1", time.Second)
	mustCreate(t, f.store, "elsewhere", "1", 0)
	a2, err := f.store.CompareAndSet(ctx, "w/a", a.Revision, []byte("2"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.KeepAlive(ctx, "w/a", a2.Revision, time.Second); err != nil {
		t.Fatal(err)
	}
	// w/a then expires: etcd deletes it, and that is an event too.
	want := []struct {
		kind backends.EventKind
		key  string
		rev  int64
	}{
		{backends.EventDelete, "w/before", before.Revision},
		{backends.EventPut, "w/a", a.Revision},
		{backends.EventPut, "w/a", a2.Revision},
		{backends.EventDelete, "w/a", a2.Revision},
	}
	for i, w := range want {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("event %d: channel closed, want %v %q", i, w.kind, w.key)
			}
			if ev.Kind != w.kind || ev.Entry.Key != w.key || ev.Entry.Revision != w.rev {
				t.Errorf("event %d = %v %q rev %d, want %v %q rev %d", i, ev.Kind, ev.Entry.Key, ev.Entry.Revision, w.kind, w.key, w.rev)
			}
		case <-ctx.Done():
			t.Fatalf("event %d: none before the deadline, want %v %q", i, w.kind, w.key)
		}
	}
	cancel()
	for range events { // closed when ctx is done
	}
}

func TestWatchEndsOnClose(t *testing.T) {
	f := newFixture(t)
	s := f.peer(t)
	events, err := s.Watch(testContext(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range events { // Close ends the watch and waits for it
	}
}

func TestTxn(t *testing.T) {
	f := newFixture(t)
	ctx := testContext(t)
	a := mustCreate(t, f.store, "a", "1", 0)
	b := mustCreate(t, f.store, "b", "1", 2*time.Second)

	// A failing condition writes nothing and names the first failing one.
	_, err := f.store.Txn(ctx,
		[]backends.Cond{{Key: "a", Revision: a.Revision}, {Key: "b", Revision: b.Revision + 1}, {Key: "c", Revision: 0}},
		[]backends.Op{{Kind: backends.OpPut, Key: "a", Value: []byte("2")}, {Kind: backends.OpDelete, Key: "b"}, {Kind: backends.OpPut, Key: "c", Value: []byte("new"), TTL: time.Second}})
	ce := conflict(t, "txn with a stale condition", err)
	if ce.Key != "b" || ce.Expected != b.Revision+1 || !ce.Found || ce.Current.Revision != b.Revision {
		t.Errorf("txn conflict = %+v, want on b, expected %d, current %d", ce, b.Revision+1, b.Revision)
	}
	for _, k := range []string{"a", "b"} {
		if got, err := f.store.Get(ctx, k); err != nil || string(got.Value) != "1" {
			t.Errorf("after a failed txn, %q = %+v, %v; want unchanged", k, got, err)
		}
	}
	if _, err := f.store.Get(ctx, "c"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("after a failed txn, c = %v, want absent", err)
	}

	res, err := f.store.Txn(ctx,
		[]backends.Cond{{Key: "a", Revision: a.Revision}, {Key: "b", Revision: b.Revision}, {Key: "c", Revision: 0}},
		[]backends.Op{{Kind: backends.OpPut, Key: "a", Value: []byte("2")}, {Kind: backends.OpDelete, Key: "b"}, {Kind: backends.OpPut, Key: "c", Value: []byte("new"), TTL: time.Second}, {Kind: backends.OpDelete, Key: "never"}})
	if err != nil {
		t.Fatalf("txn: %v", err)
	}
	if len(res.Entries) != 4 {
		t.Fatalf("txn returned %d entries, want 4", len(res.Entries))
	}
	ea, eb, ec, en := res.Entries[0], res.Entries[1], res.Entries[2], res.Entries[3]
	if ea.Revision <= a.Revision || ea.CreateRevision != a.CreateRevision || string(ea.Value) != "2" {
		t.Errorf("txn put a = %+v, want new revision, CreateRevision %d", ea, a.CreateRevision)
	}
	if eb.Revision != b.Revision || eb.Key != "b" {
		t.Errorf("txn delete b = %+v, want the deleted entry at %d", eb, b.Revision)
	}
	if ec.Revision != ea.Revision || ec.CreateRevision != ec.Revision || ec.TTL != time.Second {
		t.Errorf("txn put c = %+v, want created at the txn's revision %d with TTL 1s", ec, ea.Revision)
	}
	if en.Revision != 0 || en.Key != "never" {
		t.Errorf("txn delete of an absent key = %+v, want zero revisions", en)
	}
	if _, err := f.store.Get(ctx, "b"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("b after the txn = %v, want deleted", err)
	}

	// etcd's limit on operations is a clear ErrInvalid.
	var many []backends.Op
	for i := 0; i < 200; i++ {
		many = append(many, backends.Op{Kind: backends.OpDelete, Key: fmt.Sprintf("m%d", i)})
	}
	if _, err := f.store.Txn(ctx, nil, many); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("txn of 200 ops = %v, want ErrInvalid", err)
	}
}

func TestClosed(t *testing.T) {
	f := newFixture(t)
	s := f.peer(t)
	e := mustCreate(t, s, "k", "v", time.Second)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	ctx := testContext(t)
	ops := map[string]error{}
	_, ops["Get"] = s.Get(ctx, "k")
	_, ops["List"] = s.List(ctx, "")
	_, ops["CreateIfAbsent"] = s.CreateIfAbsent(ctx, "x", nil, 0)
	_, ops["CompareAndSet"] = s.CompareAndSet(ctx, "k", e.Revision, nil, 0)
	ops["CompareAndDelete"] = s.CompareAndDelete(ctx, "k", e.Revision)
	_, ops["KeepAlive"] = s.KeepAlive(ctx, "k", e.Revision, time.Second)
	_, ops["Watch"] = s.Watch(ctx, "")
	_, ops["Txn"] = s.Txn(ctx, nil, nil)
	for op, err := range ops {
		if !errors.Is(err, backends.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", op, err)
		}
	}
	// Close deleted nothing.
	if _, err := f.store.Get(ctx, "k"); err != nil {
		t.Errorf("entry after its store closed: %v, want present", err)
	}
}

func TestValuesAreCopied(t *testing.T) {
	f := newFixture(t, etcd.WithSharedLease(0))
	ctx := testContext(t)
	buf := []byte("original")
	e, err := f.store.CreateIfAbsent(ctx, "k", buf, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, "CHANGED!")
	got, err := f.store.KeepAlive(ctx, "k", e.Revision, 2*time.Second)
	if err != nil || !bytes.Equal(got.Value, []byte("original")) || !bytes.Equal(e.Value, []byte("original")) {
		t.Errorf("after the caller reused its buffer: create %q, KeepAlive %q (%v); want %q", e.Value, got.Value, err, "original")
	}
}

func TestNew(t *testing.T) {
	f := newFixture(t)
	if _, err := etcd.New(testContext(t), nil, "p/"); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("New(nil client) = %v, want ErrInvalid", err)
	}
	if _, err := etcd.New(testContext(t), f.cli, "bad\x00prefix/"); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("New(prefix with NUL) = %v, want ErrInvalid", err)
	}
	if got := f.store.Prefix(); got != f.prefix {
		t.Errorf("Prefix() = %q, want %q", got, f.prefix)
	}
	// An unreachable etcd fails New within its context.
	dead := newClient(t, []string{"http://127.0.0.1:1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := etcd.New(ctx, dead, "p/"); backends.Classify(err) != backends.ClassTransient {
		t.Errorf("New over an unreachable etcd = %v, want a transient error", err)
	}
}

func TestOpenURL(t *testing.T) {
	f := newFixture(t)
	ctx := testContext(t)
	u, err := url.Parse(f.srv.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	u.Scheme, u.Path = etcd.Scheme, "/opened/by/url"
	bs, err := storeurl.Open(ctx, u.String())
	if err != nil {
		t.Fatalf("storeurl.Open(%s): %v", u, err)
	}
	defer bs.Close()
	s, ok := bs.(*etcd.Store)
	if !ok {
		t.Fatalf("storeurl.Open(%s) = %T, want *etcd.Store", u, bs)
	}
	if got := s.Prefix(); got != "opened/by/url/" {
		t.Errorf("Prefix() = %q, want %q", got, "opened/by/url/")
	}
	mustCreate(t, s, "k", "v", time.Second)
	if resp, err := f.raw.Get(ctx, "opened/by/url/k"); err != nil || len(resp.Kvs) != 1 {
		t.Errorf("raw Get(opened/by/url/k) = %v, %v; want the key", resp, err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	u.Path = ""
	if _, err := storeurl.Open(ctx, u.String()); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("storeurl.Open without prefix = %v, want ErrInvalid", err)
	}
}

// TestRefusedCreateCostsOneRequest checks that a create refused because
// another process holds the key (what a follower's attempt is, each time its
// watch sees the claim change) costs one request, in both lease modes,
// whether or not the store has a lease at hand: no lease grant or keep-alive
// before it, no lease lookup for the conflict, no revoke after it. Before, it
// cost four with a lease per entry (grant, transaction, TTL lookup, revoke)
// and three with the shared lease (keep-alive or grant, transaction, TTL
// lookup).
func TestRefusedCreateCostsOneRequest(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []etcd.Option
	}{
		{"lease=per-entry", nil},
		{"lease=shared", []etcd.Option{etcd.WithSharedLease(0)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			f := newFixture(t, mode.opts...)
			ctx := testContext(t)
			held := mustCreate(t, f.peer(t), "claim", "leader", 2*time.Second)
			try := func(when string) {
				t.Helper()
				f.reqs.reset()
				_, err := f.store.CreateIfAbsent(ctx, "claim", []byte("follower"), 2*time.Second)
				if ce := conflict(t, "follower's create", err); !ce.Found || ce.Current.Revision != held.Revision || string(ce.Current.Value) != "leader" {
					t.Errorf("follower's create %s: conflict %+v, want the leader's entry at revision %d", when, ce, held.Revision)
				}
				if got := f.reqs.Load(); got != 1 {
					t.Errorf("follower's create %s cost %d requests (%s), want 1", when, got, f.reqs)
				}
			}
			try("with no lease at hand")
			mustCreate(t, f.store, "own", "v", 2*time.Second) // a lease kept alive just now
			try("right after a write of its own")
		})
	}
}

// TestKeepAlivesShareOneStream checks that a store's lease keep-alives go out
// on one stream, one message each, in both lease modes; clientv3's
// KeepAliveOnce, used before, opened a stream per keep-alive, which costs the
// client and the server far more than the message.
func TestKeepAlivesShareOneStream(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []etcd.Option
	}{
		{"lease=per-entry", nil},
		{"lease=shared", []etcd.Option{etcd.WithSharedLease(time.Millisecond)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			f := newFixture(t, mode.opts...)
			ctx := testContext(t)
			e := mustCreate(t, f.store, "claim", "v", 2*time.Second)
			f.reqs.reset()
			const n = 5
			for i := 0; i < n; i++ {
				if _, err := f.store.KeepAlive(ctx, "claim", e.Revision, 2*time.Second); err != nil {
					t.Fatalf("KeepAlive %d: %v", i, err)
				}
			}
			if got := f.reqs.streamsOf("LeaseKeepAlive"); got > 1 {
				t.Errorf("%d keep-alives opened %d keep-alive streams (%s), want at most 1", n, got, f.reqs)
			}
		})
	}
}

// gatedClient returns a client whose lease keep-alive streams open only
// once the returned channel is closed; until then, opening one waits for
// its context.
func gatedClient(t *testing.T, endpoints []string) (*clientv3.Client, chan struct{}) {
	t.Helper()
	gate := make(chan struct{})
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainStreamInterceptor(
			func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				if strings.HasSuffix(method, "/LeaseKeepAlive") {
					select {
					case <-gate:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				return streamer(ctx, desc, cc, method, opts...)
			})},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli, gate
}

// TestKeepAliveOpeningEndsWithItsContext checks that a keep-alive that has to
// open the store's keep-alive stream gives up with its own context when the
// stream cannot be opened, and the next one opens it. Before, the stream was
// opened under the store's context, so the caller waited as long as the
// opening did, past its own deadline, and every other keep-alive waited
// behind it.
func TestKeepAliveOpeningEndsWithItsContext(t *testing.T) {
	srv := etcdtest.Start(t)
	cli, gate := gatedClient(t, srv.Endpoints())
	s := openStore(t, cli, newPrefix(t))
	ctx := testContext(t)
	e := mustCreate(t, s, "claim", "v", 2*time.Second)

	done := make(chan error, 1)
	go func() {
		rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err := s.KeepAlive(rctx, "claim", e.Revision, 2*time.Second)
		done <- err
	}()
	limit := clock.New().Timer(10 * time.Second)
	defer limit.Stop()
	select {
	case err := <-done:
		if backends.Classify(err) != backends.ClassTransient {
			t.Errorf("KeepAlive whose stream cannot open = %v, want a transient error", err)
		}
	case <-limit.C:
		close(gate)
		<-done
		t.Fatalf("KeepAlive with a 200ms context still waiting for its stream after 10s")
	}
	close(gate)
	if _, err := s.KeepAlive(ctx, "claim", e.Revision, 2*time.Second); err != nil {
		t.Errorf("KeepAlive once streams open: %v", err)
	}
}
