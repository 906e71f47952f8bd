package elector

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/fsm"
	"github.com/tenure-go/tenure/lifecycle"
)

// fatalAttempts is how many attempts may fail with a fatal error with no
// answer from the backend in between (a transient error is no answer; a
// claim won or seen held is) (a renewal that ended a term, then acquisitions, spaced by the follower's
// backoff of RetryPeriod, 2×, 4×) before the Elector ends with the last
// one. At the defaults they span about 1.2 TTL: long enough for a
// permission being granted or a resource being created to catch up, short
// enough that an operator hears of a broken deployment within about a TTL.
// Fixed rather than configured: the time it spans already scales with
// RetryPeriod and TTL.
const fatalAttempts = 4

// loop is the state of the Elector's campaign goroutine; only that goroutine
// touches it.
type loop struct {
	e  *Elector
	bo *backoff.ExponentialBackOff // follower backoff after errors

	// fatals counts the attempts that failed with a fatal error since the
	// backend last answered (a claim won, a claim held); transient errors
	// between them do not reset it.
	fatals int

	// wait is how long to wait before the next attempt.
	wait time.Duration
	// hold: wait is a backoff after an error (see backOff), which a change
	// the claim watch signals does not cut short.
	hold bool
	// onWatch: the next attempt waits for the claim watch (or for it to
	// end), because the watch was open during the last attempt and signals
	// the holder's expiry; wait is then only the backstop (see
	// watchBackstopTTLs), in case a signal never comes.
	onWatch bool
	// pendingElected, when set, is the electedDone of a term whose OnElected
	// had not returned when its drain timed out: no campaign until it closes.
	pendingElected <-chan struct{}
	// pendingLease is a claim won but not led (stopping, answered too late,
	// or a panic in between): settle releases it.
	pendingLease *backends.Claim
	// panicked is the panic recovered in the last step, for settle.
	panicked *PanicError

	// prefTerm is the term whose candidates seen holds, with when each
	// was first seen at its priority (see prefer).
	prefTerm *term
	seen     map[string]sighting

	watch        <-chan struct{} // nil while not watching
	watchCancel  context.CancelFunc
	watchOff     bool      // the locker cannot watch
	watchRetryAt time.Time // no new watch before this
}

// run is the campaign goroutine: it owns the loop and, at the end, joins the
// dispatcher and closes Done.
func (e *Elector) run(ctx context.Context) {
	l := &loop{e: e, bo: e.newBackoff(e.cfg.RetryPeriod, e.cfg.TTL), watchOff: e.watcher == nil}
	for ctx.Err() == nil {
		l.safely(ctx, l.step)
	}
	for range 3 { // settling panics only if the Locker keeps panicking
		if e.machine.State() == lifecycle.Stopped {
			break
		}
		l.safely(ctx, l.shutdown)
	}
	l.stopWatch()
	if e.candDone != nil {
		close(e.settled)
		<-e.candDone // withdrawn, within Stop's bound (see withdraw)
	}
	e.disp.close()
	<-e.disp.done
	// Only now is it stopped: every callback queued, a stuck OnElected
	// included, has returned.
	e.log.Info("elector: stopped", "state", e.machine.State())
	close(e.done)
}

// safely runs f, recovering a panic for settle to clean up after.
func (l *loop) safely(ctx context.Context, f func(context.Context)) {
	defer func() {
		if r := recover(); r != nil {
			l.panicked = &PanicError{Where: "loop", Value: r, Stack: debug.Stack()}
			l.e.reportPanic(l.panicked)
		}
	}()
	f(ctx)
}

// step is one round: settle what a panic left open, wait for the turn,
// campaign, and lead if elected.
func (l *loop) step(ctx context.Context) {
	l.settle(ctx)
	if !l.waitTurn(ctx) {
		return
	}
	l.campaign(ctx)
}

// shutdown settles and stops.
func (l *loop) shutdown(ctx context.Context) {
	l.settle(ctx)
	if l.e.machine.State() != lifecycle.Stopped {
		l.e.fire(fsm.Stop)
	}
}

