package elector

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/tenure-go/tenure/backends"
)

// ErrNotLeader is returned by Transfer when this Elector does not lead, or
// its term is already ending.
var ErrNotLeader = errors.New("elector: not the leader")

// ErrNotDrained is behind a transfer that did not happen because
// OnElected had not returned within Config.DrainTimeout: the claim is then
// left to expire, as at any demotion, and is not reserved for the target.
var ErrNotDrained = errors.New("elector: OnElected did not return within the drain timeout")

// transferReq is a Transfer waiting for the loop to hand the claim over.
type transferReq struct {
	to   string
	done chan error // buffered; the loop sends the outcome once
}

// Transfer hands the claim this Elector leads to the candidate whose
// Identity is to, and returns once the claim is released and reserved for
// it (or the attempt failed), or when ctx is done.
//
// It ends the term first, as every demotion does: IsLeader turns false at
// once, the leader's context is cancelled, and only once OnElected has
// returned (within Config.DrainTimeout) is the claim released, reserved
// for the target for Config.TransferBound. OnDemoted follows with
// ReasonTransferred. The target, campaigning on the same key, then takes
// the claim at a greater token; no other candidate can until the bound has
// passed. This Elector becomes a follower and campaigns again only after
// the bound, so that it does not contend with its own target.
//
// Transfer returns an error wrapping ErrNotLeader if this Elector does not
// lead, and one wrapping backends.ErrUnsupported if the Locker is not a
// backends.Transferer; neither ends the term. Once the term has ended, a
// transfer that fails (ErrNotDrained, a store error) leaves the claim as
// Stop would (released after the drain, or left to expire) and returns
// the error, which OnDemoted's Cause also carries. Like Stop, Transfer
// called from a callback waits for that same callback: call it from a
// goroutine of its own.
func (e *Elector) Transfer(ctx context.Context, to string) error {
	if _, err := backends.NewHolder(to); err != nil {
		return fmt.Errorf("elector: transfer %q: target: %w", e.cfg.Key, err)
	}
	if _, ok := e.locker.(backends.Transferer); !ok {
		return fmt.Errorf("elector: transfer %q: the locker cannot transfer a claim: %w", e.cfg.Key, backends.ErrUnsupported)
	}
	now := e.clock.Now()
	e.mu.Lock()
	t := e.cur
	if e.stopping || !e.leadingLocked(now) {
		e.mu.Unlock()
		return fmt.Errorf("elector: transfer %q to %q: %w", e.cfg.Key, to, ErrNotLeader)
	}
	req := &transferReq{to: to, done: make(chan error, 1)}
	t.transfer = req
	tr, _ := e.demoteLocked(t, Cause{Reason: ReasonTransferred})
	e.mu.Unlock()
	e.afterDemote(t, tr)
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("elector: transfer %q to %q: %w", e.cfg.Key, to, context.Cause(ctx))
	}
}

// handOver runs in finishTerm for a term ended by Transfer whose OnElected
// has returned: it releases the claim reserved for req's target, bounded
// by ReleaseTimeout. If that fails with anything but a lost claim, the
// claim is released plainly (a claim the transfer did release is then
// already gone), so a failed transfer leaves what Stop leaves.
func (l *loop) handOver(ctx context.Context, t *term, req *transferReq) error {
	e := l.e
	err := e.bounded(context.WithoutCancel(ctx), e.cfg.ReleaseTimeout, func(ctx context.Context) error {
		return e.transferCall(ctx, t.lease, req.to)
	})
	if err == nil {
		e.log.Info("elector: transferred", "token", t.lease.Token, "rev", t.lease.Revision, "to", req.to, "bound", e.cfg.TransferBound.String())
		return nil
	}
	e.log.Warn("elector: transfer failed", "token", t.lease.Token, "to", req.to, "err", err)
	if backends.Classify(err) != backends.ClassLost {
		e.release(ctx, t.lease)
	}
	return fmt.Errorf("elector: transfer %q to %q: %w", e.cfg.Key, req.to, err)
}

// transferCall calls the Locker's Transfer, recovering a panic as an error.
func (e *Elector) transferCall(ctx context.Context, lease backends.Claim, to string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			perr := &PanicError{Where: "Transfer", Value: r, Stack: debug.Stack()}
			e.reportPanic(perr)
			err = perr
		}
	}()
	tr, ok := e.locker.(backends.Transferer)
	if !ok {
		return fmt.Errorf("the locker cannot transfer a claim: %w", backends.ErrUnsupported)
	}
	return tr.Transfer(ctx, lease, to, e.cfg.TransferBound)
}
