package kube

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/batch"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// maxRound bounds one batch's requests when no caller in it has a deadline;
// callers with deadlines end it sooner by giving up.
const maxRound = 30 * time.Second

// owner keeps this store's session in session mode: it creates the session
// Lease, writes the store's claims into it, and answers KeepAlive calls on
// them in batches, each verifying its claims with one List and renewing the
// session with one update.
type owner struct {
	s     *Store
	every time.Duration
	kick  chan struct{} // buffered; wakes the batcher when its schedule may move earlier
	ctx   context.Context
	stop  context.CancelFunc
	wg    sync.WaitGroup

	mu       sync.Mutex
	cur      *coordinationv1.Lease // the live session's newest version; nil if none; guarded by mu
	creating chan struct{}         // closed when a session create in progress ends; guarded by mu
	queue    batch.Queue[*keepReq] // guarded by mu
	// bounds is, by Lease name, the latest start plus TTL of every write
	// and KeepAlive call of this store on a claim that may be in its
	// session, set before its request is sent: no holder in this process
	// has a deadline past it. Once it passes, the next batch clears the
	// claim if it is still in the session, and drops the bound. guarded by
	// mu.
	bounds   map[string]time.Time
	created  []string  // names of the sessions this store created; guarded by mu
	busy     bool      // a batch runs; guarded by mu
	failedAt time.Time // when a batch last failed to list or clear; guarded by mu
}

// keepReq is one KeepAlive call waiting for a batch.
type keepReq struct {
	ctx     context.Context
	key     string
	name    string // Lease name
	session string // the session it was queued for
	rev     int64
	done    chan keepResult // buffered: the batcher never blocks on a caller that left
}

type keepResult struct {
	e   backends.Entry
	err error
	// moved reports that the store left the call's session for a new one
	// meanwhile: the caller writes the claim itself, which moves it.
	moved bool
}

func newOwner(s *Store, every time.Duration) *owner {
	ctx, cancel := context.WithCancel(context.Background())
	o := &owner{s: s, every: every, kick: make(chan struct{}, 1), ctx: ctx, stop: cancel, bounds: map[string]time.Time{}}
	o.wg.Add(1)
	go o.run()
	return o
}

// retireTimeout bounds the deletion of a store's unused sessions at Close.
const retireTimeout = 5 * time.Second

// close stops the batcher: waiting calls fail, later calls fail at once.
// Then it deletes each session this store created that no claim names any
// more, so that sessions do not pile up in the namespace; a session that
// still has claims is left as it is, and they expire one TTL after its
// last renewal. Deleting a session is always safe: an observer counts its
// disappearance as a change, and no claim is judged by it any sooner.
func (o *owner) close() {
	o.stop()
	o.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), retireTimeout)
	defer cancel()
	o.mu.Lock()
	created := o.created
	o.mu.Unlock()
	for _, name := range created {
		o.retire(ctx, name)
	}
}

// retire deletes session name if no claim names it, conditioned on the
// version this process saw last, so that a renewal it did not see keeps it.
func (o *owner) retire(ctx context.Context, name string) {
	s := o.s
	sel := labels.Set{LabelManaged: "true", LabelSession: name}.String()
	list, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: sel, Limit: 1})
	if err != nil || len(list.Items) > 0 {
		return
	}
	_, rv, _ := s.sessionSince(name)
	if rv <= 0 || rv == math.MaxInt64 {
		return // gone already, or never seen
	}
	v := strconv.FormatInt(rv, 10)
	err = s.leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &v}})
	s.log.Debug("kube: deleted an unused session", "session", name, "err", err)
}

// bound records that a holder of name in this process may act until
// until.
func (o *owner) bound(name string, until time.Time) {
	o.mu.Lock()
	_, had := o.bounds[name]
	if until.After(o.bounds[name]) {
		o.bounds[name] = until
	}
	o.mu.Unlock()
	if !had {
		o.wake() // the batcher may have to clear it sooner than it planned
	}
}