// settle brings the Elector to rest after a panic or at shutdown: it ends an
// open term (demote, drain, release), releases a claim won but not led, and
// leaves acquiring.
func (l *loop) settle(ctx context.Context) {
	e := l.e
	panicked := l.panicked
	l.panicked = nil
	e.mu.Lock()
	t := e.cur
	e.mu.Unlock()
	if t != nil {
		fallback := Cause{Reason: ReasonStopped}
		if panicked != nil {
			fallback = Cause{Reason: ReasonPanic, Err: panicked}
		}
		l.finishTerm(ctx, t, fallback)
	}
	if l.pendingLease != nil {
		lease := *l.pendingLease
		l.pendingLease = nil
		e.release(ctx, lease)
	}
	if e.machine.State() == lifecycle.Acquiring {
		if ctx.Err() != nil {
			e.fire(fsm.Stop)
		} else {
			e.fire(fsm.Rejected)
		}
	}
	if panicked != nil && t == nil { // finishTerm set the backoff otherwise
		l.backOff()
	}
}

// waitTurn waits until the next attempt is due: a term's OnElected has
// returned, the claim changed (watch), or the wait computed by the last
// attempt passed (when the watch does not signal expiry). A backoff after
// an error is waited out whatever the watch signals (see backOff). It
// reports false if ctx ended first.
func (l *loop) waitTurn(ctx context.Context) bool {
	if l.pendingElected != nil {
		select {
		case <-l.pendingElected:
			l.pendingElected = nil
		case <-ctx.Done():
			return false
		}
	}
	l.ensureWatch(ctx)
	wait, onWatch, hold := l.wait, l.onWatch && l.watch != nil, l.hold
	l.wait, l.onWatch, l.hold = 0, false, false
	if hold && wait > 0 {
		return l.holdBackoff(ctx, wait)
	}
	if onWatch {
		backstop := l.e.clock.Timer(wait)
		defer backstop.Stop()
		select {
		case <-ctx.Done():
			return false
		case _, ok := <-l.watch:
			if !ok {
				l.watchEnded()
			}
		case <-backstop.C:
			l.e.log.Debug("elector: the watch signalled no expiry in time; trying anyway", "waited", wait.String())
		}
		return true
	}
	if wait <= 0 {
		select { // the attempt is now; a pending signal is already answered by it
		case _, ok := <-l.watch:
			if !ok {
				l.watchEnded()
			}
		default:
		}
		return ctx.Err() == nil
	}
	timer := l.e.clock.Timer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
	case _, ok := <-l.watch:
		if !ok {
			l.watchEnded()
		}
	}
	return true
}

// ensureWatch starts a claim watch if the locker can and none is running.
// It is called before each attempt, so a change after a failed attempt is
// never missed while a watch runs.
func (l *loop) ensureWatch(ctx context.Context) {
	e := l.e
	if l.watchOff || l.watch != nil || e.clock.Now().Before(l.watchRetryAt) {
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	ch, err := e.watcher.WatchClaim(wctx, e.cfg.Key)
	if err != nil {
		cancel()
		if errors.Is(err, backends.ErrUnsupported) {
			l.watchOff = true
		}
		l.watchRetryAt = e.clock.Now().Add(e.cfg.RetryPeriod)
		e.log.Debug("elector: no claim watch; timing attempts to expiry", "err", err)
		return
	}
	l.watch, l.watchCancel = ch, cancel
}

// watchEnded forgets a closed watch; the next one starts no sooner than
// RetryPeriod later, so a watch that keeps ending cannot spin the loop.
func (l *loop) watchEnded() {
	l.watchCancel()
	l.watch, l.watchCancel = nil, nil
	l.watchRetryAt = l.e.clock.Now().Add(l.e.cfg.RetryPeriod)
}

// stopWatch ends the watch and waits (bounded) for its channel to close, so
// that the goroutine feeding it has exited.
func (l *loop) stopWatch() {
	if l.watch == nil {
		return
	}
	l.watchCancel()
	timer := l.e.clock.Timer(l.e.cfg.ReleaseTimeout)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-l.watch:
			if ok {
				continue
			}
		case <-timer.C:
			l.e.log.Warn("elector: claim watch did not end")
		}
		l.watch = nil
		return
	}
}

