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
// One caller giving up never costs another its renewal. A caller whose
// context ends before its answer leaves its request behind (the answer,
// when it comes, is dropped) and never ends the stream. If the stream
// answered nothing since that caller's request was queued, it may be stuck
// (a connection that drops what it carries): it is retired, so that the
// next keep-alive opens a new stream, while the callers still waiting on
// the retired one go on waiting for their answers, and it ends when the
// last of them has its answer or gives up. A stream that is answering is
// slow, not stuck, and stays. Requests are sent by the stream's own sender,
// so a send blocked on a stuck connection holds no caller. Close ends every
// stream through the store's context.
type keeper struct {
	s *Store

	// opening is the right (capacity one) to open a stream, so that
	// callers that find none open one, not one each. Callers take it or
	// give up with their context, as they do everywhere.
	opening chan struct{}

	mu  sync.Mutex
	cur *keepStream // guarded by mu; where new requests go; nil until a keep-alive needs one, and after it ends or is retired
}

func newKeeper(s *Store) keeper { return keeper{s: s, opening: make(chan struct{}, 1)} }

// keepStream is one keep-alive stream, with its sender and its receiver.
// Its fields after ctx are guarded by the keeper's mu.
type keepStream struct {
	st     pb.Lease_LeaseKeepAliveClient
	ctx    context.Context // ends the stream, its sender and its receiver
	cancel context.CancelFunc
	wake   chan struct{} // buffered: the sender has requests to send

	queue   []*keepWait // queued, not sent yet, oldest first
	waiting []*keepWait // sent, not answered yet, oldest first
	answers int64       // answers received
	callers int         // requests queued or sent whose callers still wait for their answer
	retired bool        // no new request goes on it; it ends when callers is 0
	ended   bool
}

// keepWait is one keep-alive request. Its flags are guarded by the
// keeper's mu.
type keepWait struct {
	id      clientv3.LeaseID
	until   time.Time       // zero, or the latest time it may be sent (keepUntil)
	done    chan keepAnswer // buffered: nobody ever blocks on a caller that left
	answers int64           // the stream's answers when it was queued
	gone    bool            // its caller stopped waiting
	settled bool            // it was answered
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
	// The request is queued on the stream new requests go on. If that
	// one ended or was retired between finding it and queueing, another
	// is found; twice in a row means streams are failing as they open.
	w := &keepWait{id: id, until: until, done: make(chan keepAnswer, 1)}
	var ks *keepStream
	for try := 0; ; try++ {
		var err error
		if ks, err = k.stream(ctx); err != nil {
			return 0, err
		}
		k.mu.Lock()
		if !ks.ended && !ks.retired {
			w.answers = ks.answers
			ks.queue = append(ks.queue, w)
			ks.callers++
			k.mu.Unlock()
			break
		}
		k.mu.Unlock()
		if try > 0 {
			return 0, errStreamEnded
		}
	}
	select {
	case ks.wake <- struct{}{}:
	default: // the sender is already woken
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
		k.leave(ks, w)
		return 0, ctx.Err()
	}
}

// leave is called by a caller that stops waiting for the answer to w on
// ks. If ks answered nothing since w was queued, it may be stuck and is
// retired (see keeper). A retired stream ends when no caller waits on it.
func (k *keeper) leave(ks *keepStream, w *keepWait) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if w.settled || w.gone {
		return
	}
	w.gone = true
	ks.callers--
	if ks.answers == w.answers {
		k.retireLocked(ks)
	}
	k.endIfIdleLocked(ks)
}

// retireLocked makes new requests go on a new stream; the callers waiting
// on ks keep waiting for their answers.
func (k *keeper) retireLocked(ks *keepStream) {
	ks.retired = true
	if k.cur == ks {
		k.cur = nil
	}
}

// endIfIdleLocked ends ks if it is retired and nobody waits on it any more.
func (k *keeper) endIfIdleLocked(ks *keepStream) {
	if ks.retired && ks.callers == 0 && !ks.ended {
		ks.ended = true
		ks.queue, ks.waiting = nil, nil
		ks.cancel()
	}
}

// errTooLate is the error of a keep-alive that was not sent because the
// lease may be close to its expiry at the server (see leaseGuard). A
// renewal refused for it is lost (tooLate).
var errTooLate = errors.New("the lease may be close to its expiry at the server, and was not kept alive")