// wake makes the batcher recompute when its next batch is due. It never
// blocks.
func (o *owner) wake() {
	select {
	case o.kick <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// unbound forgets name's bound: this process cleared the claim.
func (o *owner) unbound(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.bounds, name)
}

// gcAt is when the earliest bound passes: a claim of the session may then
// have to be cleared.
func (o *owner) gcAt() (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var at time.Time
	for _, b := range o.bounds {
		if at.IsZero() || b.Before(at) {
			at = b
		}
	}
	return at, !at.IsZero()
}

// session returns the name of the live session for a claim of TTL ttl,
// creating one if there is none. A session this process has not seen
// renewed for ttl is left for a new one: anyone may have found it expired
// and ended it, and a claim written into it would be lost at its first
// renewal. The claims still in the old session move into the new one at
// their next KeepAlive, which then writes them.
func (o *owner) session(ctx context.Context, op, key string, ttl time.Duration) (string, error) {
	s := o.s
	for {
		o.mu.Lock()
		if o.cur != nil && s.sessionUsable(o.cur.Name, ttl) {
			name := o.cur.Name
			o.mu.Unlock()
			return name, nil
		}
		o.cur = nil
		if ch := o.creating; ch != nil {
			o.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return "", fmt.Errorf("kube: %s %q: %w", op, key, ctx.Err())
			}
		}
		ch := make(chan struct{})
		o.creating = ch
		o.mu.Unlock()

		out, err := o.create(ctx, op, key)
		o.mu.Lock()
		o.creating = nil
		close(ch)
		if err == nil {
			o.cur = out
			o.created = append(o.created, out.Name)
		}
		o.mu.Unlock()
		if err != nil {
			return "", err
		}
		s.observeSession(out.Name, out, 0)
		s.log.Debug("kube: started a session", "session", out.Name)
		return out.Name, nil
	}
}

