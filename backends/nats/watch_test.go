package nats

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/nats/natstest"
	"github.com/tenure-go/tenure/clocktest"
)

// fakeMsg is a consumer message with a stream sequence.
type fakeMsg struct {
	jetstream.Msg // only the methods below are called
	subj          string
	seq           uint64
	hdr           nats.Header
}

func (m fakeMsg) Subject() string      { return m.subj }
func (m fakeMsg) Headers() nats.Header { return m.hdr }
func (m fakeMsg) Data() []byte         { return []byte("v") }
func (m fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}}, nil
}

// fakeIter hands out msgs, then reports the iterator closed.
type fakeIter struct {
	msgs []fakeMsg
}

func (f *fakeIter) Stop() {}

func (f *fakeIter) Next(context.Context) (jetstream.Msg, error) {
	if len(f.msgs) == 0 {
		return nil, jetstream.ErrMsgIteratorClosed
	}
	m := f.msgs[0]
	f.msgs = f.msgs[1:]
	return m, nil
}

// bareStore is a Store over bucket "b" with no server, for tests that
// drive its watch with a fake consumer.
func bareStore(clk clock.Clock) *Store {
	return &Store{subj: "$KV.b.", clk: clk, done: make(chan struct{}), seen: map[string]sighting{}, known: map[string]mark{}, sighted: make(chan struct{}, 1)}
}

// TestWatchEndsOnGap checks that when the consumer's next message is not the
// next stream sequence (older messages of a key were removed before the
// consumer reached them, as a bucket's history limit does to a lagging
// consumer), the watch ends instead of skipping the write. The real servers'
// tests cover delivery without gaps; a gap cannot be forced on them
// deterministically, so the consumer is faked here.
func TestWatchEndsOnGap(t *testing.T) {
	s := bareStore(clock.New())
	put := header(time.Second, 0, 0)
	it := &fakeIter{msgs: []fakeMsg{
		{subj: "$KV.b.w/a", seq: 5, hdr: put},
		{subj: "$KV.b.w/a", seq: 6, hdr: put},
		{subj: "$KV.b.w/a", seq: 8, hdr: put}, // 7 is gone
		{subj: "$KV.b.w/a", seq: 9, hdr: put},
	}}
	w := &watcher{ctx: context.Background(), prefix: "$KV.b.w", ch: make(chan backends.Event, 8)}
	h := &hub{it: it, start: 5, ctx: context.Background(), watchers: newWatcherSet(w)}
	s.follow(h)
	var got []int64
	for len(w.ch) > 0 {
		got = append(got, (<-w.ch).Entry.Revision)
	}
	if len(got) != 2 || got[0] != 5 || got[1] != 6 {
		t.Errorf("events before the gap = %v, want [5 6] and then the end", got)
	}
	if len(it.msgs) != 1 {
		t.Errorf("follow read on past the gap: %d messages left, want 1", len(it.msgs))
	}
}

// TestWatchCloseRace checks that Watch calls racing Close either fail with
// ErrClosed or return a channel that Close closes; none outlives Close
// (goleak and -race check the rest).
func TestWatchCloseRace(t *testing.T) {
	srv := natstest.Start(t)
	for range 5 {
		s := open(t, srv.URL(), newBucketName(), 1)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				ch, err := s.Watch(context.Background(), "")
				if err != nil {
					return
				}
				for range ch {
				}
			})
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
}

// dropper is a client connection that drops the first request it carries
// to a subject with the given prefix (a PUB or HPUB), as a request lost in
// a cluster is lost: a pull request while its consumer was being placed,
// an API request while the meta leader was changing.
//
// With hook set, the command is not dropped: hook runs, once, before it is
// sent, as another client's request that lands just before it.
type dropper struct {
	net.Conn
	prefix  string
	hook    func()
	mu      sync.Mutex
	pending []byte // a command not complete yet; guarded by mu
	dropped bool   // guarded by mu
}

