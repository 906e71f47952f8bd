package elector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/cenkalti/backoff/v4"

	"github.com/tenure-go/tenure/backends"
)

// ClaimState is what an observer knows of a claim.
type ClaimState int

// The states of an Observation. The zero value is ClaimUnknown, so that an
// Observation nobody filled in claims nothing.
const (
	// ClaimUnknown means the last read of the claim failed: the store
	// could not be read (Observation.Err says why), so whether anyone
	// holds the claim is not known.
	ClaimUnknown ClaimState = iota
	// ClaimHeld means the claim is held: Observation.Leaders lists its
	// holders.
	ClaimHeld
	// ClaimFree means nobody holds the claim: it was never taken, was
	// released or has expired.
	ClaimFree
)

func (s ClaimState) String() string {
	switch s {
	case ClaimUnknown:
		return "unknown"
	case ClaimHeld:
		return "held"
	case ClaimFree:
		return "free"
	}
	return fmt.Sprintf("claimstate(%d)", int(s))
}

// LogValue logs s by its name.
func (s ClaimState) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Observation is what Observe delivers: the state of the claim as the
// store last answered, and its holders.
type Observation struct {
	State ClaimState
	// Leaders are the claim's holders when State is ClaimHeld, by slot:
	// one for a single claim, one per live slot for a slot group. Each
	// carries its holder (with the value it advertises), token and slot.
	Leaders []Leader
	// Err is why the store could not be read when State is ClaimUnknown.
	Err error
}

// Leader returns the first of o.Leaders (the only one of a single claim)
// and true when the claim is held.
func (o Observation) Leader() (Leader, bool) {
	if o.State != ClaimHeld || len(o.Leaders) == 0 {
		return Leader{}, false
	}
	return o.Leaders[0], true
}

// same reports whether o and p say the same of the claim: the same state
// and the same holders. The error of an unknown state is not compared.
func (o Observation) same(p Observation) bool {
	return o.State == p.State && slices.Equal(o.Leaders, p.Leaders)
}

// ObserverConfig configures Observe. Zero durations take the defaults
// documented on each field; negative ones are errors.
type ObserverConfig struct {
	// Key is the claim key to follow: a single claim, or a slot group's
	// key. Required; any key backends.ValidateKey accepts.
	Key string

	// RetryPeriod paces the reads when the store gives nothing better to
	// time them by, as the follower's Config.RetryPeriod does: the wait
	// between reads of a free claim on a store that cannot watch, and the
	// base of the backoff after a failed read, which doubles up to six
	// times RetryPeriod. Default DefaultTTL/6 (2.5s), the follower's
	// default.
	RetryPeriod time.Duration

	// ReadTimeout bounds each read of the claim. Default RetryPeriod.
	ReadTimeout time.Duration

	// Jitter is the fraction by which every wait is randomised: 0 <= Jitter
	// < 1. Zero means 0.15, unless DisableJitter is set.
	Jitter float64

	// DisableJitter turns jitter off, for tests that step a fake clock
	// exactly. Jitter must then be left zero.
	DisableJitter bool

	// Clock is the source of all time. Default clock.New(), the real clock.
	Clock clock.Clock

	// Logger receives a line per change observed and per failed read, with
	// the key key. Default: nil, which logs nothing.
	Logger *slog.Logger
}

// observerBackoffCap is how many RetryPeriods the backoff after failed
// reads grows to: six, the TTL of the elector's defaults.
const observerBackoffCap = 6

// observerFreeConfirm is how many RetryPeriods apart a free claim is read
// again while the watch runs (which signals its taking): only to notice
// that the store can no longer be read.
const observerFreeConfirm = 6