func (o *owner) create(ctx context.Context, op, key string) (*coordinationv1.Lease, error) {
	s := o.s
	for range maxAttempts {
		name, err := newSessionName()
		if err != nil {
			return nil, err
		}
		out, err := s.leases.Create(ctx, s.sessionLease(name), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue // 128 random bits met another object: never adopt it
		}
		if err != nil {
			return nil, s.classify(op, key, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("kube: %s %q: no free session name: %w", op, key, backends.ErrUnavailable)
}

// died forgets session name, if it is the live one: the next write starts
// another.
func (o *owner) died(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur != nil && o.cur.Name == name {
		o.cur = nil
	}
}

// renewed records a renewal of the live session.
func (o *owner) renewed(l *coordinationv1.Lease) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur != nil && o.cur.Name == l.Name {
		o.cur = l
	}
}

func (o *owner) current() *coordinationv1.Lease {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cur
}

// keepAlive serves a KeepAlive call through a batch if the newest version
// this process saw of the claim is at rev, in the live session, with the
// TTL asked; ok is false otherwise, and the caller writes the claim itself
// (which moves it into the live session).
func (o *owner) keepAlive(ctx context.Context, key, name string, rev int64, ttl time.Duration, start time.Time) (e backends.Entry, ok bool, err error) {
	s := o.s
	sg, found := s.cached(name)
	if !found {
		return backends.Entry{}, false, nil
	}
	st, err := decode(key, sg.lease)
	cur := o.current()
	if err != nil || !st.present || st.entry.Revision != rev || st.entry.TTL != ttl || cur == nil || st.session != cur.Name {
		return backends.Entry{}, false, nil
	}
	o.bound(name, start.Add(ttl))
	req := &keepReq{ctx: ctx, key: key, name: name, session: cur.Name, rev: rev, done: make(chan keepResult, 1)}
	o.mu.Lock()
	wake, queued := o.queue.Add(req, batch.CallDue(ctx, start, o.every, ttl))
	o.mu.Unlock()
	if !queued {
		return backends.Entry{}, true, fmt.Errorf("kube: keepalive %q: %w", key, backends.ErrClosed)
	}
	if wake {
		o.wake()
	}
	select {
	case r := <-req.done:
		if r.moved {
			return backends.Entry{}, false, nil
		}
		return r.e, true, r.err
	case <-ctx.Done():
		return backends.Entry{}, true, fmt.Errorf("kube: keepalive %q: %w", key, ctx.Err())
	}
}

// run is the batcher's loop: at most one batch per interval, sooner when a
// call's TTL or deadline needs it; and one when a claim's bound passes, to
// clear it if nobody kept it alive.
func (o *owner) run() {
	defer o.wg.Done()
	clk := o.s.clock
	var last time.Time
	for {
		o.mu.Lock()
		n, due := o.queue.Len(), o.queue.Due()
		o.mu.Unlock()
		var wake time.Time
		set := n > 0
		if set {
			wake = last.Add(o.every)
			if due.Before(wake) {
				wake = due
			}
		}
		if gc, ok := o.gcAt(); ok {
			// Clearing is never urgent: at most one batch per interval,
			// and never in a loop on a failing server.
			gc = maxTime(gc, maxTime(last.Add(o.every), o.retryAt()))
			if !set || gc.Before(wake) {
				wake, set = gc, true
			}
		}
		var fire <-chan time.Time
		var timer interface{ Stop() bool }
		if set {
			if !wake.After(clk.Now()) {
				last = clk.Now()
				o.setBusy(true)
				o.round(o.take())
				o.setBusy(false)
				continue
			}
			t := clk.Timer(wake.Sub(clk.Now()))
			fire, timer = t.C, t
		}
		select {
		case <-o.ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			o.fail()
			return
		case <-o.kick:
			if timer != nil {
				timer.Stop()
			}
		case <-fire:
		}
	}
}

// gcRetry is how long a batch that failed waits before clearing claims
// again, unless calls need it sooner.
const gcRetry = time.Second

func (o *owner) retryAt() time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failedAt.Add(gcRetry)
}

func (o *owner) failed() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failedAt = o.s.clock.Now()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (o *owner) setBusy(b bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.busy = b
}

func (o *owner) take() []*keepReq {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.queue.Take()
}

// fail fails every waiting call; later calls fail at once.
func (o *owner) fail() {
	o.mu.Lock()
	reqs := o.queue.Stop()
	o.mu.Unlock()
	for _, r := range reqs {
		r.done <- keepResult{err: fmt.Errorf("kube: keepalive %q: %w", r.key, backends.ErrClosed)}
	}
}

// round runs one batch; reqs may be empty (a batch that only clears).
func (o *owner) round(reqs []*keepReq) {
	ctx, cancel := context.WithTimeout(o.ctx, maxRound)
	defer cancel()
	if len(reqs) == 0 {
		// Nobody waits: bound it by the shortest useful time instead.
		var gcancel context.CancelFunc
		ctx, gcancel = context.WithTimeout(ctx, 10*time.Second)
		defer gcancel()
	}
	defer batch.CancelWhenAllDone(cancel, reqs, func(r *keepReq) context.Context { return r.ctx })()
	o.serve(ctx, reqs)
}

// serve answers one batch of KeepAlive calls:
//
//  1. it lists, consistently, every claim that names the live session (the
//     server's answer, not what this process remembers);
//  2. it clears each listed claim that no holder in this process may still
//     act on (see bounds), so that a renewal never keeps a dead claim alive;
//  3. it checks each call's claim is in the list, at the caller's revision;
//  4. it renews the session with one update conditioned on the version this
//     process wrote last. That request goes out after the List was
//     answered, so after every call in the batch began: each holder's
//     deadline, counted from before its call, comes before any observer
//     can see the session unchanged for a TTL after this renewal.
func (o *owner) serve(ctx context.Context, reqs []*keepReq) {
	s := o.s
	sess := o.current()
	var mine []*keepReq
	for _, r := range reqs {
		switch {
		case sess != nil && r.session == sess.Name:
			mine = append(mine, r)
		case s.sessionDead(r.session): // ended or deleted: its claims are lost
			r.done <- keepResult{err: o.lost(r, nil)}
		default: // left for a new session: the caller moves its claim there
			r.done <- keepResult{moved: true}
		}
	}
	if sess == nil {
		o.dropPassed(nil)
		return
	}
	fail := func(err error) {
		o.failed()
		for _, r := range mine {
			r.done <- keepResult{err: s.classify("keepalive", r.key, err)}
		}
	}
	sel := labels.Set{LabelManaged: "true", LabelSession: sess.Name}.String()
	list, err := s.leases.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		fail(err)
		return
	}
	listed := make(map[string]*coordinationv1.Lease, len(list.Items))
	for i := range list.Items {
		l := &list.Items[i]
		if _, ok := s.keyOf(l); ok {
			listed[l.Name] = l
		}
	}
	asked := make(map[string]bool, len(mine))
	for _, r := range mine {
		asked[r.name] = true
	}
	now := s.clock.Now()
	for name, l := range listed {
		if asked[name] || now.Before(o.boundOf(name)) {
			continue
		}
		if err := o.evict(ctx, l); err != nil {
			fail(err)
			return
		}
		delete(listed, name)
	}
	o.dropPassed(listed)
	if len(mine) == 0 {
		return
	}
	var ok []*keepReq
	entries := map[*keepReq]backends.Entry{}
	for _, r := range mine {
		l := listed[r.name]
		if l == nil {
			r.done <- keepResult{err: o.lost(r, nil)}
			continue
		}
		sg, err := s.observe(l)
		if err != nil {
			r.done <- keepResult{err: fmt.Errorf("kube: keepalive %q: %w", r.key, err)}
			continue
		}
		v, err := s.judge(r.key, sg)
		st := v.st
		switch {
		case err != nil:
			r.done <- keepResult{err: fmt.Errorf("kube: keepalive %q: %w", r.key, err)}
		case !v.live:
			// Expired by this process's own observation, as a keep-alive
			// in per-claim mode would find it.
			r.done <- keepResult{err: o.lost(r, nil)}
		case st.session != sess.Name || st.entry.Revision != r.rev:
			r.done <- keepResult{err: o.lost(r, &st)}
		default:
			e := st.entry
			e.Remaining = e.TTL
			entries[r] = e
			ok = append(ok, r)
		}
	}
	if len(ok) == 0 {
		return
	}
	_, err = o.renew(ctx, sess)
	for _, r := range ok {
		switch {
		case err == errSessionEnded:
			r.done <- keepResult{err: o.lost(r, nil)}
		case err != nil:
			r.done <- keepResult{err: s.classify("keepalive", r.key, err)}
		default:
			r.done <- keepResult{e: entries[r]}
		}
	}
}

