package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// batchTimeout bounds one batch's statement when no caller has a deadline.
const batchTimeout = 30 * time.Second

// kaReq is one KeepAlive waiting for its batch.
type kaReq struct {
	key      string
	rev, ttl int64 // ttl in ms
	deadline time.Time
	res      chan kaRes // buffered: the batch never waits for a caller
}

type kaRes struct {
	x   row
	ok  bool // renewed; false: not matched, the caller finds out why
	err error
}

// keepAliveBatched queues a keep-alive for the next batch and waits for it
// or for ctx.
func (s *Store) keepAliveBatched(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	req := &kaReq{key: key, rev: rev, ttl: ttlMS(ttl), res: make(chan kaRes, 1)}
	req.deadline, _ = ctx.Deadline()
	s.mu.Lock()
	if s.closing.Closed() {
		s.mu.Unlock()
		return backends.Entry{}, fmt.Errorf("postgres: keepalive %q: %w", key, backends.ErrClosed)
	}
	s.pending = append(s.pending, req)
	if !s.armed {
		s.armed = true
		s.bg.Add(1)
		go s.runBatch()
	}
	s.mu.Unlock()
	select {
	case r := <-req.res:
		if r.err != nil {
			return backends.Entry{}, r.err
		}
		if !r.ok {
			return backends.Entry{}, s.keepAliveConflict(ctx, key, rev)
		}
		e, _ := s.judge(r.x, s.clk.Now())
		return e, nil
	case <-ctx.Done():
		// The batch may still renew it: the outcome is unknown.
		return backends.Entry{}, fmt.Errorf("postgres: keepalive %q: %w", key, ctx.Err())
	}
}

// runBatch waits for the window, then renews every queued keep-alive with
// one statement and answers each.
func (s *Store) runBatch() {
	defer s.bg.Done()
	t := s.clk.Timer(s.batch)
	select {
	case <-t.C:
	case <-s.stopCtx.Done():
		t.Stop()
	}
	s.mu.Lock()
	reqs := s.pending
	s.pending, s.armed = nil, false
	s.mu.Unlock()
	if s.stopCtx.Err() != nil {
		for _, r := range reqs {
			r.res <- kaRes{err: fmt.Errorf("postgres: keepalive %q: %w", r.key, backends.ErrClosed)}
		}
		return
	}
	// The statement may take as long as the most patient caller waits.
	var last time.Time
	patient := false // a caller without a deadline
	keys := make([]string, len(reqs))
	revs := make([]int64, len(reqs))
	ttls := make([]int64, len(reqs))
	for i, r := range reqs {
		keys[i], revs[i], ttls[i] = r.key, r.rev, r.ttl
		if r.deadline.IsZero() {
			patient = true
		} else if r.deadline.After(last) {
			last = r.deadline
		}
	}
	ctx, cancel := context.WithDeadline(s.stopCtx, last)
	if patient {
		cancel()
		ctx, cancel = context.WithTimeout(s.stopCtx, batchTimeout)
	}
	defer cancel()
	rows, err := s.pool.Query(ctx, s.sq.keepAliveMany, keys, revs, ttls)
	got := make(map[string]row, len(reqs))
	if err == nil {
		for rows.Next() {
			x, serr := scanRow(rows)
			if serr != nil {
				err = serr
				break
			}
			got[x.key] = x
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	for _, r := range reqs {
		if err != nil {
			r.res <- kaRes{err: mapError("keepalive", r.key, err)}
			continue
		}
		x, ok := got[r.key]
		r.res <- kaRes{x: x, ok: ok && x.rev == r.rev}
	}
}
