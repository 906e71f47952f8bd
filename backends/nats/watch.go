package nats

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tenure-go/tenure/backends"
)

// watchBuffer is how many events a watch holds for a slow consumer before
// it ends the stream rather than block or skip.
const watchBuffer = 256

// watchHeartbeat is how often the server tells the hub's consumer it is
// still there while no change comes. A consumer that stops delivering
// (its pull request lost, as happens when a consumer is still being placed
// on a cluster) sends no heartbeat either: after two missed ones the client
// makes a new consumer, starting after the last message the hub read. The
// client's default for such a consumer, 5 s, let a watch fall more than
// 10 s behind; at 1 s it is about 2 s, for one message a second from the
// server to an idle store.
const watchHeartbeat = time.Second

// watcher is one Watch call: its channel, its prefix, and the stream
// sequence after which its changes start.
type watcher struct {
	ctx    context.Context
	prefix string // encoded, with the subject prefix
	after  uint64
	ch     chan backends.Event
	// stop unregisters the func that ends the watcher when ctx ends (nil
	// for a watcher Watch did not start); set under Store.mu.
	stop func() bool
}

// hub is the store's one ordered consumer over the bucket, shared by every
// Watch call; it lives until it breaks or the store closes.
type hub struct {
	it    messages
	start uint64        // the first stream sequence the consumer delivers
	done  chan struct{} // closed when the hub has ended
	// ctx ends when the store closes or the hub has ended: a Next waiting
	// for the consumer returns then, whatever Stop did (see messages).
	ctx context.Context

	// guarded by Store.mu
	watchers watcherSet
	ended    bool
}

// Watch streams changes of keys under prefix made after it returned. Every
// Watch of a Store shares one ordered consumer over the bucket, started by
// the first and ended when it breaks or the store closes; each call costs
// one request (the stream's last sequence, after which its changes
// start). A keep-alive yields no event (it only moves the sequence, which
// the store counts as a sighting, so a follower that watches a claim times
// its expiry from the last renewal); a delete yields EventDelete with the
// revisions it removed; a marker the server writes when it drops an entry
// (a grace after its TTL, see the package doc) yields EventDelete with the
// last revisions the watch saw, if any. Expiry as this store judges it is
// reported too (Capabilities.ExpiryEvents): while a watch runs, a timer of
// the store's clock reports each entry this process has seen unchanged for
// its TTL as EventDelete with its last revisions, once; a renewal the watch
// reaches after that is reported as EventPut, also when a read or a write
// of this store saw it first. An entry a write without TTL replaced is not
// reported expired, and no expiry comes after a newer write of its key.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("nats: watch: %w", err)
	}
	if err := s.checkOpen("watch", prefix); err != nil {
		return nil, err
	}
	octx, cancel := s.bound(ctx)
	defer cancel()
	info, err := s.info(octx)
	if err != nil {
		return nil, fmt.Errorf("nats: watch %q: %w", prefix, err)
	}
	last := info.State.LastSeq
	h, err := s.hub(octx, last)
	if err != nil {
		return nil, fmt.Errorf("nats: watch %q: %w", prefix, err)
	}
	w := &watcher{ctx: ctx, prefix: s.subj + encodeKey(prefix), after: last, ch: make(chan backends.Event, watchBuffer)}
	s.mu.Lock()
	if h.ended || s.closing.Closed() {
		s.mu.Unlock()
		close(w.ch)
		return w.ch, nil
	}
	h.watchers.add(w)
	// Added under mu while the store is open, so Close's Wait, which
	// comes after it marks the store closed, counts it.
	s.watches.Add(1)
	// No goroutine waits for ctx: with a watch per claim, that would be
	// a goroutine per claim. The hub's end stops this and ends w itself.
	w.stop = context.AfterFunc(ctx, func() {
		s.drop(h, w)
		s.watches.Done()
	})
	s.mu.Unlock()
	return w.ch, nil
}

// end ends w, a watcher Watch started, before its ctx has: it leaves the
// hub, its channel is closed, and the store no longer waits for it.
func (s *Store) end(h *hub, w *watcher) {
	if w.stop != nil && w.stop() {
		s.watches.Done() // its ctx's func will not run: count it here
	}
	s.drop(h, w)
}

// drop ends w: it leaves the hub and its channel is closed, once.
func (s *Store) drop(h *hub, w *watcher) {
	s.mu.Lock()
	ok := h.watchers.remove(w)
	s.mu.Unlock()
	if ok {
		close(w.ch)
	}
}

// messages is the consumer's iterator as the hub uses it: Next also
// returns once ctx ends.
type messages interface {
	Next(ctx context.Context) (jetstream.Msg, error)
	Stop()
}

