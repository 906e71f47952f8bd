package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/nats/natstest"
	"github.com/tenure-go/tenure/clocktest"
)

// TestKeyEncoding checks that every key maps to one subject token and back,
// prefixes stay prefixes, and tokens tenure never writes do not decode.
func TestKeyEncoding(t *testing.T) {
	for _, k := range []string{"a", "leader", "group/slot-1", "a b", "ключ", "a.b", "*", ">", "=", "=41", "x\x01y", "\xff"[:0] + "end"} {
		tok := encodeKey(k)
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; !plain(c) && c != '=' {
				t.Errorf("encodeKey(%q) = %q holds %q", k, tok, c)
			}
		}
		if got, ok := decodeKey(tok); !ok || got != k {
			t.Errorf("decodeKey(encodeKey(%q) = %q) = %q, %v", k, tok, got, ok)
		}
		for i := range len(k) {
			if p := encodeKey(k[:i]); tok[:len(p)] != p {
				t.Errorf("encodeKey(%q) = %q does not start with encodeKey(%q) = %q", k, tok, k[:i], p)
			}
		}
	}
	for _, tok := range []string{"a.b", "=4", "=41", "=2f", "=zz", "a b", "*"} {
		if k, ok := decodeKey(tok); ok {
			t.Errorf("decodeKey(%q) = %q, true; want refused (never written by tenure)", tok, k)
		}
	}
}

// TestServerVersion checks that servers older than 2.14.0 are refused.
func TestServerVersion(t *testing.T) {
	for v, want := range map[string]bool{
		"2.15.2": true, "2.14.0": true, "v2.14.1-beta": true, "3.0.0": true,
		"2.13.9": false, "2.11.2": false, "2.9": false, "": false, "two": false,
	} {
		err := serverVersion(v)
		if (err == nil) != want || (err != nil && !errors.Is(err, backends.ErrUnsupported)) {
			t.Errorf("serverVersion(%q) = %v, want accepted %v", v, err, want)
		}
	}
}

// TestBucketRefused checks that New fails closed on a bucket whose entries
// the server would expire by its own clock, or that cannot keep per-key TTLs,
// and on a missing bucket without WithCreate.
func TestBucketRefused(t *testing.T) {
	srv := natstest.Start(t)
	nc := connect(t, srv.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, cfg := range []jetstream.KeyValueConfig{
		{Bucket: "nottl"},
		{Bucket: "bucketttl", LimitMarkerTTL: time.Second, TTL: time.Minute},
	} {
		if _, err := js.CreateKeyValue(ctx, cfg); err != nil {
			t.Fatalf("CreateKeyValue(%+v): %v", cfg, err)
		}
		s, err := New(ctx, nc, cfg.Bucket)
		if !errors.Is(err, backends.ErrUnsupported) {
			if s != nil {
				s.Close()
			}
			t.Errorf("New over %+v = %v, want ErrUnsupported", cfg, err)
		}
	}
	if s, err := New(ctx, nc, "missing"); !errors.Is(err, backends.ErrMissingResource) || backends.Classify(err) != backends.ClassFatal {
		if s != nil {
			s.Close()
		}
		t.Errorf("New over a missing bucket = %v, want a fatal ErrMissingResource", err)
	}
	if _, err := New(ctx, nc, "a.b", WithCreate(1)); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("New with bucket %q = %v, want ErrInvalid", "a.b", err)
	}
}

// kvStream is the stream of a key-value bucket as the store would create
// it (per-key TTLs, History 8, file storage, Discard new, no limits),
// changed by edit.
func kvStream(bucket string, edit func(*jetstream.StreamConfig)) jetstream.StreamConfig {
	c := jetstream.StreamConfig{
		Name:                   "KV_" + bucket,
		Subjects:               []string{"$KV." + bucket + ".>"},
		MaxMsgsPerSubject:      createHistory,
		MaxMsgs:                -1,
		MaxBytes:               -1,
		Discard:                jetstream.DiscardNew,
		Storage:                jetstream.FileStorage,
		AllowRollup:            true,
		DenyDelete:             true,
		AllowDirect:            true,
		AllowMsgTTL:            true,
		SubjectDeleteMarkerTTL: markerTTL,
	}
	if edit != nil {
		edit(&c)
	}
	return c
}

