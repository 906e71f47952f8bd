package elector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
)

// Term is one tenure of this Elector as leader.
type Term struct {
	Key    string
	Slot   int // the slot held; 0 for a singleton claim
	Holder backends.Holder

	// Token is the fencing token of the claim (its CreateRevision). Every
	// write the leader makes to a shared resource should carry it, so the
	// resource can reject a holder whose term has ended (see the package
	// documentation).
	Token int64

	// AcquiredAt is the clock reading taken before the acquiring request
	// was sent.
	AcquiredAt time.Time

	// Deadline is the local deadline when the Term value was taken: the
	// clock reading before the request that last extended the term was
	// sent, plus the TTL, minus Config.SafetyMargin. The term ends
	// Config.CancelLead before it, so the leader's work has been told to
	// stop by then. While leading, each renewal moves it forward.
	Deadline time.Time
}

// Leader is a holder observed holding the claim. Holder.Advertised is the
// value the holder advertises (Config.Advertise), empty if none.
type Leader struct {
	Holder backends.Holder
	Token  int64
	Slot   int
}

// Reason is why a term ended.
type Reason int

// The reasons.
const (
	// ReasonStopped means Stop was called, or the context given to Start or
	// Run was cancelled.
	ReasonStopped Reason = iota + 1
	// ReasonLost means the backend said the claim is no longer this
	// holder's.
	ReasonLost
	// ReasonExpired means the local deadline passed before a renewal
	// succeeded in time (a slow or unreachable backend, transient errors, a
	// renewal answered too late).
	ReasonExpired
	// ReasonFatal means the backend returned an error retrying cannot fix
	// (backends.ClassFatal).
	ReasonFatal
	// ReasonPanic means a callback or the elector's own loop panicked. Err is
	// a *PanicError.
	ReasonPanic
	// ReasonTransferred means Elector.Transfer handed the claim to another
	// candidate. Err is nil when the claim was released and reserved for
	// it, and says why otherwise (the claim was then released as at Stop,
	// or left to expire).
	ReasonTransferred
)

func (r Reason) String() string {
	switch r {
	case ReasonStopped:
		return "stopped"
	case ReasonLost:
		return "lost"
	case ReasonExpired:
		return "expired"
	case ReasonFatal:
		return "fatal"
	case ReasonPanic:
		return "panic"
	case ReasonTransferred:
		return "transferred"
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// LogValue logs r by its name, so that every slog handler (JSON included)
// shows "expired" rather than a number.
func (r Reason) LogValue() slog.Value { return slog.StringValue(r.String()) }

// Cause is why a term ended: the Reason and, where there is one, the error
// behind it. Its message names the package once: "elector: demoted:
// expired: term ended before a renewal was answered". It is also the cancellation cause of the leader's context
// (context.Cause), except when the context given to Start was cancelled,
// whose own cause then shows through.
type Cause struct {
	Reason Reason
	Err    error
}

func (c Cause) Error() string {
	if c.Err == nil {
		return "elector: demoted: " + c.Reason.String()
	}
	// The elector's own errors (ErrDeadlinePassed, a PanicError) carry the
	// package prefix already.
	return fmt.Sprintf("elector: demoted: %s: %s", c.Reason, strings.TrimPrefix(c.Err.Error(), "elector: "))
}

func (c Cause) Unwrap() error { return c.Err }

// Errors behind ReasonExpired. When renewals were failing, the Cause's Err
// wraps the last renewal's error as well (errors.Is still matches
// ErrDeadlinePassed): the store's own words for why it did not answer.
var (
	// ErrDeadlinePassed means the term reached its end (Config.CancelLead
	// before the local deadline) with no renewal answered in time.
	ErrDeadlinePassed = errors.New("elector: term ended before a renewal was answered")
	// ErrLateAnswer means a renewal succeeded at the backend but its answer
	// arrived after the end of the term it would have extended; it is not
	// used.
	ErrLateAnswer = errors.New("elector: answer arrived after the term ended")
)

// PanicError is the error behind ReasonPanic.
type PanicError struct {
	Where string // "loop", "OnElected", "OnDemoted", ...
	Value any    // what was passed to panic
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("elector: panic in %s: %v", e.Where, e.Value)
}

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// term is the elector's record of one tenure. Fields marked e.mu are guarded
// by the Elector's mutex; the rest are owned by the goroutine named.
type term struct {
	pub     Term           // e.mu (Deadline moves)
	expired bool           // e.mu: the deadline was seen to pass; never cleared
	demoted bool           // e.mu: Demote was fired for this term
	cause   Cause          // e.mu: the first cause of demotion
	lastErr error          // e.mu: the error of the last renewal, nil once one succeeded
	lease   backends.Claim // loop goroutine
	sent    time.Time      // loop goroutine: when the request the deadline counts from was sent

	ctx    context.Context // the leader's context, handed to OnElected
	cancel context.CancelCauseFunc
	timer  *clock.Timer // ends the term (and cancels ctx) CancelLead before the deadline; set once by the loop

	// electedDone is closed by the dispatcher when OnElected has returned,
	// or was skipped because the term had ended before its turn.
	electedDone chan struct{}
	electedRan  bool // dispatcher goroutine

	transfer *transferReq // e.mu: set once, by Transfer, as it demotes the term
}

// leaderCtx is the context handed to OnElected. It is cancelled by the
// Elector at demotion, at the latest on a clock timer at the term's end
// (CancelLead before the local deadline), and its Deadline reports that
// end, which renewals move forward.
//
// A timer that runs late would leave the context live past the end, so Err
// and Done read the clock too: past the end, they end the term (as the
// timer would) before they answer. Contexts derived from it learn of the
// end when it is cancelled, as from any parent.
type leaderCtx struct {
	context.Context
	e *Elector
	t *term
}

func (c leaderCtx) Deadline() (time.Time, bool) {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return c.e.endLocked(c.t), true
}

func (c leaderCtx) Done() <-chan struct{} {
	c.e.endIfDue(c.t)
	return c.Context.Done()
}

func (c leaderCtx) Err() error {
	c.e.endIfDue(c.t)
	return c.Context.Err()
}