func (c *dropper) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = append(c.pending, p...)
	var out []byte
	for {
		line := bytes.Index(c.pending, []byte("\r\n"))
		if line < 0 {
			break
		}
		n := line + 2
		f := strings.Fields(string(c.pending[:line]))
		op := ""
		if len(f) > 0 {
			op = strings.ToUpper(f[0])
		}
		if (op == "PUB" || op == "HPUB") && len(f) >= 3 {
			size, err := strconv.Atoi(f[len(f)-1])
			if err != nil {
				return 0, fmt.Errorf("dropper: %q: %w", c.pending[:line], err)
			}
			n += size + 2
		}
		if len(c.pending) < n {
			break // the rest of the command comes with a later write
		}
		if !c.dropped && (op == "PUB" || op == "HPUB") && strings.HasPrefix(f[1], c.prefix) {
			c.dropped = true
			if c.hook != nil {
				c.hook()
				out = append(out, c.pending[:n]...)
			}
		} else {
			out = append(out, c.pending[:n]...)
		}
		c.pending = c.pending[n:]
	}
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *dropper) hasDropped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

type dropDialer struct {
	prefix string
	hook   func()
	conns  chan *dropper
}

func (d dropDialer) Dial(network, address string) (net.Conn, error) {
	conn, err := net.Dial(network, address)
	if err != nil {
		return nil, err
	}
	c := &dropper{Conn: conn, prefix: d.prefix, hook: d.hook}
	d.conns <- c
	return c, nil
}

// dropping connects to url through a dropper of the first request to a
// subject under prefix.
func dropping(t *testing.T, url, prefix string) (*nats.Conn, *dropper) {
	t.Helper()
	return intercepting(t, url, prefix, nil)
}

