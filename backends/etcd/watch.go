package etcd

import (
	"context"
	"fmt"

	"github.com/tenure-go/tenure/backends"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

const (
	// watchChanSize is the buffer of the channel Watch returns.
	watchChanSize = 16
	// maxWatchBacklog is how many events a watch holds for a consumer that
	// does not keep up before it ends the stream (the consumer re-reads and
	// watches again). It keeps a stalled consumer from growing memory without
	// bound; writers are never blocked either way.
	maxWatchBacklog = 4096
)

// Watch implements backends.Watcher with an etcd watch on the prefix. It
// first reads the current revision (one request) and watches from the next
// one, so every change made after Watch returns is delivered. Expiry is
// delivered: etcd deletes the keys of an expired lease, and that is an
// EventDelete. Events carry no TTL (TTL and Remaining are zero); Get has it.
//
// The stream requires an etcd leader: a member cut off from its cluster ends
// it, as do ctx, Close, compaction of the revisions it needs and a consumer
// more than maxWatchBacklog events behind.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("etcd: watch: %w", err)
	}
	if err := s.checkOpen("watch", prefix); err != nil {
		return nil, err
	}
	k := s.prefix + prefix
	probe := k
	if probe == "" {
		probe = "\x00"
	}
	resp, err := s.cli.Get(opctx(ctx), probe, clientv3.WithCountOnly())
	if err != nil {
		return nil, s.fail("watch", prefix, err)
	}

	wctx, cancel := context.WithCancel(opctx(ctx))
	stop := context.AfterFunc(s.ctx, cancel) // Close ends the watch
	wch := s.cli.Watch(wctx, k, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1), clientv3.WithPrevKV())
	out := make(chan backends.Event, watchChanSize)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(out)
		defer stop()
		defer func() {
			cancel()
			for range wch { // the client closes wch once the cancel is through
			}
		}()
		s.forward(wctx, wch, out)
	}()
	return out, nil
}

// forward copies events from wch to out until wch ends, ctx is done or the
// consumer falls maxWatchBacklog events behind.
func (s *Store) forward(ctx context.Context, wch clientv3.WatchChan, out chan<- backends.Event) {
	var backlog []backends.Event
	in := wch
	for {
		var send chan<- backends.Event
		var next backends.Event
		if len(backlog) > 0 {
			send, next = out, backlog[0]
		}
		select {
		case <-ctx.Done():
			return
		case send <- next:
			backlog[0] = backends.Event{}
			backlog = backlog[1:]
		case resp, ok := <-in:
			if !ok || resp.Canceled || resp.Err() != nil {
				// Deliver what is already queued, then end the stream.
				for _, ev := range backlog {
					select {
					case out <- ev:
					case <-ctx.Done():
						return
					}
				}
				return
			}
			for _, ev := range resp.Events {
				s.saw(string(ev.Kv.Key), ev.Type == mvccpb.DELETE)
				backlog = append(backlog, s.event(ev))
			}
			if len(backlog) > maxWatchBacklog {
				return
			}
		}
	}
}

func (s *Store) event(ev *clientv3.Event) backends.Event {
	if ev.Type == mvccpb.PUT {
		return backends.Event{Kind: backends.EventPut, Entry: s.entry(ev.Kv)}
	}
	e := backends.Entry{Key: string(ev.Kv.Key[len(s.prefix):]), Revision: ev.Kv.ModRevision}
	if ev.PrevKv != nil {
		e = s.entry(ev.PrevKv)
	}
	return backends.Event{Kind: backends.EventDelete, Entry: e}
}

// saw records that a watch saw etcd key k deleted or written (Store.freed),
// before the consumer hears of it.
func (s *Store) saw(k string, deleted bool) {
	s.freedMu.Lock()
	defer s.freedMu.Unlock()
	if !deleted {
		delete(s.freed, k)
		return
	}
	if len(s.freed) >= maxFreed {
		clear(s.freed)
	}
	s.freed[k] = struct{}{}
}