// dropPassed forgets the bounds that have passed of claims not in listed:
// cleared, or no longer in the session.
func (o *owner) dropPassed(listed map[string]*coordinationv1.Lease) {
	now := o.s.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for name, b := range o.bounds {
		if _, ok := listed[name]; !ok && !now.Before(b) {
			delete(o.bounds, name)
		}
	}
}

func (o *owner) boundOf(name string) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.bounds[name]
}

// evict clears a claim of the session that no holder in this process may
// act on any more, conditioned on the version listed.
func (o *owner) evict(ctx context.Context, l *coordinationv1.Lease) error {
	s := o.s
	key, _ := s.keyOf(l)
	c := l.DeepCopy()
	if err := apply(c, key, write{clear: true}, s.clock.Now()); err != nil {
		return err
	}
	out, err := s.leases.Update(ctx, c, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// Changed or gone since the List: not this batch's to clear. If
		// it is still in the session, the next batch lists it again.
		return nil
	}
	if err != nil {
		return err
	}
	_, _ = s.observe(out)
	s.log.Debug("kube: cleared a claim of the session that no holder renewed within its TTL", "key", key)
	return nil
}

// renew renews session sess once, conditioned on the version this process
// wrote last. A conflict means either the session was ended (or deleted,
// or replaced) by someone else, and then it is dead for good
// (errSessionEnded), or this process's own last renewal landed though its
// answer was lost: then the session, read back alive, is renewed again
// from the version read.
func (o *owner) renew(ctx context.Context, sess *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	s := o.s
	base := sess
	for attempt := 0; ; attempt++ {
		l := base.DeepCopy()
		t := metav1.NewMicroTime(s.clock.Now())
		l.Spec.RenewTime = &t
		bumpBeat(l) // see apply: a renewal must change the object
		out, err := s.leases.Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			o.renewed(out)
			s.observeSession(out.Name, out, 0)
			return out, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return nil, err
		}
		cur, rerr := s.leases.Get(ctx, sess.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(rerr):
			s.observeSession(sess.Name, nil, math.MaxInt64)
			o.died(sess.Name)
			return nil, errSessionEnded
		case rerr != nil:
			return nil, rerr
		}
		s.observeSession(sess.Name, cur, 0)
		if !decodeSession(cur).alive {
			o.died(sess.Name)
			return nil, errSessionEnded
		}
		if attempt > 0 {
			return nil, fmt.Errorf("renew session %s: raced twice: %w", sess.Name, backends.ErrUnavailable)
		}
		// Alive and not what this process last wrote: only its owner
		// writes a live version, so it is this process's own renewal,
		// whose answer was lost. Renew again from it.
		base = cur
	}
}

// lost is the error of a call whose claim is no longer this process's at
// its revision: st is the claim as listed, nil if it was not listed.
func (o *owner) lost(r *keepReq, st *state) error {
	ce := &backends.ConflictError{Op: "keepalive", Key: r.key, Expected: r.rev}
	if st != nil && st.present {
		ce.Current, ce.Found = st.entry, true
	}
	return fmt.Errorf("kube: %w", ce)
}
