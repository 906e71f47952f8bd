package elector

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"runtime/debug"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/cenkalti/backoff/v4"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/fsm"
	"github.com/tenure-go/tenure/lifecycle"
)

var (
	// ErrAlreadyStarted is returned when Start (or Run) is called on an
	// Elector that was started before. An Elector runs once; make a new one
	// to run again.
	ErrAlreadyStarted = errors.New("elector: already started")
	// ErrStopped is returned when Start (or Run) is called after Stop, or
	// after the Elector ended on a fatal error.
	ErrStopped = errors.New("elector: stopped")
	// ErrStopTimeout is returned by Stop when it gives up waiting for the
	// Elector's goroutines.
	ErrStopTimeout = errors.New("elector: stop timed out")
)

// Elector campaigns for one claim over a backends.Locker and, while it holds
// the claim, renews it and runs the leader's work.
//
// Lifecycle and reuse: New returns an Elector in state follower. Start (or
// Run) starts it once; a second Start, or a Start after Stop, returns an
// error. Stop, or cancelling the context given to Start, ends it for good:
// the state becomes stopped and Done is closed once its goroutines and
// callbacks have finished. An Elector also ends on its own, as if stopped,
// when the backend keeps failing with fatal errors (see the package
// documentation); Err then reports why. To campaign again, make a new
// Elector. The query methods (IsLeader, Term, Leader, State, Done, Err) are
// safe to call from any goroutine at any time, including from callbacks.
type Elector struct {
	locker backends.Locker
	cands  backends.Candidacies // nil unless Config.Candidacy
	// candDone is closed when the candidacy goroutine has exited; nil
	// without Candidacy.
	candDone chan struct{}
	candKick chan struct{} // buffered; see kickCandidacy
	// settled is closed when the campaign goroutine has given up its
	// claim at the end (released or handed over, or found nothing to give
	// up); the candidacy is withdrawn after it. Nil without Candidacy.
	settled chan struct{}
	watcher backends.ClaimWatcher // nil when the locker cannot watch
	// expiryWatch: the watcher also signals expiry, so a follower whose
	// watch runs needs no timer for the holder's expiry.
	expiryWatch bool
	// observed: the Locker's store judges expiry by local observation
	// (Capabilities.ObservedExpiry), so a holder's claim expires for this
	// process only a TTL after this process first saw its last renewal
	// (see followWait).
	observed bool
	cfg      Config
	holder   backends.Holder
	phase    int64 // where the renewal grid starts, in ns (see renewAt)
	clock    clock.Clock
	log      *slog.Logger
	machine  *fsm.Machine
	disp     *dispatcher
	done     chan struct{} // closed when the loop and the dispatcher have exited

	// traceMu is held while StateChanged hooks run, so that they run one at
	// a time and in order; taken before mu, never while mu is held.
	traceMu sync.Mutex

	mu        sync.Mutex
	states    [][2]lifecycle.State    // guarded by mu; transitions not yet given to StateChanged
	started   bool                    // guarded by mu
	stopping  bool                    // guarded by mu
	cancel    context.CancelCauseFunc // guarded by mu; cancels the run context
	cur       *term                   // guarded by mu; the term led or being demoted
	leader    Leader                  // guarded by mu; last observed leader
	hasLeader bool                    // guarded by mu
	lastDup   string                  // guarded by mu; nonce of the last duplicate reported
	err       error                   // guarded by mu; why the Elector ended on its own; set once
}

