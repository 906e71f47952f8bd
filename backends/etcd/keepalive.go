package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tenure-go/tenure/backends"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keeper sends the store's lease keep-alives on one stream, instead of
// opening a stream per keep-alive as clientv3's KeepAliveOnce does: opening
// a stream costs the client and the server far more than the message. The
// server answers a stream's requests one by one, in order, so each response
// belongs to the oldest request still waiting.
//
// A caller whose context ends while it waits gives the stream up: it may be
// stuck (a connection that drops what it carries), and the next keep-alive
// opens a new one. Close ends the stream through the store's context.
type keeper struct {
	s *Store

	sendMu sync.Mutex // serialises sends, so that waiting is in send order; held across a send, never with mu

	mu      sync.Mutex
	stream  pb.Lease_LeaseKeepAliveClient // guarded by mu; nil until a keep-alive needs one
	cancel  context.CancelFunc            // guarded by mu; ends stream
	waiting []*keepWait                   // guarded by mu; requests sent on stream, oldest first
}

type keepWait struct {
	id   clientv3.LeaseID
	done chan keepAnswer // buffered: the receiver never blocks on a caller that left
}

type keepAnswer struct {
	ttl int64
	err error
}

// keepAliveOnce keeps lease id alive once and returns the TTL it was
// renewed for. A lease etcd no longer has is rpctypes.ErrLeaseNotFound.
func (s *Store) keepAliveOnce(ctx context.Context, id clientv3.LeaseID) (int64, error) {
	k := &s.keeper
	w := &keepWait{id: id, done: make(chan keepAnswer, 1)}
	k.sendMu.Lock()
	st, err := k.current()
	if err != nil {
		k.sendMu.Unlock()
		return 0, err
	}
	k.mu.Lock()
	if k.stream != st { // it failed in between: its waiters were answered
		k.mu.Unlock()
		k.sendMu.Unlock()
		return 0, errStreamEnded
	}
	k.waiting = append(k.waiting, w)
	k.mu.Unlock()
	err = st.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)})
	k.sendMu.Unlock()
	if err != nil {
		k.fail(st, err)
	}
	select {
	case a := <-w.done:
		if a.err != nil {
			return 0, a.err
		}
		if a.ttl <= 0 {
			return 0, rpctypes.ErrLeaseNotFound
		}
		return a.ttl, nil
	case <-ctx.Done():
		k.fail(st, errStreamEnded)
		return 0, ctx.Err()
	}
}

// errStreamEnded answers the keep-alives waiting on a stream that a caller
// gave up, or that failed before their request was sent: transient, the
// next call opens a new stream.
var errStreamEnded = fmt.Errorf("keep-alive stream ended: %w", backends.ErrUnavailable)

// current returns the open stream, opening one if there is none.
func (k *keeper) current() (pb.Lease_LeaseKeepAliveClient, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stream != nil {
		return k.stream, nil
	}
	ctx, cancel := context.WithCancel(opctx(k.s.ctx))
	st, err := pb.NewLeaseClient(k.s.cli.ActiveConnection()).LeaseKeepAlive(ctx)
	if err != nil {
		cancel()
		return nil, rpctypes.Error(err)
	}
	// The receiver joins the store's goroutines, unless Close has begun.
	k.s.mu.Lock()
	closed := k.s.closed
	if !closed {
		k.s.wg.Add(1)
	}
	k.s.mu.Unlock()
	if closed {
		cancel()
		return nil, backends.ErrClosed
	}
	k.stream, k.cancel = st, cancel
	go k.receive(st)
	return st, nil
}

// receive hands each response on st to the oldest waiting request, until st
// fails.
func (k *keeper) receive(st pb.Lease_LeaseKeepAliveClient) {
	defer k.s.wg.Done()
	for {
		resp, err := st.Recv()
		if err != nil {
			k.fail(st, rpctypes.Error(err))
			return
		}
		k.mu.Lock()
		if k.stream != st {
			k.mu.Unlock()
			return
		}
		if len(k.waiting) == 0 || k.waiting[0].id != clientv3.LeaseID(resp.ID) {
			k.mu.Unlock()
			k.fail(st, errors.New("etcd: keep-alive stream answered out of order"))
			return
		}
		w := k.waiting[0]
		k.waiting[0] = nil
		k.waiting = k.waiting[1:]
		k.mu.Unlock()
		w.done <- keepAnswer{ttl: resp.TTL}
	}
}

// fail ends st, if it is still the open stream, and answers every request
// waiting on it with err.
func (k *keeper) fail(st pb.Lease_LeaseKeepAliveClient, err error) {
	k.mu.Lock()
	if k.stream != st {
		k.mu.Unlock()
		return
	}
	waiting := k.waiting
	k.stream, k.waiting = nil, nil
	cancel := k.cancel
	k.mu.Unlock()
	cancel()
	for _, w := range waiting {
		w.done <- keepAnswer{err: err}
	}
}
