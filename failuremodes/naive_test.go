package failuremodes_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// naive is the elector this package measures tenure against: the loop of
// the shardcoordinator README, kept as written there, faults included.
//
//   - One ticker every period, no jitter; the first attempt at Start.
//   - A follower tries to take the claim; a leader renews it. A renewal that
//     returns false or any error demotes at once (error-blind).
//   - IsLeader returns a stored bool. There is no local deadline: nothing
//     turns it false but the loop.
//   - Backend calls carry the loop's context and no timeout.
//   - A panic ends the loop (it is recovered, so the process lives on) and
//     the state stays what it was.
//   - Start twice starts two loops and keeps only the second's cancel.
//   - Stop reads the state, cancels the loop, and releases only if the state
//     it read was leader. Release runs on Stop's context, with no timeout of
//     its own.
//   - onElected is started in a goroutine when the claim is taken and never
//     awaited; onStopped is called at Stop whether or not this node ever led
//     (client-go's OnStoppedLeading).
//   - The claim is owned by the configured owner string: no nonce.
type naive struct {
	name   string
	owner  string
	lock   naiveLocker
	clk    clock.Clock
	period time.Duration
	rec    *electortest.Recorder

	onElected func(ctx context.Context)
	onStopped func()
	// betweenReadAndCancel runs inside Stop, after the state was read and
	// before the loop is cancelled: the window of the TOCTOU.
	betweenReadAndCancel func()
	// oneShot ends the loop when leadership is lost, as client-go's Run
	// and etcd's Campaign do.
	oneShot bool

	mu      sync.Mutex
	leader  bool                 // guarded by mu
	cancel  context.CancelFunc   // guarded by mu; the last Start's
	done    chan struct{}        // guarded by mu; the last Start's loop
	cancels []context.CancelFunc // guarded by mu; every loop's, for the test's cleanup only
	dones   []chan struct{}      // guarded by mu; every loop's, for the test's cleanup only
	work    sync.WaitGroup       // onElected goroutines, joined by the test's cleanup only
}

// naiveLocker is the shardcoordinator Locker: booleans for "held", errors
// for everything else.
type naiveLocker interface {
	tryAcquire(ctx context.Context, owner string) (bool, error)
	renew(ctx context.Context, owner string) (bool, error)
	release(ctx context.Context, owner string) error
}

// newNaive makes a naive participant over lock; cleanup stops every loop it
// started.
func (w *world) newNaive(name string, lock naiveLocker) *naive {
	n := &naive{name: name, owner: name, lock: lock, clk: w.clk, period: renewPeriod, rec: electortest.NewRecorder(w.t, w.clk)}
	w.t.Cleanup(n.cleanup)
	return n
}

func (n *naive) Name() string { return n.name }

// IsLeader returns the stored bool.
func (n *naive) IsLeader() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.leader
}

func (n *naive) setLeader(v bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.leader = v
}

// Start starts a loop. A second Start starts a second loop.
func (n *naive) Start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	n.mu.Lock()
	n.cancel, n.done = cancel, done
	n.cancels = append(n.cancels, cancel)
	n.dones = append(n.dones, done)
	n.mu.Unlock()
	go n.loop(ctx, done)
}

func (n *naive) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	defer func() { _ = recover() }() // the loop is gone; the state stays
	tick := n.clk.Ticker(n.period)
	defer tick.Stop()
	if !n.tick(ctx) {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !n.tick(ctx) {
				return
			}
		}
	}
}