// intercepting connects to url through a dropper that, with hook set,
// runs hook before the first request to a subject under prefix instead of
// dropping it.
func intercepting(t *testing.T, url, prefix string, hook func()) (*nats.Conn, *dropper) {
	t.Helper()
	dialer := dropDialer{prefix: prefix, hook: hook, conns: make(chan *dropper, 1)}
	nc, err := nats.Connect(url, nats.SetCustomDialer(dialer), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, <-dialer.conns
}

// TestWatchRecoversFromLostPull checks that a watch whose consumer's first
// pull request was lost delivers the next change within a few seconds. The
// consumer then sends nothing, heartbeats included, and the client notices
// only after two missed heartbeats and makes a new consumer; with the
// client's default heartbeat for such a consumer (5 s) a release was seen
// more than 10 s late, which is how a watch on a three-server cluster once
// waited that long.
func TestWatchRecoversFromLostPull(t *testing.T) {
	srv := natstest.Start(t)
	bucket := newBucketName()
	writer := open(t, srv.URL(), bucket, 1)
	nc, conn := dropping(t, srv.URL(), "$JS.API.CONSUMER.MSG.NEXT.")
	s, err := New(t.Context(), nc, bucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ch, err := s.Watch(t.Context(), "w/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.CreateIfAbsent(t.Context(), "w/a", []byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	if !conn.hasDropped() {
		t.Fatal("the watch's first pull request was not seen, so not dropped: the test proves nothing")
	}
	const bound = 5 * time.Second // two missed heartbeats of the watch's consumer, a new consumer, and room for load
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case ev, ok := <-ch:
		if !ok || ev.Kind != backends.EventPut || ev.Entry.Key != "w/a" {
			t.Fatalf("first event = %v %q (open %v), want the put of w/a", ev.Kind, ev.Entry.Key, ok)
		}
	case <-timer.C:
		t.Fatalf("no event within %v of a change, after the watch's first pull request was lost", bound)
	}
}

// TestWatchReportsExpiryAndRevival checks that a watch reports an entry this
// process has seen unchanged for its TTL as an EventDelete with its
// revisions, once; a renewal the watch reaches after that is reported as an
// EventPut, so a view built from the events has the entry again, and its
// expiry is reported afresh a TTL after that renewal.
func TestWatchReportsExpiryAndRevival(t *testing.T) {
	srv := natstest.Start(t)
	clk := clocktest.New(time.Time{})
	bucket := newBucketName()
	holder := open(t, srv.URL(), bucket, 1) // its own clock: it renews late only as seen from obs
	obs := open(t, srv.URL(), bucket, 1, WithClock(clk))
	ctx := t.Context()
	ch, err := obs.Watch(ctx, "w/")
	if err != nil {
		t.Fatal(err)
	}
	e, err := holder.CreateIfAbsent(ctx, "w/k", []byte("v"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) backends.Event {
		t.Helper()
		timer := time.NewTimer(10 * time.Second)
		defer timer.Stop()
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("%s: watch ended", what)
			}
			return ev
		case <-timer.C:
			t.Fatalf("%s: no event within 10s", what)
		}
		return backends.Event{}
	}
	if ev := next("create"); ev.Kind != backends.EventPut || ev.Entry.Revision != e.Revision {
		t.Fatalf("first event = %v rev %d, want the put at %d", ev.Kind, ev.Entry.Revision, e.Revision)
	}
	// The hub's expiry timer waits for the sighting's TTL; move past it.
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Add(2 * time.Second)
	ev := next("expiry")
	if ev.Kind != backends.EventDelete || ev.Entry.Key != "w/k" || ev.Entry.Revision != e.Revision || ev.Entry.CreateRevision != e.CreateRevision {
		t.Fatalf("event after the TTL = %v %q rev %d create %d, want delete w/k rev %d create %d",
			ev.Kind, ev.Entry.Key, ev.Entry.Revision, ev.Entry.CreateRevision, e.Revision, e.CreateRevision)
	}
	if _, err := holder.KeepAlive(ctx, "w/k", e.Revision, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if ev := next("late renewal"); ev.Kind != backends.EventPut || ev.Entry.Revision != e.Revision {
		t.Fatalf("event after a renewal of an entry reported expired = %v rev %d, want its put at %d", ev.Kind, ev.Entry.Revision, e.Revision)
	}
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Add(2 * time.Second)
	if ev := next("second expiry"); ev.Kind != backends.EventDelete || ev.Entry.Revision != e.Revision {
		t.Fatalf("event a TTL after the renewal = %v rev %d, want its delete", ev.Kind, ev.Entry.Revision)
	}
	select {
	case ev := <-ch:
		t.Errorf("extra event %v %q after the expiry was reported", ev.Kind, ev.Entry.Key)
	default:
	}
}

// chanIter hands out the messages a test sends it, one at a time, and
// reports the iterator closed once the channel is.
type chanIter struct {
	msgs chan fakeMsg
}

func (f *chanIter) Stop() {}

func (f *chanIter) Next(context.Context) (jetstream.Msg, error) {
	m, ok := <-f.msgs
	if !ok {
		return nil, jetstream.ErrMsgIteratorClosed
	}
	return m, nil
}

// fakeWatch runs s's watch machinery, the consumer's follower and the
// expiry timer, over a fake consumer whose first message is stream
// sequence start, for one watcher of every key. A send on feed returns
// once the follower has taken the message. Both goroutines end with the
// test.
func fakeWatch(t *testing.T, s *Store, start uint64) (w *watcher, feed chan<- fakeMsg) {
	t.Helper()
	it := &chanIter{msgs: make(chan fakeMsg)}
	w = &watcher{ctx: context.Background(), prefix: s.subj, after: start - 1, ch: make(chan backends.Event, 16)}
	h := &hub{it: it, start: start, ctx: context.Background(), done: make(chan struct{}), watchers: newWatcherSet(w)}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { s.follow(h) })
	wg.Go(func() { s.expire(h, stop) })
	t.Cleanup(func() {
		close(it.msgs)
		close(stop)
		wg.Wait()
	})
	return w, it.msgs
}

// nextEvent is w's next event, failing t if none comes within 10 s.
func nextEvent(t *testing.T, w *watcher, what string) backends.Event {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case ev := <-w.ch:
		return ev
	case <-timer.C:
		t.Fatalf("%s: no event within 10s", what)
	}
	return backends.Event{}
}