// TestBucketSettingsRefused checks that New refuses, as fatal and naming the
// setting, every stream setting that can remove a live key's last message (a
// discard-old limit: other keys' writes push it out; a retention other than
// limits; memory storage: a restart), or that refuses a key's renewals
// (DiscardNewPerSubject) or acknowledges no write; it accepts limits that
// refuse new writes instead, a Discard old without limits and any per-key
// history. Before, only MaxAge was refused: a stream with Discard old and
// MaxMsgs opened, and once writes of other keys pushed a holder's only
// message out, its key read absent to a contender.
func TestBucketSettingsRefused(t *testing.T) {
	srv := natstest.Start(t)
	nc := connect(t, srv.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := within(t, 60*time.Second)
	for _, tc := range []struct {
		setting string // in the refusal; "" for a stream that opens
		edit    func(*jetstream.StreamConfig)
	}{
		{"MaxAge", func(c *jetstream.StreamConfig) { c.MaxAge = time.Minute }},
		{"Discard old with MaxMsgs 100", func(c *jetstream.StreamConfig) { c.Discard, c.MaxMsgs = jetstream.DiscardOld, 100 }},
		{"Discard old with MaxBytes 1048576", func(c *jetstream.StreamConfig) { c.Discard, c.MaxBytes = jetstream.DiscardOld, 1<<20 }},
		{"DiscardNewPerSubject", func(c *jetstream.StreamConfig) { c.DiscardNewPerSubject = true }},
		{"Retention Interest", func(c *jetstream.StreamConfig) { c.Retention = jetstream.InterestPolicy }},
		{"Retention WorkQueue", func(c *jetstream.StreamConfig) { c.Retention = jetstream.WorkQueuePolicy }},
		{"Storage Memory", func(c *jetstream.StreamConfig) { c.Storage = jetstream.MemoryStorage }},
		{"NoAck", func(c *jetstream.StreamConfig) { c.NoAck = true }},
		{"", nil},
		{"", func(c *jetstream.StreamConfig) { c.MaxMsgs, c.MaxBytes = 100, 1<<20 }}, // Discard new: writes are refused, nothing dropped
		{"", func(c *jetstream.StreamConfig) { c.Discard = jetstream.DiscardOld }},   // no limit to make room for
		{"", func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 1 }},
		{"", func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = -1 }},
	} {
		bucket := newBucketName()
		cfg := kvStream(bucket, tc.edit)
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatalf("CreateStream(%+v): %v", cfg, err)
		}
		for _, opts := range [][]Option{nil, {WithCreate(1)}} {
			s, err := New(ctx, nc, bucket, opts...)
			switch {
			case tc.setting == "" && err != nil:
				t.Errorf("New over a stream with %s: %v, want it opened", streamDiff(cfg), err)
			case tc.setting == "":
			case err == nil:
				t.Errorf("New over a stream with %s opened, want refused naming %q", tc.setting, tc.setting)
			case !errors.Is(err, backends.ErrUnsupported) || backends.Classify(err) != backends.ClassFatal || !strings.Contains(err.Error(), tc.setting):
				t.Errorf("New over a stream with %s = %v, want a fatal ErrUnsupported naming %q", tc.setting, err, tc.setting)
			}
			if s != nil {
				s.Close()
			}
		}
	}
}

// streamDiff names what a kvStream test case changed, for messages.
func streamDiff(c jetstream.StreamConfig) string {
	return fmt.Sprintf("Discard %v MaxMsgs %d MaxBytes %d MaxMsgsPerSubject %d", c.Discard, c.MaxMsgs, c.MaxBytes, c.MaxMsgsPerSubject)
}

// TestBucketSettingsRefusedWhenCreated checks that a store asked to create a
// missing bucket finds that a peer created it first with Discard old and
// MaxMsgs (the peer's creation lands just before the store's), and refuses it
// as it refuses such a bucket on open, naming the setting.
func TestBucketSettingsRefusedWhenCreated(t *testing.T) {
	srv := natstest.Start(t)
	peer := connect(t, srv.URL())
	js, err := jetstream.New(peer)
	if err != nil {
		t.Fatal(err)
	}
	ctx := within(t, 60*time.Second)
	bucket := newBucketName()
	cfg := kvStream(bucket, func(c *jetstream.StreamConfig) { c.Discard, c.MaxMsgs = jetstream.DiscardOld, 100 })
	var peerErr error
	nc, conn := intercepting(t, srv.URL(), "$JS.API.STREAM.CREATE.KV_"+bucket, func() {
		_, peerErr = js.CreateStream(ctx, cfg)
	})
	s, err := New(ctx, nc, bucket, WithCreate(1))
	if s != nil {
		s.Close()
	}
	if !conn.hasDropped() || peerErr != nil {
		t.Fatalf("the peer's creation did not run before the store's (seen %v, peer: %v): the test proves nothing", conn.hasDropped(), peerErr)
	}
	if !errors.Is(err, backends.ErrUnsupported) || backends.Classify(err) != backends.ClassFatal || !strings.Contains(err.Error(), "Discard old with MaxMsgs 100") {
		t.Errorf("New creating a bucket a peer created with Discard old and MaxMsgs = %v, want a fatal ErrUnsupported naming the setting", err)
	}
}