// tick makes one attempt or renewal; false ends a one-shot loop.
func (n *naive) tick(ctx context.Context) bool {
	if n.IsLeader() {
		ok, err := n.lock.renew(ctx, n.owner)
		if err != nil || !ok {
			n.setLeader(false)
			n.rec.Add(electortest.Event{Kind: electortest.Dropped})
			return !n.oneShot
		}
		n.rec.Add(electortest.Event{Kind: electortest.Renewed})
		return true
	}
	n.rec.Add(electortest.Event{Kind: electortest.Attempt})
	ok, err := n.lock.tryAcquire(ctx, n.owner)
	if err != nil || !ok {
		n.rec.Add(electortest.Event{Kind: electortest.Lost})
		return true
	}
	n.setLeader(true)
	n.rec.Add(electortest.Event{Kind: electortest.Acquired})
	if n.onElected != nil {
		n.work.Go(func() { n.onElected(ctx) })
	}
	return true
}

// Stop is shardcoordinator's: read, cancel, release if the read said leader.
func (n *naive) Stop(ctx context.Context) error {
	wasLeader := n.IsLeader()
	if n.betweenReadAndCancel != nil {
		n.betweenReadAndCancel()
	}
	n.mu.Lock()
	cancel, done := n.cancel, n.done
	n.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	if n.onStopped != nil {
		n.onStopped()
	}
	if !wasLeader {
		return nil
	}
	err := n.lock.release(ctx, n.owner)
	n.setLeader(false)
	return err
}

// cleanup ends every loop and goroutine the naive node started, including
// the ones its own Stop forgets. It is test plumbing, not part of the model.
func (n *naive) cleanup() {
	n.mu.Lock()
	cancels, dones := n.cancels, n.dones
	n.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	for _, d := range dones {
		<-d
	}
	n.work.Wait()
}

// epochLocker is the DynamoDB/Route53 locker of the README over a Store:
// the value is "owner expiry", the expiry a wall-clock time written by the
// holder and judged by whoever reads it against their own wall clock; the
// store's own TTL is not used. Owner checks compare the owner string only.
type epochLocker struct {
	store backends.Store
	key   string
	ttl   time.Duration
	wall  clock.Clock // this participant's wall clock
}

func (l *epochLocker) value(owner string) []byte {
	return fmt.Appendf(nil, "%s %d", owner, l.wall.Now().Add(l.ttl).UnixNano())
}

// parse is route53lock's parseRecordValue: split at the first space.
func parseEpoch(v []byte) (owner string, expiry int64, err error) {
	owner, rest, ok := strings.Cut(string(v), " ")
	if !ok {
		return "", 0, fmt.Errorf("naive: record %q has no space", v)
	}
	expiry, err = strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("naive: record %q: %w", v, err)
	}
	return owner, expiry, nil
}

func (l *epochLocker) tryAcquire(ctx context.Context, owner string) (bool, error) {
	e, err := l.store.Get(ctx, l.key)
	if errors.Is(err, backends.ErrNotFound) {
		_, err := l.store.CreateIfAbsent(ctx, l.key, l.value(owner), 0)
		return err == nil, ignoreConflict(err)
	}
	if err != nil {
		return false, err
	}
	cur, expiry, err := parseEpoch(e.Value)
	if err != nil {
		return false, err
	}
	if cur != owner && expiry >= l.wall.Now().UnixNano() {
		return false, nil
	}
	_, err = l.store.CompareAndSet(ctx, l.key, e.Revision, l.value(owner), 0)
	return err == nil, ignoreConflict(err)
}

func (l *epochLocker) renew(ctx context.Context, owner string) (bool, error) {
	e, err := l.store.Get(ctx, l.key)
	if err != nil {
		return false, err
	}
	cur, expiry, err := parseEpoch(e.Value)
	if err != nil {
		return false, err
	}
	if cur != owner || expiry < l.wall.Now().UnixNano() {
		return false, nil
	}
	_, err = l.store.CompareAndSet(ctx, l.key, e.Revision, l.value(owner), 0)
	return err == nil, ignoreConflict(err)
}

func (l *epochLocker) release(ctx context.Context, owner string) error {
	e, err := l.store.Get(ctx, l.key)
	if err != nil {
		return err
	}
	if cur, _, err := parseEpoch(e.Value); err != nil || cur != owner {
		return err
	}
	return l.store.CompareAndDelete(ctx, l.key, e.Revision)
}