// New returns an Elector for cfg.Key over locker. It fails if cfg does not
// validate (see Config.Validate). The Elector's holder is Identity plus a
// fresh nonce.
func New(locker backends.Locker, cfg Config) (*Elector, error) {
	if locker == nil {
		return nil, fmt.Errorf("elector: nil locker: %w", backends.ErrInvalid)
	}
	h, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	e := &Elector{
		locker:  locker,
		cfg:     cfg,
		holder:  h,
		clock:   cfg.Clock,
		log:     cfg.Logger.With("key", cfg.Key, "holder", h),
		machine: fsm.New(),
		disp:    newDispatcher(),
		done:    make(chan struct{}),
	}
	if g := e.gridStep(); g > 0 {
		e.phase = int64(gridPhase(locker) % uint64(g))
	}
	if cfg.Candidacy {
		cands, ok := locker.(backends.Candidacies)
		if _, tok := locker.(backends.Transferer); !ok || !tok {
			return nil, fmt.Errorf("elector: candidacy %q: the locker keeps no candidacies or cannot transfer: %w", cfg.Key, backends.ErrUnsupported)
		}
		e.cands = cands
		e.candDone = make(chan struct{})
		e.candKick = make(chan struct{}, 1)
		e.settled = make(chan struct{})
	}
	if w, ok := locker.(backends.ClaimWatcher); ok {
		e.watcher = w
		e.expiryWatch = w.ExpiryEvents()
	}
	if so, ok := locker.(storeOf); ok {
		if s := so.Store(); s != nil {
			e.observed = s.Capabilities().ObservedExpiry
		}
	}
	return e, nil
}

// Start starts campaigning in the background and returns. Cancelling ctx
// has the effect of Stop (without waiting). Start returns ErrAlreadyStarted
// if the Elector was started before and ErrStopped if it
// was stopped. If the Elector ends on its own on a fatal error, Done is
// closed and Err returns the error.
func (e *Elector) Start(ctx context.Context) error {
	e.mu.Lock()
	switch {
	case e.stopping:
		e.mu.Unlock()
		return ErrStopped
	case e.started:
		e.mu.Unlock()
		return ErrAlreadyStarted
	}
	e.started = true
	runCtx, cancel := context.WithCancelCause(ctx)
	e.cancel = cancel
	e.mu.Unlock()

	e.log.Info("elector: started", "state", e.machine.State())
	go e.disp.run()
	if e.cands != nil {
		go e.candidacy(runCtx)
	}
	go e.run(runCtx)
	return nil
}

// Stop ends the Elector. If it leads, IsLeader turns false at once, the
// leader's context is cancelled, and once OnElected has returned the claim
// is released, so a follower elsewhere can take over at once. Stop waits
// until the Elector's goroutines and queued callbacks have finished (Done is
// closed), but no longer than ctx allows nor than RenewTimeout +
// DrainTimeout + ReleaseTimeout; then it returns an error (wrapping
// ErrStopTimeout, or ctx's cause) and the Elector finishes in the
// background. Stop may be called more than once and before Start.
func (e *Elector) Stop(ctx context.Context) error {
	e.mu.Lock()
	if !e.started {
		var tr transition
		if !e.stopping {
			e.stopping = true
			tr = e.fireLocked(fsm.Stop) // follower -> stopped: cannot fail
			close(e.done)
		}
		e.mu.Unlock()
		e.note(tr)
		return nil
	}
	e.stopping = true
	cancel, t := e.cancel, e.cur
	cause := Cause{Reason: ReasonStopped}
	tr, demoted := e.demoteLocked(t, cause)
	e.mu.Unlock()
	cancel(cause)
	if demoted {
		e.afterDemote(t, tr)
	}
	return e.wait(ctx)
}

func (e *Elector) wait(ctx context.Context) error {
	select {
	case <-e.done:
		return nil
	default:
	}
	bound := e.cfg.RenewTimeout + e.cfg.DrainTimeout + e.cfg.ReleaseTimeout
	timer := e.clock.Timer(bound)
	defer timer.Stop()
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("elector: stop: %w", context.Cause(ctx))
	case <-timer.C:
		return fmt.Errorf("%w: not done after %v", ErrStopTimeout, bound)
	}
}

// Run starts the Elector and blocks until ctx is cancelled (or Stop is
// called elsewhere), then stops it as Stop does, or until the Elector ends
// on its own on a fatal error. It returns nil after a clean stop, the error
// of Start, the error of the bounded Stop, or the fatal error (see Err).
func (e *Elector) Run(ctx context.Context) error {
	if err := e.Start(ctx); err != nil {
		return err
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		if err := e.Stop(context.WithoutCancel(ctx)); err != nil {
			return err
		}
	}
	return e.Err()
}