// TestForeignWrite checks that a value another client wrote into the bucket
// (nats kv put) is corrupt state for every operation, never absent: a create
// over it does not win.
func TestForeignWrite(t *testing.T) {
	srv := natstest.Start(t)
	s := open(t, srv.URL(), newBucketName(), 1)
	js, err := jetstream.New(s.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	kv, err := js.KeyValue(ctx, s.bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("foreign")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, backends.ErrCorrupt) {
		t.Errorf("Get of a foreign value = %v, want ErrCorrupt", err)
	}
	if _, err := s.CreateIfAbsent(ctx, "k", []byte("v"), time.Second); !errors.Is(err, backends.ErrCorrupt) {
		t.Errorf("CreateIfAbsent over a foreign value = %v, want ErrCorrupt", err)
	}
	if _, err := s.List(ctx, ""); !errors.Is(err, backends.ErrCorrupt) {
		t.Errorf("List over a foreign value = %v, want ErrCorrupt", err)
	}
}

// TestKeepAliveMovesSequence checks that a keep-alive is a new message (the
// NATS sequence moves), yet the entry keeps its revisions, a compare-and-set
// on the old revision still lands, and an observer that saw the keep-alive
// counts the TTL from it, not from the create.
func TestKeepAliveMovesSequence(t *testing.T) {
	srv := natstest.Start(t)
	clk := clocktest.New(time.Time{})
	bucket := newBucketName()
	s := open(t, srv.URL(), bucket, 1, WithClock(clk))
	obs := open(t, srv.URL(), bucket, 1, WithClock(clk))
	ctx := t.Context()
	e, err := s.CreateIfAbsent(ctx, "k", []byte("v"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	clk.Add(6 * time.Second)
	k, err := s.KeepAlive(ctx, "k", e.Revision, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.read(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if r.seq <= uint64(e.Revision) || k.Revision != e.Revision || k.CreateRevision != e.CreateRevision {
		t.Errorf("after KeepAlive: seq %d, entry rev %d create %d; want seq above %d and revisions unchanged", r.seq, k.Revision, k.CreateRevision, e.Revision)
	}
	if _, err := obs.Get(ctx, "k"); err != nil {
		t.Fatalf("observer Get after the keep-alive: %v", err)
	}
	clk.Add(6 * time.Second) // 12 s after the create, 6 s after the keep-alive
	if _, err := obs.Get(ctx, "k"); err != nil {
		t.Errorf("observer Get 6s after a keep-alive of a 10s entry: %v, want live", err)
	}
	if _, err := obs.CreateIfAbsent(ctx, "k", []byte("w"), time.Second); !errors.Is(err, backends.ErrExists) {
		t.Errorf("observer CreateIfAbsent over the kept-alive entry = %v, want ErrExists", err)
	}
	c, err := s.CompareAndSet(ctx, "k", e.Revision, []byte("v2"), 10*time.Second)
	if err != nil {
		t.Fatalf("CompareAndSet on the revision kept alive: %v", err)
	}
	if c.CreateRevision != e.CreateRevision || c.Revision <= int64(r.seq) {
		t.Errorf("CompareAndSet = rev %d create %d; want create %d, rev above %d", c.Revision, c.CreateRevision, e.CreateRevision, r.seq)
	}
}

// TestWatchTimesKeepAlives checks that a follower that watches a claim counts
// its TTL from the last keep-alive its watch delivered (which yields no
// event), so once the holder stops renewing it sees the claim expire a TTL
// after the last renewal, not a TTL after it next happens to read.
func TestWatchTimesKeepAlives(t *testing.T) {
	srv := natstest.Start(t)
	clk := clocktest.New(time.Time{})
	bucket := newBucketName()
	s := open(t, srv.URL(), bucket, 1, WithClock(clk))
	obs := open(t, srv.URL(), bucket, 1, WithClock(clk))
	ctx := t.Context()
	events, err := obs.Watch(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.CreateIfAbsent(ctx, "k", []byte("v"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.Kind != backends.EventPut || ev.Entry.Revision != e.Revision {
		t.Fatalf("first event %+v, want the put at %d", ev, e.Revision)
	}
	clk.Add(6 * time.Second)
	if _, err := s.KeepAlive(ctx, "k", e.Revision, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	r, err := s.read(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the observer's watch delivers the keep-alive", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return obs.seen["k"].seq == r.seq
	})
	select {
	case ev := <-events:
		t.Errorf("keep-alive yielded event %+v, want none", ev)
	default:
	}
	clk.Add(9 * time.Second) // 9 s after the keep-alive
	if got, err := obs.Get(ctx, "k"); err != nil || got.Remaining != time.Second {
		t.Errorf("observer Get 9s after the keep-alive = %+v, %v; want live with 1s left", got, err)
	}
	clk.Add(2 * time.Second)
	if _, err := obs.Get(ctx, "k"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("observer Get 11s after the keep-alive of a 10s entry = %v, want ErrNotFound", err)
	}
	if _, err := obs.CreateIfAbsent(ctx, "k", []byte("w"), time.Second); err != nil {
		t.Errorf("observer CreateIfAbsent over the expired entry: %v", err)
	}
}

// TestKeepAliveOneRequest checks that a holder's keep-alive of an entry its
// store wrote last costs one message (the conditioned publish, no read), and
// still fails or retries correctly when another store wrote since: a peer's
// keep-alive of the same revision (only the sequence moved: it succeeds) and
// a peer's compare-and-set (the revision moved: a conflict carrying the
// peer's entry).
func TestKeepAliveOneRequest(t *testing.T) {
	srv := natstest.Start(t)
	bucket := newBucketName()
	s := open(t, srv.URL(), bucket, 1)
	peer := open(t, srv.URL(), bucket, 1)
	ctx := t.Context()
	e, err := s.CreateIfAbsent(ctx, "k", []byte("v"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		before := s.nc.Stats().OutMsgs
		if _, err := s.KeepAlive(ctx, "k", e.Revision, 10*time.Second); err != nil {
			t.Fatalf("KeepAlive %d: %v", i, err)
		}
		if n := s.nc.Stats().OutMsgs - before; n != 1 {
			t.Errorf("KeepAlive %d sent %d messages, want 1", i, n)
		}
	}
	if _, err := peer.KeepAlive(ctx, "k", e.Revision, 10*time.Second); err != nil {
		t.Fatalf("peer KeepAlive: %v", err)
	}
	if k, err := s.KeepAlive(ctx, "k", e.Revision, 10*time.Second); err != nil || k.Revision != e.Revision {
		t.Errorf("KeepAlive after the peer's = %+v, %v; want revision %d kept", k, err, e.Revision)
	}
	p, err := peer.CompareAndSet(ctx, "k", e.Revision, []byte("peer"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.KeepAlive(ctx, "k", e.Revision, 10*time.Second)
	var ce *backends.ConflictError
	if !errors.As(err, &ce) || !ce.Found || ce.Current.Revision != p.Revision || string(ce.Current.Value) != "peer" {
		t.Errorf("KeepAlive of a revision the peer replaced = %v, want a conflict carrying revision %d", err, p.Revision)
	}
}

// TestServerTTLIsGarbageCollection checks that the TTL the server keeps a
// message for is the entry's TTL rounded up to whole seconds plus the grace,
// on every write with a TTL (create, compare-and-set, keep-alive), so the
// server's clock drops an entry only a grace after this store's judge would;
// an entry without a TTL gets none. (The server raises a message TTL below
// the bucket's LimitMarkerTTL to it, which only lengthens the grace.)
func TestServerTTLIsGarbageCollection(t *testing.T) {
	srv := natstest.Start(t)
	s := open(t, srv.URL(), newBucketName(), 1, WithGCGrace(2*time.Hour))
	ctx := t.Context()
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		t.Fatal(err)
	}
	serverTTL := func(key string) string {
		t.Helper()
		m, err := st.GetLastMsgForSubject(ctx, s.subj+encodeKey(key))
		if err != nil {
			t.Fatal(err)
		}
		return m.Header.Get(jetstream.MsgTTLHeader)
	}
	e, err := s.CreateIfAbsent(ctx, "k", []byte("v"), 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := serverTTL("k"); got != "2h0m2s" {
		t.Errorf("server TTL after create with 1.5s = %q, want 2h0m2s", got)
	}
	if _, err := s.KeepAlive(ctx, "k", e.Revision, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := serverTTL("k"); got != "2h0m3s" {
		t.Errorf("server TTL after keep-alive with 3s = %q, want 2h0m3s", got)
	}
	if _, err := s.CompareAndSet(ctx, "k", e.Revision, []byte("w"), 0); err != nil {
		t.Fatal(err)
	}
	if got := serverTTL("k"); got != "" {
		t.Errorf("server TTL after a write without TTL = %q, want none", got)
	}
}

// TestNewAsksAgainWhenUnanswered checks that a bucket creation whose request
// went unanswered (lost while a cluster's meta leader changed) is asked again
// after the store's timeout instead of waiting out the whole ctx. Before, New
// waited until ctx ended and failed.
func TestNewAsksAgainWhenUnanswered(t *testing.T) {
	srv := natstest.Start(t)
	nc, conn := dropping(t, srv.URL(), "$JS.API.STREAM.CREATE.")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s, err := New(ctx, nc, newBucketName(), WithCreate(1), WithTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatalf("New with the first creation request lost: %v", err)
	}
	defer s.Close()
	if !conn.hasDropped() {
		t.Fatal("no creation request was seen, so none was dropped: the test proves nothing")
	}
	if _, err := s.CreateIfAbsent(ctx, "k", nil, 0); err != nil {
		t.Errorf("CreateIfAbsent on the bucket created at the second request: %v", err)
	}
}

// TestNewWaitsForMetaLeader checks that a cluster started with one server of
// three has no JetStream meta leader and, once it has been without one for a
// while (10 s in nats-server), answers the store's requests that JetStream is
// temporarily unavailable. New asks again, paced, until the other two servers
// start and elect a leader, then creates the bucket; a New whose ctx ends
// first fails as unavailable, saying what the server answered. Before, New
// failed at the first such answer: "nats: open bucket ...: backend
// unavailable: nats: API error: code=503 err_code=10008 description=JetStream
// system temporarily unavailable".
func TestNewWaitsForMetaLeader(t *testing.T) {
	c := natstest.StartCluster(t, 3, natstest.WithHeldBack(1, 2))
	url := c.Servers[0].URL()

	// A second client sees the answers the server sends to the store's
	// connection, whose inbox has a prefix of its own.
	answered := make(chan struct{})
	var once bool
	spy := connect(t, url)
	if _, err := spy.Subscribe("_OPEN.>", func(m *nats.Msg) {
		var r struct {
			Error *struct {
				ErrCode int `json:"err_code"`
			} `json:"error"`
		}
		if json.Unmarshal(m.Data, &r) == nil && r.Error != nil && r.Error.ErrCode == clusterNotAvailable && !once {
			once = true // handlers of one subscription run one at a time
			close(answered)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, nats.CustomInboxPrefix("_OPEN"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	type result struct {
		s   *Store
		err error
	}
	opened := make(chan result, 1)
	ctx := within(t, 90*time.Second)
	bucket := newBucketName()
	go func() {
		s, err := New(ctx, nc, bucket, WithCreate(3), WithTimeout(2*time.Second))
		opened <- result{s, err}
	}()
	select {
	case <-answered:
	case r := <-opened:
		t.Fatalf("New returned before the server answered it was unavailable: %v", r.err)
	}

	bounded, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if s, err := New(bounded, nc, newBucketName(), WithCreate(3), WithTimeout(2*time.Second)); err == nil {
		s.Close()
		t.Error("New on a cluster without a meta leader succeeded")
	} else if !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "temporarily unavailable") {
		t.Errorf("New on a cluster without a meta leader until its ctx ended = %v, want ErrUnavailable with the server's answer", err)
	}

	c.Servers[1].Restart()
	c.Servers[2].Restart()
	r := <-opened
	if r.err != nil {
		t.Fatalf("New once the cluster elects a meta leader: %v", r.err)
	}
	defer r.s.Close()
	if _, err := r.s.CreateIfAbsent(ctx, "k", nil, 0); err != nil {
		t.Errorf("CreateIfAbsent on the bucket New created: %v", err)
	}
}

// TestKnownIsPruned checks that the marks of every key this store saw, kept
// to catch a deposed leader's stale answers, are dropped once older than
// staleWindow, so a store that touches many keys does not grow; a mark judges
// an answer with no message of its key stale only while it is within the
// window and held an entry.
func TestKnownIsPruned(t *testing.T) {
	s := &Store{known: map[string]mark{}}
	note := func(key string, seq uint64, present bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.noteLocked(key, seq, present)
	}
	old := time.Now().Add(-2 * staleWindow)
	for i := range 1000 {
		s.known[fmt.Sprint("old", i)] = mark{seq: uint64(i + 1), at: old, present: true}
	}
	s.pruneAt = len(s.known) + 1
	note("recent", 5000, true)
	if _, ok := s.known["recent"]; !ok || len(s.known) != 1 {
		t.Fatalf("after pruning: %d marks (recent kept: %v), want only the recent one", len(s.known), ok)
	}
	if _, old := s.stale("old1", record{seq: 1}); old {
		t.Error("a pruned mark still judges a read stale")
	}
	if _, old := s.stale("old1", record{}); old {
		t.Error("a pruned mark still judges an answer without a message stale")
	}
	if known, old := s.stale("recent", record{seq: 4999}); !old || known != 5000 {
		t.Errorf("stale(recent, 4999) = %d, %v; want 5000, true", known, old)
	}
	if known, old := s.stale("recent", record{}); !old || known != 5000 {
		t.Errorf("stale(recent, no message) = %d, %v; want 5000, true", known, old)
	}
	note("deleted", 5001, false)
	if _, old := s.stale("deleted", record{}); old {
		t.Error("an answer without a message after a delete was judged stale; it says absent as the delete does")
	}
	if _, old := s.stale("deleted", record{seq: 4000}); !old {
		t.Error("an answer older than a recent delete was not judged stale")
	}
	s.known["aged"] = mark{seq: 10, at: old, present: true} // not pruned yet
	if _, old := s.stale("aged", record{}); old {
		t.Error("an answer without a message was judged stale on a mark older than staleWindow")
	}
	delete(s.known, "aged")
	for i := range 100 {
		note(fmt.Sprint("new", i), uint64(6000+i), true)
	}
	if len(s.known) != 102 {
		t.Errorf("%d marks after 100 recent notes, want 102: recent marks were pruned", len(s.known))
	}
}

// TestFullBucketSaysWhy checks that a bucket whose stream has a limit with Discard
// new refuses writes once full. A create refused so is throttled, not
// merely unavailable, and names the limit to raise, instead of an error an
// elector retries for ever without saying what is wrong.
func TestFullBucketSaysWhy(t *testing.T) {
	srv := natstest.Start(t)
	nc := connect(t, srv.URL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := within(t, 60*time.Second)
	bucket := newBucketName()
	if _, err := js.CreateStream(ctx, kvStream(bucket, func(c *jetstream.StreamConfig) { c.MaxMsgs = 2 })); err != nil {
		t.Fatal(err)
	}
	s, err := New(ctx, nc, bucket)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range []string{"a", "b"} {
		if _, err := s.CreateIfAbsent(ctx, k, []byte("v"), 0); err != nil {
			t.Fatalf("CreateIfAbsent(%s) in a bucket with room: %v", k, err)
		}
	}
	_, err = s.CreateIfAbsent(ctx, "c", []byte("v"), 0)
	if !errors.Is(err, backends.ErrThrottled) || !strings.Contains(err.Error(), "MaxMsgs") {
		t.Errorf("CreateIfAbsent in a full bucket = %v, want ErrThrottled naming MaxMsgs", err)
	}
}

// TestAskAgainWhileUnplaced checks that a request answered "no suitable
// peers for placement", as a meta leader elected a moment ago answers
// before it has heard from its peers, is asked again, and that the answer
// is the error once it has lasted placementGrace (more replicas than
// servers never passes).
func TestAskAgainWhileUnplaced(t *testing.T) {
	unplaced := &jetstream.APIError{ErrorCode: noPeers, Description: "no suitable peers for placement"}
	s := &Store{timeout: time.Second}
	calls := 0
	err := s.askAgain(within(t, 30*time.Second), func(context.Context) error {
		calls++
		if calls < 3 {
			return unplaced
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("askAgain = %v after %d calls, want nil after 3: the answer passes once the leader knows its peers", err, calls)
	}

	defer func(g time.Duration) { placementGrace = g }(placementGrace)
	placementGrace = 50 * time.Millisecond
	calls = 0
	err = s.askAgain(within(t, 30*time.Second), func(context.Context) error { calls++; return unplaced })
	if !errors.Is(err, unplaced) || calls < 2 {
		t.Fatalf("askAgain of an answer that never passes = %v after %d calls, want the answer after the grace", err, calls)
	}
}
