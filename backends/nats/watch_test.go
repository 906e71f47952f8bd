package nats

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/nats/natstest"
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
	jetstream.MessagesContext
	msgs []fakeMsg
}

func (f *fakeIter) Next(...jetstream.NextOpt) (jetstream.Msg, error) {
	if len(f.msgs) == 0 {
		return nil, jetstream.ErrMsgIteratorClosed
	}
	m := f.msgs[0]
	f.msgs = f.msgs[1:]
	return m, nil
}

// TestWatchEndsOnGap: when the consumer's next message is not the next
// stream sequence (older messages of a key were removed before the
// consumer reached them, as a bucket's history limit does to a lagging
// consumer), the watch ends instead of skipping the write. The real
// servers' tests cover delivery without gaps; a gap cannot be forced on
// them deterministically, so the consumer is faked here.
func TestWatchEndsOnGap(t *testing.T) {
	s := &Store{subj: "$KV.b.", clk: clock.New(), seen: map[string]sighting{}}
	put := header(time.Second, 0, 0)
	it := &fakeIter{msgs: []fakeMsg{
		{subj: "$KV.b.w/a", seq: 5, hdr: put},
		{subj: "$KV.b.w/a", seq: 6, hdr: put},
		{subj: "$KV.b.w/a", seq: 8, hdr: put}, // 7 is gone
		{subj: "$KV.b.w/a", seq: 9, hdr: put},
	}}
	w := &watcher{ctx: context.Background(), prefix: "$KV.b.w", ch: make(chan backends.Event, 8)}
	h := &hub{it: it, start: 5, watchers: map[*watcher]struct{}{w: {}}}
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

// TestWatchCloseRace: Watch calls racing Close either fail with ErrClosed
// or return a channel that Close closes; none outlives Close (goleak and
// -race check the rest).
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