// Err returns nil while the Elector runs and after Stop. Once the Elector
// has ended on its own because the backend kept failing with fatal errors,
// or refused the claim as a usage error (backends.ErrUsage), as the
// package documentation describes, it returns that error, wrapping the
// backend's last one and naming the key; it is set before Done is closed.
func (e *Elector) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// end stops the Elector on its own, with err for Err and Run: the loop
// winds down as after Stop. Called by the loop while it is a follower.
func (e *Elector) end(err error) {
	e.mu.Lock()
	if e.err == nil && !e.stopping {
		e.err = err
	}
	e.stopping = true
	cancel := e.cancel
	e.mu.Unlock()
	cancel(err)
}

// IsLeader reports whether this Elector leads now: its state is leader and
// the term has not reached its end, CancelLead before the local deadline.
// It is computed at the call from the clock, whatever the Elector's
// goroutines are doing, and once it has returned false it never returns
// true again for the same term.
func (e *Elector) IsLeader() bool {
	now := e.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leadingLocked(now)
}

// leadingLocked is IsLeader's test; e.mu held. It records an observed expiry
// so that a renewal answered after it cannot revive the term.
func (e *Elector) leadingLocked(now time.Time) bool {
	t := e.cur
	if t == nil || t.demoted || t.expired || e.machine.State() != lifecycle.Leader {
		return false
	}
	if !now.Before(e.endLocked(t)) {
		t.expired = true
		return false
	}
	return true
}

// endLocked is when t ends: CancelLead before its local deadline; e.mu held.
func (e *Elector) endLocked(t *term) time.Time {
	return t.pub.Deadline.Add(-e.cfg.CancelLead)
}

// endIfDue ends t now if the clock has reached its end and the timer that
// ends it has not run yet (a starved process), so that the leader's
// context, asked, never reports a term past its end as live.
func (e *Elector) endIfDue(t *term) {
	now := e.clock.Now()
	e.mu.Lock()
	due := e.cur == t && !t.demoted && !now.Before(e.endLocked(t))
	e.mu.Unlock()
	if due {
		e.onDeadline(t)
	}
}

// Term returns the current term, with the current deadline, and true while
// IsLeader would return true.
func (e *Elector) Term() (Term, bool) {
	now := e.clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.leadingLocked(now) {
		return Term{}, false
	}
	return e.cur.pub, true
}

// Leader returns the last leader this Elector observed (itself included) and
// whether it has observed one. It is a hint: the claim may have changed
// hands since.
func (e *Elector) Leader() (Leader, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leader, e.hasLeader
}

// State returns the lifecycle state.
func (e *Elector) State() lifecycle.State { return e.machine.State() }

// Holder returns this Elector's holder: Identity and its nonce.
func (e *Elector) Holder() backends.Holder { return e.holder }

// Done is closed when the Elector has finished, stopped or ended on its own
// (see Err): its loop has exited and every queued callback has returned.
func (e *Elector) Done() <-chan struct{} { return e.done }

// transition is a Fire's outcome, noted (logged, traced) after e.mu is
// released.
type transition struct {
	ev       fsm.Event
	from, to lifecycle.State
	err      error
}

// fireLocked applies ev and queues the transition for StateChanged in the
// same critical section, so that the hook sees transitions in order; e.mu
// held.
func (e *Elector) fireLocked(ev fsm.Event) transition {
	from, to, err := e.machine.Fire(ev)
	if err == nil && e.cfg.Trace.StateChanged != nil {
		e.states = append(e.states, [2]lifecycle.State{from, to})
	}
	return transition{ev: ev, from: from, to: to, err: err}
}

func (e *Elector) fire(ev fsm.Event) {
	e.mu.Lock()
	tr := e.fireLocked(ev)
	e.mu.Unlock()
	e.note(tr)
}

// note logs and traces tr; e.mu not held.
func (e *Elector) note(tr transition) {
	if tr.ev == 0 {
		return
	}
	if tr.err != nil {
		e.log.Error("elector: refused transition", "event", tr.ev.String(), "state", tr.from, "err", tr.err)
		return
	}
	e.log.Debug("elector: transition", "event", tr.ev.String(), "from", tr.from, "state", tr.to)
	e.flushStates()
}