// backOff sets the wait before the next attempt to the follower's next
// backoff, and holds it: the attempt after an error (or a panic, or a term
// that ended on a fatal error) waits out its backoff even if the claim
// watch signals meanwhile. A signal then is most often another holder's
// write, or this Elector's own attempt, and waking on it would turn the
// backoff into a spin against a failing backend.
func (l *loop) backOff() {
	l.wait, l.hold = l.bo.NextBackOff(), true
}

// holdBackoff waits out a backoff of wait: only the end of ctx cuts it
// short. It keeps reading the claim watch, so that the watch's buffer does
// not hold a stale signal and a watch that ends is noticed, but a signal
// does not end the wait. It reports false if ctx ended first.
func (l *loop) holdBackoff(ctx context.Context, wait time.Duration) bool {
	e := l.e
	timer := e.clock.Timer(wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			select { // the attempt is now; a pending signal is answered by it
			case _, ok := <-l.watch:
				if !ok {
					l.watchEnded()
				}
			default:
			}
			return true
		case _, ok := <-l.watch:
			if !ok {
				l.watchEnded() // l.watch is nil now: this case blocks for good
				continue
			}
			e.log.Debug("elector: the claim changed during a backoff; the attempt waits for the backoff", "backoff", wait.String())
		}
	}
}

// campaign makes one attempt and, if it wins, leads until the term ends.
func (l *loop) campaign(ctx context.Context) {
	e := l.e
	e.fire(fsm.Campaign)
	start := e.clock.Now()
	var lease backends.Claim
	// Stop does not cancel an attempt in flight: cancelled, it could take
	// the claim at the backend and report an error, and the claim would be
	// left to expire. Run to its answer (at most RenewTimeout, which Stop's
	// bound includes), a won claim is released by settle.
	err := e.bounded(context.WithoutCancel(ctx), e.cfg.RenewTimeout, func(ctx context.Context) (err error) {
		lease, err = e.locker.TryAcquire(ctx, e.cfg.Key, e.holder, e.cfg.TTL)
		return err
	})
	end := e.clock.Now()
	latency := end.Sub(start)
	if err != nil {
		l.rejected(ctx, err, latency)
		return
	}
	l.fatals = 0
	l.pendingLease = &lease
	deadline := start.Add(e.grantedTTL(lease) - e.cfg.SafetyMargin)
	if ctx.Err() != nil {
		return // stopping: settle releases the claim
	}
	if !end.Before(deadline.Add(-e.cfg.CancelLead)) { // the term would have ended
		e.log.Warn("elector: acquired too late to lead; releasing", "token", lease.Token, "took", latency.String())
		l.pendingLease = nil
		e.release(ctx, lease)
		e.fire(fsm.Rejected)
		if h := e.cfg.Trace.ElectionLost; h != nil {
			e.hook("ElectionLost", func() { h(backends.ClassTransient, latency) })
		}
		l.backOff()
		return
	}

	lctx, lcancel := context.WithCancelCause(ctx)
	t := &term{
		pub: Term{
			Key: lease.Key, Slot: lease.Slot, Holder: e.holder, Token: lease.Token,
			AcquiredAt: start, Deadline: deadline,
		},
		lease:       lease,
		sent:        start,
		cancel:      lcancel,
		electedDone: make(chan struct{}),
	}
	t.ctx = leaderCtx{Context: lctx, e: e, t: t}
	e.mu.Lock()
	if e.stopping || ctx.Err() != nil {
		e.mu.Unlock() // Stop came in between: settle releases the claim
		lcancel(Cause{Reason: ReasonStopped})
		return
	}
	e.cur = t
	tr := e.fireLocked(fsm.Acquired)
	ld := Leader{Holder: e.holder, Token: lease.Token, Slot: lease.Slot}
	changed := e.sawLeaderLocked(ld)
	pub := t.pub
	e.disp.push(func() { l.deliverElected(t, pub) })
	e.mu.Unlock()
	l.pendingLease = nil
	// The timer ends the term CancelLead before the deadline, so that the
	// leader's context is done before the deadline even if the timer runs
	// late; the context's Err and IsLeader read the clock and do not wait
	// for it.
	t.timer = e.clock.AfterFunc(deadline.Add(-e.cfg.CancelLead).Sub(e.clock.Now()), func() { e.onDeadline(t) })

	e.note(tr)
	if changed {
		e.logLeader(ld)
	}
	e.log.Info("elector: elected", "token", lease.Token, "rev", lease.Revision, "state", lifecycle.Leader, "deadline", deadline, "ttl", e.grantedTTL(lease).String())
	if h := e.cfg.Trace.ElectionWon; h != nil {
		e.hook("ElectionWon", func() { h(pub, latency) })
	}
	l.bo.Reset()

	l.lead(ctx, t)
	l.finishTerm(ctx, t, Cause{Reason: ReasonStopped})
}