// consumerMessages is the ordered consumer's iterator. Stopping it is not
// enough to end a Next waiting on it: stopped while it replaces its inner
// consumer (after missed heartbeats, as when a server restarts), nats.go's
// ordered consumer stops the inner iterator it had and then starts a new
// one that nothing stops, so the Next waits for good, and with it the
// store's Close. Next gives the wait ctx, which nats.go's iterator ends on.
type consumerMessages struct{ it jetstream.MessagesContext }

func (c consumerMessages) Next(ctx context.Context) (jetstream.Msg, error) {
	return c.it.Next(jetstream.NextContext(ctx))
}

func (c consumerMessages) Stop() { c.it.Stop() }

// hub returns the running hub, or starts one after stream sequence last.
func (s *Store) hub(ctx context.Context, last uint64) (*hub, error) {
	s.mu.Lock()
	if h := s.watch; h != nil && !h.ended {
		s.mu.Unlock()
		return h, nil
	}
	s.mu.Unlock()
	cons, err := s.js.OrderedConsumer(ctx, s.stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{s.subj + ">"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    last + 1,
	})
	if err != nil {
		return nil, mapErr(err)
	}
	it, err := cons.Messages(jetstream.PullHeartbeat(watchHeartbeat))
	if err != nil {
		return nil, mapErr(err)
	}
	return s.startHub(consumerMessages{it}, last+1)
}

// startHub makes the hub over it, whose first message is stream sequence
// start, the store's and runs it; if another Watch started one meanwhile,
// it returns that one.
func (s *Store) startHub(it messages, start uint64) (*hub, error) {
	ctx, cancel := context.WithCancel(context.Background())
	h := &hub{it: it, start: start, ctx: ctx, done: make(chan struct{}), watchers: newWatcherSet()}
	s.mu.Lock()
	if cur := s.watch; cur != nil && !cur.ended {
		// Another Watch started one meanwhile: use it.
		s.mu.Unlock()
		it.Stop()
		cancel()
		return cur, nil
	}
	if s.closing.Closed() {
		s.mu.Unlock()
		it.Stop()
		cancel()
		return nil, fmt.Errorf("nats: watch: %w", backends.ErrClosed)
	}
	s.watch = h
	s.watches.Add(3) // under mu while open: see Watch
	s.mu.Unlock()
	stop := make(chan struct{})
	go func() {
		defer s.watches.Done()
		select {
		case <-s.done:
			it.Stop()
			cancel()
		case <-stop:
		}
	}()
	go func() {
		defer s.watches.Done()
		s.expire(h, stop)
	}()
	go func() {
		defer s.watches.Done()
		s.follow(h)
		it.Stop() // follow may end on a message it cannot read
		cancel()
		close(stop)
		s.mu.Lock()
		h.ended = true
		ws := h.watchers.all()
		s.mu.Unlock()
		close(h.done)
		for _, w := range ws {
			s.end(h, w)
		}
	}()
	return h, nil
}

// follow turns the hub's messages into events for its watchers until the
// consumer ends, a message cannot be read, or a message is missing.
//
// The consumer delivers every message of the stream, so their sequences
// follow each other. A gap means messages were removed before the
// consumer reached them: a key written again beyond the bucket's history
// while the consumer lagged (its older messages go), so a write would be
// skipped. The hub then ends, and every watch with it, rather than skip.
func (s *Store) follow(h *hub) {
	last := map[string]backends.Entry{} // last revisions seen per key
	next := h.start
	for {
		m, err := h.it.Next(h.ctx)
		if err != nil {
			return
		}
		meta, err := m.Metadata()
		if err != nil || meta.Sequence.Stream != next {
			return
		}
		next++
		key, ok := decodeKey(strings.TrimPrefix(m.Subject(), s.subj))
		if !ok {
			continue
		}
		r, err := decode(key, meta.Sequence.Stream, m.Headers(), m.Data())
		if err != nil {
			return // a stream that cannot say what happened ends
		}
		var ev backends.Event
		switch {
		case r.present && r.keepAlive:
			if r.entry.TTL == 0 {
				s.forget(key, r.seq, true)
				continue
			}
			if !s.watched(key, r.seq, r.entry) {
				continue
			}
			// The watch reported the entry expired before it reached
			// this renewal (it lagged, or the renewal came late): report
			// the entry again, so that a view built from the events has
			// it.
			e := r.entry
			e.Remaining = e.TTL
			last[key] = backends.Entry{Key: key, Revision: e.Revision, CreateRevision: e.CreateRevision}
			ev = backends.Event{Kind: backends.EventPut, Entry: e}
		case r.present:
			if r.entry.TTL > 0 {
				s.watched(key, r.seq, r.entry) // the put below is what it could owe
			} else {
				s.forget(key, r.seq, true) // the entry no longer expires
			}
			e := r.entry
			e.Remaining = e.TTL
			last[key] = backends.Entry{Key: key, Revision: e.Revision, CreateRevision: e.CreateRevision}
			ev = backends.Event{Kind: backends.EventPut, Entry: e}
		default:
			e := backends.Entry{Key: key, Revision: r.entry.Revision, CreateRevision: r.entry.CreateRevision}
			if e.Revision == 0 {
				e = last[key]
				e.Key = key
			}
			delete(last, key)
			s.forget(key, r.seq, false)
			ev = backends.Event{Kind: backends.EventDelete, Entry: e}
		}
		s.deliver(h, m.Subject(), r.seq, ev)
	}
}