// demoteLocked ends t's leadership if it is the current, undemoted term:
// leader -> demoting, so IsLeader is false from here on; e.mu held. The
// caller then calls afterDemote.
func (e *Elector) demoteLocked(t *term, c Cause) (transition, bool) {
	if t == nil || e.cur != t || t.demoted {
		return transition{}, false
	}
	t.demoted = true
	t.cause = c
	return e.fireLocked(fsm.Demote), true
}

// demote is demoteLocked and afterDemote.
func (e *Elector) demote(t *term, c Cause) {
	e.mu.Lock()
	tr, ok := e.demoteLocked(t, c)
	e.mu.Unlock()
	if ok {
		e.afterDemote(t, tr)
	}
}

// afterDemote cancels the leader's context and reports; e.mu not held.
func (e *Elector) afterDemote(t *term, tr transition) {
	e.mu.Lock()
	c, pub := t.cause, t.pub
	e.mu.Unlock()
	t.cancel(c)
	e.note(tr)
	level := slog.LevelWarn
	switch c.Reason {
	case ReasonStopped:
		level = slog.LevelInfo
	case ReasonFatal, ReasonPanic:
		level = slog.LevelError
	}
	e.log.Log(context.Background(), level, "elector: demoted", "token", pub.Token, "reason", c.Reason, "err", c.Err, "state", lifecycle.Demoting)
	if h := e.cfg.Trace.Demoted; h != nil {
		e.hook("Demoted", func() { h(pub, c) })
	}
}

// onDeadline ends t once it has reached its end. It runs on a clock timer
// armed for that instant, or from the leader's context when asked first.
func (e *Elector) onDeadline(t *term) {
	defer func() {
		if r := recover(); r != nil {
			e.reportPanic(&PanicError{Where: "deadline timer", Value: r, Stack: debug.Stack()})
		}
	}()
	now := e.clock.Now()
	e.mu.Lock()
	if e.cur != t || t.demoted || now.Before(e.endLocked(t)) {
		e.mu.Unlock() // over, or extended: the renewal re-armed the timer
		return
	}
	t.expired = true
	err := ErrDeadlinePassed
	if t.lastErr != nil {
		err = fmt.Errorf("%w; the last renewal failed: %w", ErrDeadlinePassed, t.lastErr)
	}
	tr, ok := e.demoteLocked(t, Cause{Reason: ReasonExpired, Err: err})
	e.mu.Unlock()
	if ok {
		e.afterDemote(t, tr)
	}
}

// callback runs a user callback on the dispatcher goroutine. A panic is
// recovered, reported, and demotes the current term if there is one.
func (e *Elector) callback(name string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			perr := &PanicError{Where: name, Value: r, Stack: debug.Stack()}
			e.reportPanic(perr)
			e.mu.Lock()
			t := e.cur
			tr, ok := e.demoteLocked(t, Cause{Reason: ReasonPanic, Err: perr})
			e.mu.Unlock()
			if ok {
				e.afterDemote(t, tr)
			}
		}
	}()
	f()
}

func (e *Elector) reportPanic(p *PanicError) {
	e.log.Error("elector: recovered panic", "where", p.Where, "panic", fmt.Sprint(p.Value), "stack", string(p.Stack))
	if h := e.cfg.Trace.Panicked; h != nil {
		e.hook("Panicked", func() { h(p.Where) })
	}
}

// sawHolders records the holders an attempt found: the observed leader
// (OnNewLeader) and a duplicate identity.
func (e *Elector) sawHolders(hs []backends.Claim) {
	if len(hs) == 0 {
		return
	}
	var dup *backends.Holder
	e.mu.Lock()
	for _, h := range hs {
		if h.Holder.ID == e.holder.ID && h.Holder.Nonce != e.holder.Nonce && h.Holder.Nonce != e.lastDup && !e.earlier(h.Holder) {
			e.lastDup = h.Holder.Nonce
			dup = &h.Holder
		}
	}
	ld := Leader{Holder: hs[0].Holder, Token: hs[0].Token, Slot: hs[0].Slot}
	changed := e.sawLeaderLocked(ld)
	e.mu.Unlock()
	if changed {
		e.logLeader(ld)
	}
	if dup != nil {
		e.log.Warn("elector: another holder with this identity holds the claim", "other", dup.String(), "token", hs[0].Token)
		if h := e.cfg.Trace.DuplicateIdentity; h != nil {
			e.hook("DuplicateIdentity", func() { h(*dup) })
		}
	}
}

