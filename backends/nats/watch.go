package nats

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/tenure-go/tenure/backends"
)

// watchBuffer is how many events a watch holds for a slow consumer before
// it ends the stream rather than block or skip.
const watchBuffer = 256

// Watch streams changes of keys under prefix made after it returned,
// through an ordered consumer that starts after the stream's last
// sequence at the call. A keep-alive yields no event (it only moves the
// sequence, which the store counts as a sighting); a delete yields
// EventDelete with the revisions it removed; a message the server writes
// when it drops an entry (a grace after its TTL, see the package doc)
// yields EventDelete with the last revisions the watch saw, if any. Expiry
// as this store judges it is not reported (Capabilities.ExpiryEvents is
// false): a follower times its next attempt from Entry.Remaining.
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
	cons, err := s.js.OrderedConsumer(octx, s.stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{s.subj + ">"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    info.State.LastSeq + 1,
	})
	if err != nil {
		return nil, fmt.Errorf("nats: watch %q: %w", prefix, mapErr(err))
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("nats: watch %q: %w", prefix, mapErr(err))
	}
	ch := make(chan backends.Event, watchBuffer)
	stop := make(chan struct{})
	s.watches.Add(2)
	go func() {
		defer s.watches.Done()
		select {
		case <-ctx.Done():
		case <-s.done:
		case <-stop:
		}
		it.Stop()
	}()
	go func() {
		defer s.watches.Done()
		defer close(ch)
		defer close(stop)
		s.follow(ctx, it, prefix, ch)
	}()
	return ch, nil
}

// follow turns the consumer's messages into events until it ends.
func (s *Store) follow(ctx context.Context, it jetstream.MessagesContext, prefix string, ch chan<- backends.Event) {
	enc := s.subj + encodeKey(prefix)
	last := map[string]backends.Entry{} // last revisions seen per key
	for {
		m, err := it.Next()
		if err != nil {
			return
		}
		if ctx.Err() != nil {
			return
		}
		subj := m.Subject()
		if !strings.HasPrefix(subj, enc) {
			continue
		}
		key, ok := decodeKey(strings.TrimPrefix(subj, s.subj))
		if !ok {
			continue
		}
		meta, err := m.Metadata()
		if err != nil {
			return
		}
		r, err := decode(key, meta.Sequence.Stream, m.Headers(), m.Data())
		if err != nil {
			return // a stream that cannot say what happened ends
		}
		var ev backends.Event
		switch {
		case r.present && r.keepAlive:
			if r.entry.TTL > 0 {
				s.saw(key, r.seq)
			}
			continue
		case r.present:
			if r.entry.TTL > 0 {
				s.saw(key, r.seq)
			}
			e := r.entry
			e.Value = clone(e.Value)
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
			s.judge(r) // forget the sighting
			ev = backends.Event{Kind: backends.EventDelete, Entry: e}
		}
		select {
		case ch <- ev:
		default:
			return // the consumer fell behind: end rather than skip
		}
	}
}