// deliverElected runs on the dispatcher: OnElected, unless the term ended
// before its turn came, in which case neither it nor OnDemoted is called.
func (l *loop) deliverElected(t *term, pub Term) {
	defer close(t.electedDone)
	if t.ctx.Err() != nil {
		return
	}
	t.electedRan = true
	if cb := l.e.cfg.OnElected; cb != nil {
		l.e.callback("OnElected", func() { cb(t.ctx, pub) })
	}
}

// rejected handles an attempt that failed after latency and sets the wait
// before the next one.
func (l *loop) rejected(ctx context.Context, err error, latency time.Duration) {
	e := l.e
	var held *backends.HeldError
	if ctx.Err() != nil { // stopping; settle leaves acquiring
		if !errors.As(err, &held) && backends.Classify(err) != backends.ClassLost {
			l.releaseUnknown(ctx, err)
		}
		return
	}
	e.fire(fsm.Rejected)
	var reserved *backends.ReservedError
	if errors.As(err, &reserved) {
		l.fatals = 0
		if h := e.cfg.Trace.ElectionLost; h != nil {
			e.hook("ElectionLost", func() { h(backends.ClassLost, latency) })
		}
		l.bo.Reset()
		// Nothing is this Elector's to take until the reservation ends:
		// its target's take (and, on a store without transactions, the
		// target's release), or its expiry. It waits for the watch to
		// signal a change, or for the expiry: a follower that waited out
		// the whole reservation would not see its target's term start,
		// nor answer at once when that term ends. An attempt answered
		// by a reservation it knows of is one read and no write (see
		// backends.StoreLocker.TryAcquire), so waking on the others'
		// attempts wakes no one in turn.
		l.wait = l.expiryWait([]backends.Claim{{Remaining: reserved.Remaining}})
		e.log.Debug("elector: claim reserved for another candidate", "err", err, "retry_in", l.wait.String())
		return
	}
	if errors.As(err, &held) {
		l.fatals = 0
		if h := e.cfg.Trace.ElectionLost; h != nil {
			e.hook("ElectionLost", func() { h(backends.ClassLost, latency) })
		}
		for _, h := range held.Holders {
			if h.Holder == e.holder {
				// An earlier attempt timed out yet took the claim. Its
				// deadline is unknown, so it cannot be led: give it back.
				e.log.Warn("elector: releasing a claim taken by a timed-out attempt", "token", h.Token, "rev", h.Revision)
				e.release(ctx, h)
				l.backOff()
				return
			}
		}
		l.bo.Reset()
		e.sawHolders(held.Holders)
		if e.expiryWatch && l.watch != nil {
			// The watch was open before this attempt, so it will signal
			// the release or expiry of the claim seen held: no request
			// while the holder renews, only a backstop far past the
			// expiry observed, so that a signal the watch failed to
			// deliver costs a late attempt, never a follower that waits
			// for good.
			l.onWatch = true
			l.wait = l.expiryWait(held.Holders) + l.e.jitterAround(watchBackstopTTLs*l.e.cfg.TTL)
			e.log.Debug("elector: claim held; waiting for the watch", "err", err)
			return
		}
		l.wait = l.followWait(held.Holders)
		e.log.Debug("elector: claim held", "err", err, "retry_in", l.wait.String())
		return
	}
	class := backends.Classify(err)
	if h := e.cfg.Trace.ElectionLost; h != nil {
		e.hook("ElectionLost", func() { h(class, latency) })
	}
	if errors.Is(err, backends.ErrUsage) {
		// The backend answered, plainly: this claim cannot be taken on
		// this key, now or later. Retrying would only delay the report.
		e.log.Error("elector: the store refused the claim as a usage error; stopping", "err", err)
		e.end(fmt.Errorf("elector: campaign %q: %w", e.cfg.Key, err))
		return
	}
	if class == backends.ClassFatal {
		l.fatal(err)
		return
	}
	l.backOff()
	e.log.Warn("elector: acquire failed", "class", class.String(), "err", err, "retry_in", l.wait.String())
}