// earlier reports whether h is one of Config.EarlierHolders: this
// process's own earlier Electors, whose claims may linger.
func (e *Elector) earlier(h backends.Holder) bool {
	for _, x := range e.cfg.EarlierHolders {
		if x == h {
			return true
		}
	}
	return false
}

// sawLeaderLocked queues OnNewLeader if ld differs from the last leader
// observed, and reports whether it did; e.mu held. The caller then logs the
// change (logLeader) once e.mu is released.
func (e *Elector) sawLeaderLocked(ld Leader) bool {
	if e.hasLeader && e.leader == ld {
		return false
	}
	e.leader, e.hasLeader = ld, true
	if cb := e.cfg.OnNewLeader; cb != nil {
		e.disp.push(func() { e.callback("OnNewLeader", func() { cb(ld) }) })
	}
	return true
}

// logLeader logs a change of the observed leader: one line at INFO per
// change, so that an operator reading any participant's log sees who
// leads.
func (e *Elector) logLeader(ld Leader) {
	e.log.Info("elector: new leader", "leader", ld.Holder, "token", ld.Token, "slot", ld.Slot)
}

// withTimeout is context.WithTimeout on the Elector's clock.
func (e *Elector) withTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	t := e.clock.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return timeoutCtx{Context: ctx, deadline: e.clock.Now().Add(d)}, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// bounded runs f under a withTimeout context, stopping the timer however f
// ends (a panicking Locker included).
func (e *Elector) bounded(parent context.Context, d time.Duration, f func(context.Context) error) error {
	ctx, cancel := e.withTimeout(parent, d)
	defer cancel()
	return f(ctx)
}

// timeoutCtx reports the deadline of a withTimeout context and, once it
// passed, context.DeadlineExceeded from Err.
type timeoutCtx struct {
	context.Context
	deadline time.Time
}