// wantEvent checks ev's kind, key and revision.
func wantEvent(t *testing.T, what string, ev backends.Event, kind backends.EventKind, key string, rev int64) {
	t.Helper()
	if ev.Kind != kind || ev.Entry.Key != key || ev.Entry.Revision != rev {
		t.Fatalf("%s: event %v %q rev %d, want %v %q rev %d", what, ev.Kind, ev.Entry.Key, ev.Entry.Revision, kind, key, rev)
	}
}

// msg is a message of key k of bucket b at seq with the headers of a
// write (see header).
func msg(k string, seq uint64, ttl time.Duration, rev, create int64) fakeMsg {
	return fakeMsg{subj: "$KV.b." + encodeKey(k), seq: seq, hdr: header(ttl, rev, create)}
}

// TestWatchOwesPutAfterRead covers a watch that reports an entry expired (it
// lags: the holder's renewal is not reached yet), then a read of this store
// sees the renewal and replaces the sighting before the watch reaches it. The
// watch still reports the entry again, as an EventPut, when it reaches the
// renewal. Before, the read's sighting made the renewal look already seen,
// and the put was never sent: a follower's view kept the claim expired while
// it was held.
func TestWatchOwesPutAfterRead(t *testing.T) {
	ctx := within(t, 30*time.Second)
	clk := clocktest.New(time.Time{})
	s := bareStore(clk)
	w, feed := fakeWatch(t, s, 5)
	const ttl = 2 * time.Second
	feed <- msg("k", 5, ttl, 0, 0)
	wantEvent(t, "create", nextEvent(t, w, "create"), backends.EventPut, "k", 5)
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl)
	wantEvent(t, "a TTL later", nextEvent(t, w, "expiry"), backends.EventDelete, "k", 5)

	// A read (Get, a write's check) answers with the renewal, message 6.
	renewal := record{seq: 6, present: true, keepAlive: true, entry: backends.Entry{Key: "k", Value: []byte("v"), Revision: 5, CreateRevision: 5, TTL: ttl}}
	if _, live := s.judge(renewal); !live {
		t.Fatal("the renewal read as expired")
	}
	feed <- msg("k", 6, ttl, 5, 5)
	feed <- msg("other", 7, ttl, 0, 0) // what comes after: its put ends the wait
	wantEvent(t, "the renewal reached after a read saw it", nextEvent(t, w, "renewal"), backends.EventPut, "k", 5)
	wantEvent(t, "the next write", nextEvent(t, w, "next write"), backends.EventPut, "other", 7)
}

// TestWatchPermanentPutNotExpired checks that a compare-and-set that makes an
// entry with a TTL permanent (TTL 0) ends its expiry: the watch, having
// delivered it, never reports the key expired. Before, the sighting of the
// entry with TTL stayed, and its timer reported the permanent entry expired a
// TTL later.
func TestWatchPermanentPutNotExpired(t *testing.T) {
	ctx := within(t, 30*time.Second)
	clk := clocktest.New(time.Time{})
	s := bareStore(clk)
	w, feed := fakeWatch(t, s, 5)
	feed <- msg("k", 5, 2*time.Second, 0, 0)
	wantEvent(t, "create", nextEvent(t, w, "create"), backends.EventPut, "k", 5)
	feed <- msg("k", 6, 0, 0, 5)
	wantEvent(t, "the write without TTL", nextEvent(t, w, "cas"), backends.EventPut, "k", 6)
	// A later entry whose expiry ends the wait: 3 s, after k's 2 s.
	feed <- msg("z", 7, 3*time.Second, 0, 0)
	wantEvent(t, "sentinel", nextEvent(t, w, "sentinel"), backends.EventPut, "z", 7)
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, "the first expiry reported", firstExpiry(t, clk, w, 6*time.Second), backends.EventDelete, "z", 7)
}