// fatal counts an attempt that failed with a fatal error, the Elector
// being a follower: it sets the backoff before the next attempt, or, at
// the fatalAttempts-th since the backend last answered, ends the Elector
// with err.
func (l *loop) fatal(err error) {
	e := l.e
	l.fatals++
	if l.fatals >= fatalAttempts {
		e.log.Error("elector: giving up after fatal errors", "attempts", l.fatals, "err", err)
		e.end(fmt.Errorf("elector: campaign %q: %d attempts failed with a fatal error, with no answer from the backend in between: %w", e.cfg.Key, l.fatals, err))
		return
	}
	l.backOff()
	e.log.Error("elector: fatal error; retrying with backoff", "attempt", l.fatals, "of", fatalAttempts, "err", err, "retry_in", l.wait.String())
}

// releaseUnknown runs when an attempt failed without a definite answer
// while the Elector stops: the backend may have granted the claim. It looks
// for a claim of this Elector's holder and releases it, the read and the
// release together within one ReleaseTimeout (the release share of Stop's
// bound), so that a stopping Elector leaves nothing to expire.
func (l *loop) releaseUnknown(ctx context.Context, cause error) {
	e := l.e
	err := e.bounded(context.WithoutCancel(ctx), e.cfg.ReleaseTimeout, func(ctx context.Context) error {
		holders, err := e.locker.Holders(ctx, e.cfg.Key)
		if err != nil {
			return fmt.Errorf("read the claim: %w", err)
		}
		for _, h := range holders {
			if h.Holder == e.holder {
				e.log.Info("elector: releasing a claim taken by an attempt whose answer was lost", "token", h.Token, "rev", h.Revision)
				return e.releaseCall(ctx, h)
			}
		}
		return nil
	})
	if err != nil {
		e.log.Warn("elector: an attempt's outcome is unknown and its claim could not be released; a claim taken will expire", "attempt_err", cause, "err", err)
	}
}

// watchBackstopTTLs is how many TTLs past the observed expiry a follower
// waiting on a watch that signals expiry tries anyway. While the holder
// renews, that costs each follower one attempt per ten TTLs or so, a few
// per cent of the holder's own renewals; a watch that misses a signal
// (a stalled stream, a bug) delays a takeover by that much at most.
const watchBackstopTTLs = 10

// followWait is the wait of a follower that saw holders and has no watch
// that signals their expiry: expiryWait, but on a store that judges expiry
// by local observation at most RenewPeriod (jittered only downward). There
// a claim expires for this process a TTL after this process first saw the
// holder's last renewal, and a renewal is seen only by a read: a follower
// that read once per Remaining, which is a whole TTL after each sighting of
// a new renewal, could first see the last one up to a TTL after it was
// made, and take a crashed holder's claim up to two TTLs after its last
// renewal. Reading at least as often as the holder renews, it sees the last
// renewal within one renew period of it, and takes the claim within TTL +
// RenewPeriod. The store still judges the expiry, on its own clock, from
// its own sightings: reading more often moves no sighting earlier.
func (l *loop) followWait(holders []backends.Claim) time.Duration {
	wait := l.expiryWait(holders)
	if !l.e.observed {
		return wait
	}
	return min(wait, l.e.jitterDown(l.e.cfg.RenewPeriod))
}