func (c timeoutCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c timeoutCtx) Err() error {
	err := c.Context.Err()
	if err != nil && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// jitterDown shortens d by up to Jitter of it: renewals come early, never
// late.
func (e *Elector) jitterDown(d time.Duration) time.Duration {
	return d - time.Duration(rand.Float64()*e.cfg.Jitter*float64(d))
}

// gridSeed is drawn once per process, so that the renewal grids of
// different processes have unrelated phases: it spreads their renewals as
// the jitter does, with nothing to configure.
var gridSeed = maphash.MakeSeed()

// storeOf is what a Locker implements to tell the Store it runs over
// (backends.StoreLocker, slots.Group).
type storeOf interface{ Store() backends.Store }

// gridPhase is where the renewal grid of an Elector over locker starts, as
// a hash of this process's seed and the identity of the Store behind the
// Locker (the Locker itself when it tells none, or its Store is not a
// pointer): every Elector over one Store has the same phase, whatever its
// Identity, key or Locker.
func gridPhase(locker backends.Locker) uint64 {
	var who any = locker
	if so, ok := locker.(storeOf); ok {
		if s := so.Store(); s != nil && isPointer(s) {
			who = s
		}
	}
	var h maphash.Hash
	h.SetSeed(gridSeed)
	if isPointer(who) {
		maphash.WriteComparable(&h, reflect.ValueOf(who).Pointer())
	}
	return h.Sum64()
}

// isPointer reports whether v is a pointer, whose address names the value
// for as long as it lives (Go's heap does not move).
func isPointer(v any) bool {
	return v != nil && reflect.TypeOf(v).Kind() == reflect.Pointer
}

// renewAt is when the renewal of a term whose deadline counts from a
// request sent at sent goes out: RenewPeriod after sent, jittered earlier
// by up to Jitter of it, then moved to the nearest instant of the
// Elector's renewal grid that is not later than RenewPeriod after sent.
//
// The grid has one instant every Jitter × RenewPeriod, at a phase taken
// from the Store the Locker runs over (see gridPhase), so every Elector
// over one Store with one RenewPeriod and Jitter (the many claims of one
// process, however their Electors are named) renews on the same instants,
// and a backend that shares a connection between them sends their
// renewals together instead of one at a time. Other processes have
// unrelated phases and stay apart.
//
// A renewal moved to the grid goes out at most RenewPeriod after sent, as
// the rule Config.Validate checks assumes, and never earlier than half of
// RenewPeriod after it: when the grid offers nothing in between (a Jitter
// above 0.5), the jittered time is kept. Without jitter the renewal goes
// out exactly RenewPeriod after sent.
func (e *Elector) renewAt(sent time.Time) time.Time {
	period := e.cfg.RenewPeriod
	latest := sent.Add(period)
	if e.cfg.Jitter == 0 {
		return latest
	}
	at := sent.Add(e.jitterDown(period))
	g := e.gridStep()
	if g <= 0 {
		return at
	}
	off := (at.UnixNano() - e.phase) % g
	if off < 0 {
		off += g
	}
	on := at.Add(-time.Duration(off))
	if 2*off >= g {
		on = on.Add(time.Duration(g))
	}
	earliest := sent.Add(period / 2)
	if on.After(latest) {
		on = on.Add(-time.Duration(g))
	}
	if on.Before(earliest) {
		on = on.Add(time.Duration(g))
	}
	if on.Before(earliest) || on.After(latest) {
		return at
	}
	return on
}

// gridStep is the spacing of the renewal grid in nanoseconds: Jitter ×
// RenewPeriod.
func (e *Elector) gridStep() int64 {
	return int64(e.cfg.Jitter * float64(e.cfg.RenewPeriod))
}

// jitterAround spreads d by up to Jitter either way.
func (e *Elector) jitterAround(d time.Duration) time.Duration {
	return d + time.Duration((2*rand.Float64()-1)*e.cfg.Jitter*float64(d))
}

// newBackoff returns a jittered exponential backoff on the Elector's clock
// that never gives up.
func (e *Elector) newBackoff(initial, maxInterval time.Duration) *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     initial,
		RandomizationFactor: e.cfg.Jitter,
		Multiplier:          2,
		MaxInterval:         max(initial, maxInterval),
		MaxElapsedTime:      0, // never stop: the v4 default of 15 minutes would end campaigning
		Stop:                backoff.Stop,
		Clock:               e.clock,
	}
	b.Reset()
	return b
}

// grantedTTL is the TTL a deadline may count on: the one asked for, or less
// if the backend says it granted less.
func (e *Elector) grantedTTL(l backends.Claim) time.Duration {
	if l.TTL > 0 && l.TTL < e.cfg.TTL {
		return l.TTL
	}
	return e.cfg.TTL
}

// release gives lease up, bounded by ReleaseTimeout and even while ctx is
// being cancelled. A panicking Locker is recovered: release runs while the
// loop settles a term and must not fail it.
func (e *Elector) release(ctx context.Context, lease backends.Claim) {
	err := e.bounded(context.WithoutCancel(ctx), e.cfg.ReleaseTimeout, func(ctx context.Context) error {
		return e.releaseCall(ctx, lease)
	})
	if err != nil {
		e.log.Warn("elector: release failed; the claim will expire", "token", lease.Token, "rev", lease.Revision, "err", err)
		return
	}
	e.log.Info("elector: released", "token", lease.Token, "rev", lease.Revision)
}

// releaseCall calls the Locker's Release, recovering a panic as an error.
func (e *Elector) releaseCall(ctx context.Context, lease backends.Claim) (err error) {
	defer func() {
		if r := recover(); r != nil {
			perr := &PanicError{Where: "Release", Value: r, Stack: debug.Stack()}
			e.reportPanic(perr)
			err = perr
		}
	}()
	return e.locker.Release(ctx, lease)
}
