package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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
// A caller whose context ends while it waits, with no answer on the stream
// since it sent, gives the stream up: it may be stuck (a connection that
// drops what it carries), and the next keep-alive opens a new one. Close
// ends the stream through the store's context.
type keeper struct {
	s *Store

	// sending is the right (capacity one) to open the stream and to send on
	// it, so that waiting is in send order. Callers take it or give up
	// with their context, as they do everywhere.
	sending chan struct{}

	mu      sync.Mutex
	stream  pb.Lease_LeaseKeepAliveClient // guarded by mu; nil until a keep-alive needs one
	cancel  context.CancelFunc            // guarded by mu; ends stream
	waiting []keepWait                    // guarded by mu; requests sent on stream, oldest first
	answers int64                         // guarded by mu; answers received on stream
}

func newKeeper(s *Store) keeper { return keeper{s: s, sending: make(chan struct{}, 1)} }

type keepWait struct {
	id      clientv3.LeaseID
	done    chan keepAnswer // buffered: the receiver never blocks on a caller that left
	answers int64           // the stream's answers when this request was queued
}

type keepAnswer struct {
	ttl int64
	err error
}

// keepAliveOnce keeps lease id alive once and returns the TTL it was
// renewed for. A lease etcd no longer has is rpctypes.ErrLeaseNotFound.
// Unless until is zero, the keep-alive is sent only before until, on the
// store's clock (see keepUntil); if it cannot be, nothing is sent, not even
// the opening of a stream, and the error is errTooLate.
func (s *Store) keepAliveOnce(ctx context.Context, id clientv3.LeaseID, until time.Time) (int64, error) {
	k := &s.keeper
	if !until.IsZero() && !s.clock.Now().Before(until) {
		return 0, errTooLate
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	select {
	case k.sending <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	st, err := k.current(ctx)
	if err != nil {
		<-k.sending
		return 0, err
	}
	// The request is queued by value: a renewal allocates its answer's
	// channel and nothing else of its own.
	done := make(chan keepAnswer, 1)
	k.mu.Lock()
	if k.stream != st { // it failed in between: its waiters were answered
		k.mu.Unlock()
		<-k.sending
		return 0, errStreamEnded
	}
	if !until.IsZero() && !s.clock.Now().Before(until) {
		k.mu.Unlock()
		<-k.sending
		return 0, errTooLate
	}
	w := keepWait{id: id, done: done, answers: k.answers}
	k.waiting = append(k.waiting, w)
	k.mu.Unlock()
	// A send blocked on a stuck connection ends with the caller's context.
	stop := context.AfterFunc(ctx, func() { k.fail(st, errStreamEnded) })
	err = st.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)})
	stop()
	<-k.sending
	if err != nil {
		k.fail(st, rpctypes.Error(err))
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
		k.giveUp(st, w.answers)
		return 0, ctx.Err()
	}
}

// giveUp is called by a caller that stops waiting for the answer to its
// request, queued when the stream had given answers answers. If the
// stream has answered nothing since, it may be stuck (a connection that
// drops what it carries): it is ended, and the next keep-alive opens a new
// one. A stream that is answering is slow, not
// stuck, and the other callers keep waiting on it.
func (k *keeper) giveUp(st pb.Lease_LeaseKeepAliveClient, answers int64) {
	k.mu.Lock()
	stuck := k.stream == st && k.answers == answers
	k.mu.Unlock()
	if stuck {
		k.fail(st, errStreamEnded)
	}
}

// errTooLate is the error of a keep-alive that was not sent because the
// lease may be close to its expiry at the server (see leaseGuard). A
// renewal refused for it is lost (tooLate).
var errTooLate = errors.New("the lease may be close to its expiry at the server, and was not kept alive")

// errStreamEnded answers the keep-alives waiting on a stream that a caller
// gave up, or that failed before their request was sent: transient, the
// next call opens a new stream.
var errStreamEnded = fmt.Errorf("keep-alive stream ended: %w", backends.ErrUnavailable)

// current returns the open stream, opening one if there is none. Only the
// holder of sending calls it. Opening ends with ctx, but the stream, once
// open, lives until it fails or the store closes.
func (k *keeper) current(ctx context.Context) (pb.Lease_LeaseKeepAliveClient, error) {
	k.mu.Lock()
	st := k.stream
	k.mu.Unlock()
	if st != nil {
		return st, nil
	}
	sctx, cancel := context.WithCancel(opctx(k.s.ctx))
	stopOpen := context.AfterFunc(ctx, cancel)
	st, err := pb.NewLeaseClient(k.s.cli.ActiveConnection()).LeaseKeepAlive(sctx)
	if !stopOpen() {
		cancel()
		return nil, ctx.Err()
	}
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
	k.mu.Lock()
	k.stream, k.cancel = st, cancel
	k.mu.Unlock()
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
		k.waiting[0] = keepWait{}
		k.waiting = k.waiting[1:]
		k.answers++
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