// deliver sends ev to every watcher of its key that started before it. A
// watcher whose buffer is full is ended rather than skipped.
func (s *Store) deliver(h *hub, subj string, seq uint64, ev backends.Event) {
	s.mu.Lock()
	full := s.sendLocked(h, subj, seq, ev)
	s.mu.Unlock()
	for _, w := range full {
		s.end(h, w)
	}
}

// sendLocked is deliver with s.mu held; it returns the watchers whose
// buffer was full, for the caller to drop once it has let go of s.mu.
func (s *Store) sendLocked(h *hub, subj string, seq uint64, ev backends.Event) (full []*watcher) {
	h.watchers.matching(subj, func(w *watcher) {
		if s.examined != nil {
			s.examined(true)
		}
		if seq <= w.after || w.ctx.Err() != nil {
			return
		}
		e := ev
		e.Entry.Value = clone(ev.Entry.Value)
		select {
		case w.ch <- e:
		default:
			full = append(full, w)
		}
	})
	return full
}

// expiry is a sighting the hub's expiry timer judged expired.
type expiry struct {
	key string
	seq uint64
	at  time.Time
}

// expire reports, while the hub runs (until stop is closed), every entry
// this process has seen unchanged for its TTL: an EventDelete with the
// last revisions seen, to the watchers of its key, once per sighting. It
// judges as the store's writes do (see judge), from the sightings of the
// watch, of reads and of the store's own writes, so a follower told of an
// expiry finds the key free when it tries, unless a renewal came that
// this process had not seen yet: then its attempt is refused, and the
// renewal, when the hub reaches it, is reported as an EventPut.
//
// What it collects under s.mu it reports only under s.mu again, and only
// if the sighting is still the one it judged (see report): in between,
// the watch may have delivered a newer write of the key.
func (s *Store) expire(h *hub, stop <-chan struct{}) {
	for {
		now := s.clk.Now()
		s.mu.Lock()
		due, next := s.dueLocked(now)
		s.mu.Unlock()
		if len(due) > 0 && s.expiryCollected != nil {
			s.expiryCollected()
		}
		changed := false
		for _, d := range due {
			if !s.report(h, d) {
				changed = true
			}
		}
		if changed {
			// A sighting changed since it was judged: its new expiry
			// was not waited for. Judge again.
			select {
			case <-stop:
				return
			default:
				continue
			}
		}
		var timer *clock.Timer
		var fired <-chan time.Time
		if !next.IsZero() {
			timer = s.clk.Timer(next.Sub(now))
			fired = timer.C
		}
		select {
		case <-stop:
		case <-fired:
		case <-s.sighted:
		}
		if timer != nil {
			timer.Stop()
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}

// report delivers the expiry of d's entry, an EventDelete with the last
// revisions seen, if d is still the key's sighting and not reported yet,
// and marks it reported (no put is owed after that). It reports whether
// it was: a sighting replaced since (by a newer message, which the watch
// may have delivered already) is not reported, as an expiry after that
// put would undo it.
func (s *Store) report(h *hub, d expiry) bool {
	s.mu.Lock()
	sg, ok := s.seen[d.key]
	if !ok || sg.seq != d.seq || !sg.at.Equal(d.at) || sg.reported {
		s.mu.Unlock()
		return false
	}
	sg.reported, sg.owed = true, false
	s.seen[d.key] = sg
	e := sg.last
	e.TTL = 0
	full := s.sendLocked(h, s.subj+encodeKey(d.key), math.MaxUint64, backends.Event{Kind: backends.EventDelete, Entry: e})
	s.mu.Unlock()
	for _, w := range full {
		s.end(h, w)
	}
	return true
}