// TestPermanentWriteNotExpired checks the same as
// TestWatchPermanentPutNotExpired for this store's own compare-and-set, while
// its watch lags behind and has not reached it: the store drops the sighting
// when the write lands, and its expiry timer never reports the permanent
// entry expired. Before, it did, a TTL after the entry with TTL was written.
func TestPermanentWriteNotExpired(t *testing.T) {
	srv := natstest.Start(t)
	ctx := within(t, 30*time.Second)
	clk := clocktest.New(time.Time{})
	s := open(t, srv.URL(), newBucketName(), 1, WithClock(clk))
	w, _ := fakeWatch(t, s, 1) // a watch that lags: it reaches nothing
	e, err := s.CreateIfAbsent(ctx, "k", []byte("v"), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CompareAndSet(ctx, "k", e.Revision, []byte("w"), 0); err != nil {
		t.Fatal(err)
	}
	z, err := s.CreateIfAbsent(ctx, "z", []byte("v"), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	wantEvent(t, "the first expiry reported", firstExpiry(t, clk, w, 6*time.Second), backends.EventDelete, "z", z.Revision)
}

// firstExpiry moves clk on in quarter seconds, up to span, and returns the
// first event w delivers. The watch arms its expiry timer for a sighting's
// end on the clock, so a timer armed only after a step (the watch runs
// behind the test) still fires at the next one; stepping past every TTL
// of interest needs no wait for the timer to be armed at each step.
func firstExpiry(t *testing.T, clk *clocktest.Clock, w *watcher, span time.Duration) backends.Event {
	t.Helper()
	for step := time.Duration(0); step < span; step += 250 * time.Millisecond {
		clk.Add(250 * time.Millisecond)
		select {
		case ev := <-w.ch:
			return ev
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nextEvent(t, w, "expiry")
}

// TestWatchExpiryNotAfterNewerPut covers an expiry timer that has collected
// an entry as expired, and before it delivers the event the watch delivers a
// newer write of the key (a compare-and-set). The stale expiry is then not
// delivered after the put, which would leave a view built from the events
// without the live entry. Before, it was.
func TestWatchExpiryNotAfterNewerPut(t *testing.T) {
	ctx := within(t, 30*time.Second)
	clk := clocktest.New(time.Time{})
	s := bareStore(clk)
	collected, release := make(chan struct{}), make(chan struct{})
	s.expiryCollected = func() {
		collected <- struct{}{}
		<-release
	}
	w, feed := fakeWatch(t, s, 5)
	const ttl = 2 * time.Second
	feed <- msg("k", 5, ttl, 0, 0)
	wantEvent(t, "create", nextEvent(t, w, "create"), backends.EventPut, "k", 5)
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl)
	select {
	case <-collected:
	case <-ctx.Done():
		t.Fatal("the expiry timer collected nothing a TTL after the create")
	}
	feed <- msg("k", 6, ttl, 0, 5)
	wantEvent(t, "the newer write", nextEvent(t, w, "cas"), backends.EventPut, "k", 6)
	close(release)
	// The timer is armed again once the collected expiries were handled.
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ch:
		t.Errorf("after the put at 6, event %v %q rev %d; want none", ev.Kind, ev.Entry.Key, ev.Entry.Revision)
	default:
	}
}

// stuckIter is a consumer that Stop does not end a Next of: only the ctx
// given to Next does. So is nats.go's ordered consumer when it is stopped
// while it replaces its inner consumer (after missed heartbeats): it stops
// the inner iterator it had, then starts a new one nothing stops.
type stuckIter struct{ waiting chan struct{} }

func (f *stuckIter) Next(ctx context.Context) (jetstream.Msg, error) {
	close(f.waiting)
	<-ctx.Done()
	return nil, ctx.Err()
}

func (f *stuckIter) Stop() {}

// TestCloseEndsStuckWatch checks that Close returns, and its watch's
// goroutines end, while the consumer's Next waits on an iterator that
// stopping does not end. Before, Close waited for it for good: a fault test
// that restarted the server saw a store's Close still waiting after five
// minutes.
func TestCloseEndsStuckWatch(t *testing.T) {
	s := bareStore(clock.New())
	it := &stuckIter{waiting: make(chan struct{})}
	if _, err := s.startHub(it, 1); err != nil {
		t.Fatal(err)
	}
	ctx := within(t, 10*time.Second)
	select {
	case <-it.waiting:
	case <-ctx.Done():
		t.Fatal("the watch never waited for a message")
	}
	closed := make(chan struct{})
	go func() {
		_ = s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close did not return within 10s while the consumer's Next waited")
	}
}