func (c ObserverConfig) withDefaults() ObserverConfig {
	if c.RetryPeriod == 0 {
		c.RetryPeriod = DefaultTTL / 6
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = c.RetryPeriod
	}
	if c.Jitter == 0 && !c.DisableJitter {
		c.Jitter = defaultJitter
	}
	if c.Clock == nil {
		c.Clock = clock.New()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every rule c breaks once defaults are applied, joined
// under one "elector: observer config: " prefix; nil if c is usable. Key
// passes backends.ValidateKey; no duration is negative; 0 <= Jitter < 1,
// and Jitter is zero when DisableJitter is set.
func (c ObserverConfig) Validate() error {
	c = c.withDefaults()
	var errs []error
	if err := backends.ValidateKey(c.Key); err != nil {
		errs = append(errs, fmt.Errorf("key: %w", err))
	}
	if c.RetryPeriod < 0 {
		errs = append(errs, fmt.Errorf("retry period %v is negative", c.RetryPeriod))
	}
	if c.ReadTimeout < 0 {
		errs = append(errs, fmt.Errorf("read timeout %v is negative", c.ReadTimeout))
	}
	switch {
	case c.Jitter < 0 || c.Jitter >= 1:
		errs = append(errs, fmt.Errorf("jitter %v must be in [0, 1)", c.Jitter))
	case c.DisableJitter && c.Jitter != 0:
		errs = append(errs, fmt.Errorf("jitter %v set with DisableJitter", c.Jitter))
	}
	if len(errs) > 0 {
		return fmt.Errorf("elector: observer config: %w", errors.Join(errs...))
	}
	return nil
}

// Observe follows the claim cfg.Key over locker without campaigning for
// it, for a process that wants to know who leads (to route requests to
// the leader's advertised address, say) but never leads itself. It returns
// a channel that delivers the state of the claim: first as the first read
// finds it, then at every change: a new holder (or token), the claim
// released or expired (ClaimFree), and the store failing to answer
// (ClaimUnknown) and answering again.
//
// What it promises:
//
//   - It never reports a holder the store has not reported, and never
//     keeps reporting one past the expiry the store last reported for its
//     claim: it reads the claim again then, and reports what that read
//     finds, or ClaimUnknown if the read fails. Expiry is judged as the
//     elector judges it, by the store's own rules (see each store's
//     Capabilities.ObservedExpiry) and this process's clock.
//   - Where the locker watches the claim (backends.ClaimWatcher), a write
//     or release is delivered after one read once the watch signals it;
//     elsewhere the reads are timed as a follower's attempts are: to the
//     expiry the store reported, or RetryPeriod apart when the claim is
//     free. A read that fails is followed by a backoff from RetryPeriod.
//   - Observations are delivered in the order they were made and never
//     block the observer: a consumer that does not keep up receives the
//     latest state when it next reads, never one already superseded, and
//     never the same state twice in a row.
//   - When ctx is done the observer stops, its watch ends, and the channel
//     is closed.
//
// What it does not promise: that the claim has not changed hands since the
// observation was made. An observation is a hint for routing, never a
// licence to act: a holder's own Elector (IsLeader, its Term's token) is
// the only authority on its leadership, and downstream writes are fenced
// by the token.
//
// Observe returns an error, and starts nothing, if locker is nil or cfg
// does not validate.
func Observe(ctx context.Context, locker backends.Locker, cfg ObserverConfig) (<-chan Observation, error) {
	if locker == nil {
		return nil, fmt.Errorf("elector: observe: nil locker: %w", backends.ErrInvalid)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	o := &observer{
		locker: locker,
		cfg:    cfg,
		clock:  cfg.Clock,
		log:    cfg.Logger.With("key", cfg.Key),
		out:    make(chan Observation),
	}
	o.bo = &backoff.ExponentialBackOff{
		InitialInterval:     cfg.RetryPeriod,
		RandomizationFactor: cfg.Jitter,
		Multiplier:          2,
		MaxInterval:         observerBackoffCap * cfg.RetryPeriod,
		MaxElapsedTime:      0, // never give up
		Stop:                backoff.Stop,
		Clock:               cfg.Clock,
	}
	o.bo.Reset()
	if w, ok := locker.(backends.ClaimWatcher); ok {
		o.watcher = w
		o.expiryWatch = w.ExpiryEvents()
	} else {
		o.watchOff = true
	}
	if so, ok := locker.(storeOf); ok {
		if s := so.Store(); s != nil {
			o.observed = s.Capabilities().ObservedExpiry
		}
	}
	go o.run(ctx)
	return o.out, nil
}

// observer is the state of one Observe goroutine; only it touches it.
type observer struct {
	locker  backends.Locker
	watcher backends.ClaimWatcher
	cfg     ObserverConfig
	clock   clock.Clock
	log     *slog.Logger
	out     chan Observation
	bo      *backoff.ExponentialBackOff
	// expiryWatch: the watch signals expiry too. observed: the store
	// judges expiry by local observation (Capabilities.ObservedExpiry).
	expiryWatch, observed bool

	delivered *Observation // the last observation the consumer received
	pending   *Observation // made, not yet received; nil if none

	next time.Time // when the next read is due
	hold bool      // next ends a backoff: a watch signal does not bring it forward

	watch        <-chan struct{} // nil while not watching
	watchCancel  context.CancelFunc
	watchOff     bool      // the locker cannot watch
	watchRetryAt time.Time // no new watch before this
}

func (o *observer) run(ctx context.Context) {
	defer close(o.out)
	defer o.stopWatch()
	// One timer per read, armed right after it from the instant it set,
	// so that the time a consumer takes to receive does not move it.
	var timer *clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	due := true
	for {
		if due {
			due = false
			if timer != nil {
				timer.Stop()
				timer = nil
			}
			o.read(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		if timer == nil {
			wait := o.next.Sub(o.clock.Now())
			if wait <= 0 {
				due = true // read first: what is pending may be out of date
				continue
			}
			timer = o.clock.Timer(wait)
		}
		var send chan<- Observation
		var p Observation
		if o.pending != nil {
			send, p = o.out, *o.pending
		}
		select {
		case <-ctx.Done():
		case send <- p:
			o.delivered, o.pending = &p, nil
		case _, ok := <-o.watch:
			if !ok {
				o.watchEnded()
			}
			// A signal (or a watch that ended, which may have missed
			// one) calls for a read, unless a backoff is being waited
			// out: against a failing store, waking on every signal would
			// turn the backoff into a spin.
			due = !o.hold
		case <-timer.C:
			timer = nil
			due = true
		}
	}
}

// read reads the claim, records what it found, and sets when the next
// read is due.
func (o *observer) read(ctx context.Context) {
	o.ensureWatch(ctx)
	start := o.clock.Now()
	hs, err := o.holders(ctx)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		o.saw(Observation{State: ClaimUnknown, Err: fmt.Errorf("elector: observe %q: %w", o.cfg.Key, err)})
		o.next, o.hold = o.clock.Now().Add(o.bo.NextBackOff()), true
		return
	}
	o.bo.Reset()
	o.hold = false
	if len(hs) == 0 {
		o.saw(Observation{State: ClaimFree})
		wait := o.cfg.RetryPeriod
		if o.watch != nil {
			wait = observerFreeConfirm * o.cfg.RetryPeriod
		}
		o.next = start.Add(o.jitterAround(wait))
		return
	}
	leaders := make([]Leader, len(hs))
	least := time.Duration(-1)
	for i, h := range hs {
		leaders[i] = Leader{Holder: h.Holder, Token: h.Token, Slot: h.Slot}
		if h.Remaining > 0 && (least < 0 || h.Remaining < least) {
			least = h.Remaining
		}
	}
	o.saw(Observation{State: ClaimHeld, Leaders: leaders})
	if least < 0 {
		o.next = start.Add(o.jitterAround(o.cfg.RetryPeriod))
		return
	}
	// Read again just past the earliest expiry the store reported, counted
	// from before this read was sent (the store judged it later): the
	// holder renewed by then, or the claim is gone, or the store does not
	// answer; each is known after that read. A small spread keeps the
	// observers of one claim from reading together.
	spread := min(time.Duration(o.cfg.Jitter*float64(o.cfg.RetryPeriod)), 10*time.Millisecond)
	wait := least + time.Millisecond + time.Duration(rand.Int64N(int64(spread)+1))
	if o.observed && !(o.expiryWatch && o.watch != nil) {
		// The store judges expiry by what this process sees: a claim
		// expires here a TTL after this process first saw its last
		// renewal, and only a read sees one. Reading as often as a holder
		// renews at the elector's default (TTL/3), the observer sees the
		// last renewal within that and reports a crashed holder's claim
		// gone within TTL + TTL/3 of it, as a follower does; reading once
		// per Remaining, up to two TTLs.
		if ttl := hs[0].TTL; ttl > 0 {
			wait = min(wait, o.jitterDown(ttl/3))
		}
	}
	o.next = start.Add(wait)
}

// jitterDown shortens d by up to Jitter of it.
func (o *observer) jitterDown(d time.Duration) time.Duration {
	return d - time.Duration(rand.Float64()*o.cfg.Jitter*float64(d))
}

// holders is one bounded read of the claim's holders. A panicking Locker
// is recovered as an error: the observer outlives a broken read.
func (o *observer) holders(ctx context.Context) (hs []backends.Claim, err error) {
	rctx, cancel := context.WithCancelCause(ctx)
	t := o.clock.AfterFunc(o.cfg.ReadTimeout, func() { cancel(context.DeadlineExceeded) })
	defer func() {
		t.Stop()
		cancel(context.Canceled)
		if r := recover(); r != nil {
			o.log.Error("elector: observe: recovered panic", "where", "Holders", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			hs, err = nil, &PanicError{Where: "Holders", Value: r, Stack: debug.Stack()}
		}
	}()
	hs, err = o.locker.Holders(timeoutCtx{Context: rctx, deadline: o.clock.Now().Add(o.cfg.ReadTimeout)}, o.cfg.Key)
	if err == nil && rctx.Err() != nil {
		// Answered after the timeout: the answer may be older than the
		// timeout says, so it is not taken.
		err = fmt.Errorf("no answer within %v: %w", o.cfg.ReadTimeout, context.DeadlineExceeded)
	}
	return hs, err
}

// saw records obs: the consumer is offered it unless it says what the
// consumer already has, or is about to receive.
func (o *observer) saw(obs Observation) {
	if o.pending != nil && o.pending.same(obs) {
		return
	}
	if o.delivered != nil && o.delivered.same(obs) {
		o.pending = nil // back to what the consumer has
		return
	}
	o.pending = &obs
	switch obs.State {
	case ClaimHeld:
		ld := obs.Leaders[0]
		o.log.Info("elector: observed leader", "leader", ld.Holder, "token", ld.Token, "slot", ld.Slot, "holders", len(obs.Leaders))
	case ClaimFree:
		o.log.Info("elector: observed no leader", "state", obs.State)
	default:
		o.log.Warn("elector: observe: the claim could not be read", "state", obs.State, "err", obs.Err)
	}
}

// jitterAround spreads d by up to Jitter either way.
func (o *observer) jitterAround(d time.Duration) time.Duration {
	return d + time.Duration((2*rand.Float64()-1)*o.cfg.Jitter*float64(d))
}

// ensureWatch starts a claim watch if the locker can and none runs. It is
// called before each read, so that a change after the read is signalled.
func (o *observer) ensureWatch(ctx context.Context) {
	if o.watchOff || o.watch != nil || o.clock.Now().Before(o.watchRetryAt) {
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	ch, err := o.watcher.WatchClaim(wctx, o.cfg.Key)
	if err != nil {
		cancel()
		if errors.Is(err, backends.ErrUnsupported) {
			o.watchOff = true
		}
		o.watchRetryAt = o.clock.Now().Add(o.cfg.RetryPeriod)
		o.log.Debug("elector: observe: no claim watch; timing reads to expiry", "err", err)
		return
	}
	o.watch, o.watchCancel = ch, cancel
}

// watchEnded forgets a closed watch; the next starts no sooner than
// RetryPeriod later, so a watch that keeps ending cannot spin the loop.
func (o *observer) watchEnded() {
	o.watchCancel()
	o.watch, o.watchCancel = nil, nil
	o.watchRetryAt = o.clock.Now().Add(o.cfg.RetryPeriod)
}

// stopWatch ends the watch and waits, at most ReadTimeout, for its channel
// to close, so that the goroutine feeding it has exited.
func (o *observer) stopWatch() {
	if o.watch == nil {
		return
	}
	o.watchCancel()
	timer := o.clock.Timer(o.cfg.ReadTimeout)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-o.watch:
			if ok {
				continue
			}
		case <-timer.C:
			o.log.Warn("elector: observe: claim watch did not end")
		}
		o.watch = nil
		return
	}
}