// ttlLocker is a read-then-write locker over the store's own TTL: it reads
// the claim, judges from what it read whether it is free or expired, and
// then writes, conditioned only on the revision it read. Renewal is a
// keep-alive, which does not change the revision.
type ttlLocker struct {
	store backends.Store
	key   string
	ttl   time.Duration

	mu  sync.Mutex
	rev int64 // guarded by mu; the revision of the claim this locker took
}

func (l *ttlLocker) tryAcquire(ctx context.Context, owner string) (bool, error) {
	e, err := l.store.Get(ctx, l.key)
	var got backends.Entry
	switch {
	case errors.Is(err, backends.ErrNotFound):
		got, err = l.store.CreateIfAbsent(ctx, l.key, []byte(owner), l.ttl)
	case err != nil:
		return false, err
	case string(e.Value) == owner || e.Remaining <= 0: // ours, or expired by what we read
		got, err = l.store.CompareAndSet(ctx, l.key, e.Revision, []byte(owner), l.ttl)
	default:
		return false, nil
	}
	if err != nil {
		return false, ignoreConflict(err)
	}
	l.mu.Lock()
	l.rev = got.Revision
	l.mu.Unlock()
	return true, nil
}

func (l *ttlLocker) renew(ctx context.Context, _ string) (bool, error) {
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	_, err := l.store.KeepAlive(ctx, l.key, rev, l.ttl)
	return err == nil, ignoreConflict(err)
}

func (l *ttlLocker) release(ctx context.Context, _ string) error {
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	return l.store.CompareAndDelete(ctx, l.key, rev)
}

// strictLocker is the naive loop's view of a correct Locker: holders with
// nonces, conditional writes, fencing tokens. What stays naive is the loop:
// a claim it holds but has no lease for is "held", like anyone else's.
type strictLocker struct {
	l      backends.Locker
	key    string
	ttl    time.Duration
	holder backends.Holder

	mu    sync.Mutex
	lease backends.Claim // guarded by mu
}

func (l *strictLocker) tryAcquire(ctx context.Context, _ string) (bool, error) {
	lease, err := l.l.TryAcquire(ctx, l.key, l.holder, l.ttl)
	if errors.Is(err, backends.ErrHeld) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	l.lease = lease
	l.mu.Unlock()
	return true, nil
}

func (l *strictLocker) renew(ctx context.Context, _ string) (bool, error) {
	l.mu.Lock()
	lease := l.lease
	l.mu.Unlock()
	got, err := l.l.Renew(ctx, lease)
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	l.lease = got
	l.mu.Unlock()
	return true, nil
}

func (l *strictLocker) release(ctx context.Context, _ string) error {
	l.mu.Lock()
	lease := l.lease
	l.mu.Unlock()
	return l.l.Release(ctx, lease)
}

// pausing freezes renewals while its gate is closed: a stop-the-world
// pause of the naive process.
type pausing struct {
	naiveLocker
	paused chan struct{} // closed when a renewal is frozen
	resume chan struct{} // closed by the test to end the pause
	once   sync.Once
}

func newPausing(l naiveLocker) *pausing {
	return &pausing{naiveLocker: l, paused: make(chan struct{}), resume: make(chan struct{})}
}

func (p *pausing) renew(ctx context.Context, owner string) (bool, error) {
	p.once.Do(func() {
		close(p.paused)
		<-p.resume
	})
	return p.naiveLocker.renew(ctx, owner)
}

// ignoreConflict turns a lost compare into "not held" (false, nil), as the
// README's lockers do.
func ignoreConflict(err error) error {
	if errors.Is(err, backends.ErrConflict) {
		return nil
	}
	return err
}

// naiveStore is the store a naive participant writes through: its own fault
// wrapper over the world's store.
func (w *world) naiveStore() *faults.Store {
	return faults.Wrap(faults.Hide(w.store, backends.CapWatch), w.clk)
}