// expiryWait times the next attempt to the earliest observed expiry, plus a
// little jitter so followers do not arrive together; RetryPeriod when no
// holder's remaining time is known.
func (l *loop) expiryWait(holders []backends.Claim) time.Duration {
	least := time.Duration(-1)
	for _, h := range holders {
		if h.Remaining > 0 && (least < 0 || h.Remaining < least) {
			least = h.Remaining
		}
	}
	if least < 0 {
		return l.e.jitterAround(l.e.cfg.RetryPeriod)
	}
	spread := min(time.Duration(l.e.cfg.Jitter*float64(l.e.cfg.RetryPeriod)), 10*time.Millisecond)
	return least + time.Millisecond + time.Duration(rand.Int64N(int64(spread)+1))
}

// lead renews t until its leadership ends. Each renewal goes out at
// renewAt: at the latest RenewPeriod after the send time of the request the
// current deadline counts from, not after its answer, so that the answer to
// a renewal sent at the latest moment, taking up to RenewTimeout, is due
// before the deadline (the rule Config.Validate checks).
func (l *loop) lead(ctx context.Context, t *term) {
	for {
		wait := l.e.renewAt(t.sent).Sub(l.e.clock.Now())
		timer := l.e.clock.Timer(wait)
		select {
		case <-t.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		if !l.renew(ctx, t) {
			return
		}
		if e := l.e; e.cands != nil && !l.prefer(t) {
			return
		}
	}
}

// renew extends t's lease, retrying transient errors with backoff until the
// deadline. It reports whether t still leads.
func (l *loop) renew(ctx context.Context, t *term) bool {
	e := l.e
	bo := e.newBackoff(e.cfg.RetryPeriod, e.cfg.TTL)
	for {
		start := e.clock.Now()
		var got backends.Claim
		err := e.bounded(t.ctx, e.cfg.RenewTimeout, func(ctx context.Context) (err error) {
			got, err = e.locker.Renew(ctx, t.lease)
			return err
		})
		end := e.clock.Now()
		latency := end.Sub(start)
		if err == nil && (got.Token != t.lease.Token || got.Holder != e.holder) {
			err = &backends.ClassError{Class: backends.ClassLost, Err: backends.ErrNotHolder}
		}
		if err == nil {
			return l.extend(t, got, start, end)
		}

		class := backends.Classify(err)
		if h := e.cfg.Trace.RenewFailed; h != nil {
			e.mu.Lock()
			pub := t.pub
			e.mu.Unlock()
			e.hook("RenewFailed", func() { h(pub, class, latency, pub.Deadline.Sub(end)) })
		}
		if t.ctx.Err() != nil {
			return false // ended while the request was out
		}
		switch class {
		case backends.ClassLost:
			e.demote(t, Cause{Reason: ReasonLost, Err: err})
			return false
		case backends.ClassFatal:
			e.log.Error("elector: renew failed with a fatal error", "token", t.lease.Token, "rev", t.lease.Revision, "err", err)
			e.demote(t, Cause{Reason: ReasonFatal, Err: err})
			return false
		}
		e.mu.Lock()
		left := e.endLocked(t).Sub(end)
		t.lastErr = err
		e.mu.Unlock()
		// Halve the time left at most, so attempts continue up to the
		// deadline, but not below a floor, so they do not spin.
		wait := max(min(bo.NextBackOff(), left/2), min(e.cfg.RetryPeriod/4, 50*time.Millisecond))
		e.log.Warn("elector: renew failed; retrying until the deadline", "token", t.lease.Token, "class", class.String(), "err", err, "left", left.String(), "retry_in", wait.String())
		timer := e.clock.Timer(wait)
		select {
		case <-t.ctx.Done():
			timer.Stop()
			return false
		case <-timer.C:
		}
	}
}

// extend applies a successful renewal sent at start and answered at end:
// the deadline moves to start + TTL - SafetyMargin, but only if the answer
// came before the term's end (CancelLead before the current deadline) and
// the term was not demoted meanwhile. An answer that comes later does not
// revive the term.
func (l *loop) extend(t *term, got backends.Claim, start, end time.Time) bool {
	e := l.e
	e.mu.Lock()
	ok := e.cur == t && !t.demoted && !t.expired && end.Before(e.endLocked(t))
	var pub Term
	var ends time.Time
	var tr transition
	var demoted bool
	if ok {
		t.pub.Deadline = start.Add(e.grantedTTL(got) - e.cfg.SafetyMargin)
		t.lastErr = nil
		pub, ends = t.pub, e.endLocked(t)
	} else {
		if !end.Before(e.endLocked(t)) {
			t.expired = true
		}
		tr, demoted = e.demoteLocked(t, Cause{Reason: ReasonExpired, Err: ErrLateAnswer})
	}
	e.mu.Unlock()
	if !ok {
		if demoted {
			e.afterDemote(t, tr)
		}
		return false
	}
	t.lease, t.sent = got, start
	t.timer.Reset(ends.Sub(e.clock.Now()))
	latency, left := end.Sub(start), pub.Deadline.Sub(end)
	e.log.Debug("elector: renewed", "token", got.Token, "rev", got.Revision, "latency", latency.String(), "left", left.String())
	if h := e.cfg.Trace.Renewed; h != nil {
		e.hook("Renewed", func() { h(pub, latency, left) })
	}
	return true
}

// finishTerm ends t: demote it (if nothing has yet), wait for OnElected to
// return (at most DrainTimeout), release the claim only if it did, queue
// OnDemoted, and go back to follower (or to stopped when ctx is done).
func (l *loop) finishTerm(ctx context.Context, t *term, fallback Cause) {
	e := l.e
	e.demote(t, fallback)
	if t.timer != nil {
		t.timer.Stop()
	}
	drained := e.cfg.OnElected == nil || l.drain(t)
	e.mu.Lock()
	cause, req := t.cause, t.transfer
	e.mu.Unlock()
	var transferErr error
	switch {
	case !drained:
		e.log.Warn("elector: OnElected did not return within the drain timeout; leaving the claim to expire", "token", t.lease.Token, "drain_timeout", e.cfg.DrainTimeout.String())
		l.pendingElected = t.electedDone
		if req != nil {
			transferErr = fmt.Errorf("elector: transfer %q to %q: %w; the claim is left to expire", e.cfg.Key, req.to, ErrNotDrained)
		}
	case cause.Reason == ReasonLost:
		// someone else holds it: nothing to release
	case req != nil:
		transferErr = l.handOver(ctx, t, req)
	case cause.Reason == ReasonStopped && e.cands != nil:
		l.releaseToPreferred(ctx, t)
	default:
		e.release(ctx, t.lease)
	}

	e.mu.Lock()
	if req != nil {
		t.cause.Err = transferErr
		cause = t.cause
	}
	e.cur = nil
	e.kickCandidacy()
	final := t.pub
	if cb := e.cfg.OnDemoted; cb != nil {
		e.disp.push(func() {
			if t.electedRan {
				e.callback("OnDemoted", func() { cb(final, cause) })
			}
		})
	}
	ev := fsm.Demoted
	if e.stopping || ctx.Err() != nil {
		ev = fsm.Stop
	}
	tr := e.fireLocked(ev)
	e.mu.Unlock()
	e.note(tr)

	switch cause.Reason {
	case ReasonFatal:
		if ev == fsm.Demoted {
			l.fatal(cause.Err)
		}
	case ReasonPanic:
		l.backOff()
	case ReasonTransferred:
		if transferErr == nil {
			// The claim is the target's for the bound: campaigning
			// before it ends could only get in the target's way.
			l.wait, l.hold = e.cfg.TransferBound, true
		} else {
			// Asked to hand over, it does not race the followers back
			// for a claim it may have released: it backs off first.
			l.backOff()
		}
	default:
		l.wait = 0
	}
	if req != nil {
		select {
		case req.done <- transferErr:
		default: // sent already by a finishTerm a panic cut short
		}
	}
}

// drain waits up to DrainTimeout for t's OnElected to return.
func (l *loop) drain(t *term) bool {
	select {
	case <-t.electedDone:
		return true
	default:
	}
	timer := l.e.clock.Timer(l.e.cfg.DrainTimeout)
	defer timer.Stop()
	select {
	case <-t.electedDone:
		return true
	case <-timer.C:
		return false
	}
}