// errStreamEnded answers a keep-alive that found the stream it was to go
// on ended or retired twice in a row: transient, the next call opens a new
// stream.
var errStreamEnded = fmt.Errorf("keep-alive stream ended: %w", backends.ErrUnavailable)

// stream returns the stream new requests go on, opening one if there is
// none. Opening ends with ctx, but the stream, once open, lives until it
// fails, is retired and idle, or the store closes.
func (k *keeper) stream(ctx context.Context) (*keepStream, error) {
	k.mu.Lock()
	ks := k.cur
	k.mu.Unlock()
	if ks != nil {
		return ks, nil
	}
	select {
	case k.opening <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-k.opening }()
	k.mu.Lock()
	ks = k.cur
	k.mu.Unlock()
	if ks != nil { // another caller opened it meanwhile
		return ks, nil
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
	// The sender and the receiver join the store's goroutines, unless
	// Close has begun.
	k.s.book.mu.Lock()
	closed := k.s.book.closing.Closed()
	if !closed {
		k.s.wg.Add(2)
	}
	k.s.book.mu.Unlock()
	if closed {
		cancel()
		return nil, backends.ErrClosed
	}
	ks = &keepStream{st: st, ctx: sctx, cancel: cancel, wake: make(chan struct{}, 1)}
	k.mu.Lock()
	k.cur = ks
	k.mu.Unlock()
	go k.send(ks)
	go k.receive(ks)
	return ks, nil
}

// send sends the requests queued on ks, in order, until ks ends. A request
// whose caller left before it was sent is dropped; one whose until has
// passed is answered errTooLate and not sent.
func (k *keeper) send(ks *keepStream) {
	defer k.s.wg.Done()
	for {
		k.mu.Lock()
		for len(ks.queue) > 0 && !ks.ended {
			w := ks.queue[0]
			ks.queue[0] = nil
			ks.queue = ks.queue[1:]
			if w.gone {
				continue
			}
			if !w.until.IsZero() && !k.s.clock.Now().Before(w.until) {
				k.settleLocked(ks, w, keepAnswer{err: errTooLate})
				continue
			}
			ks.waiting = append(ks.waiting, w)
			k.mu.Unlock()
			if err := ks.st.Send(&pb.LeaseKeepAliveRequest{ID: int64(w.id)}); err != nil {
				k.fail(ks, rpctypes.Error(err))
				return
			}
			k.mu.Lock()
		}
		k.mu.Unlock()
		select {
		case <-ks.ctx.Done():
			return
		case <-ks.wake:
		}
	}
}

// settleLocked answers w, unless its caller left, and ends ks if that was
// the last caller of a retired stream.
func (k *keeper) settleLocked(ks *keepStream, w *keepWait, a keepAnswer) {
	w.settled = true
	if w.gone {
		return
	}
	ks.callers--
	w.done <- a
	k.endIfIdleLocked(ks)
}

// receive hands each response on ks to the oldest request waiting on it,
// until ks fails or ends.
func (k *keeper) receive(ks *keepStream) {
	defer k.s.wg.Done()
	for {
		resp, err := ks.st.Recv()
		if err != nil {
			k.fail(ks, rpctypes.Error(err))
			return
		}
		k.mu.Lock()
		if ks.ended {
			k.mu.Unlock()
			return
		}
		if len(ks.waiting) == 0 || ks.waiting[0].id != clientv3.LeaseID(resp.ID) {
			k.mu.Unlock()
			k.fail(ks, errors.New("etcd: keep-alive stream answered out of order"))
			return
		}
		w := ks.waiting[0]
		ks.waiting[0] = nil
		ks.waiting = ks.waiting[1:]
		ks.answers++
		k.settleLocked(ks, w, keepAnswer{ttl: resp.TTL})
		k.mu.Unlock()
	}
}

// fail ends ks, if it has not ended, and answers every request on it whose
// caller still waits with err.
func (k *keeper) fail(ks *keepStream, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ks.ended {
		return
	}
	if k.cur == ks {
		k.cur = nil
	}
	ks.ended = true
	for _, w := range append(ks.waiting, ks.queue...) {
		w.settled = true
		if !w.gone {
			w.done <- keepAnswer{err: err}
		}
	}
	ks.queue, ks.waiting, ks.callers = nil, nil, 0
	ks.cancel()
}
