package elector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// sighting is when a leader first saw a candidate at a priority.
type sighting struct {
	priority int64
	since    time.Time
}

// prefer runs after each renewal of t when Config.Candidacy is set: it
// reads the candidacies and, once a candidate of higher Priority than
// this Elector's has stayed present at that priority for SettleTime,
// hands the claim over to it as Transfer does. It reports whether t still
// leads. A failed read changes nothing: the term goes on, and the
// candidates seen so far keep their time.
func (l *loop) prefer(t *term) bool {
	e := l.e
	if l.prefTerm != t {
		l.prefTerm, l.seen = t, map[string]sighting{}
	}
	var cands []backends.Candidate
	var req *backends.TransferRequest
	err := e.bounded(t.ctx, e.cfg.RenewTimeout, func(ctx context.Context) (err error) {
		cands, req, err = e.cands.Candidates(ctx, e.cfg.Key)
		return err
	})
	if err != nil {
		if t.ctx.Err() == nil {
			e.log.Debug("elector: reading the candidacies failed", "err", err)
		}
		return t.ctx.Err() == nil
	}
	if req != nil {
		if to, ok := l.requested(t, *req, cands); ok {
			return l.handOverTo(t, to)
		}
	}
	now := e.clock.Now()
	present := make(map[string]sighting, len(cands))
	var best *backends.Candidate
	for i, c := range cands {
		if c.Holder.Nonce == e.holder.Nonce || c.Priority <= e.cfg.Priority {
			continue
		}
		s, ok := l.seen[c.Holder.Nonce]
		if !ok || s.priority != c.Priority {
			s = sighting{priority: c.Priority, since: now}
		}
		present[c.Holder.Nonce] = s
		// Candidates come by descending priority: the first settled one
		// is the best settled one.
		if best == nil && now.Sub(s.since) >= e.cfg.SettleTime {
			best = &cands[i]
		}
	}
	l.seen = present
	if best == nil {
		return true
	}
	e.log.Info("elector: a preferred candidate is present; transferring", "to", best.Holder, "priority", best.Priority, "own_priority", e.cfg.Priority)
	return l.handOverTo(t, best.Holder.ID)
}

// requested acts on a transfer request read beside the candidacies: it
// names the target (the request's, or the best candidate other than this
// Elector) and deletes the request, so that the next leader does not act
// on it again. It reports false, leaving the term as it is, when there is
// no one to hand over to yet (the request waits, until it expires, for a
// candidate to appear) or the request could not be deleted (it is tried
// again at the next renewal).
func (l *loop) requested(t *term, req backends.TransferRequest, cands []backends.Candidate) (string, bool) {
	e := l.e
	to := req.To
	if to == "" {
		for _, c := range cands { // by descending priority
			if c.Holder.Nonce != e.holder.Nonce {
				to = c.Holder.ID
				break
			}
		}
		if to == "" {
			return "", false
		}
	}
	err := e.bounded(t.ctx, e.cfg.RenewTimeout, func(ctx context.Context) error {
		return e.cands.ClearTransferRequest(ctx, req)
	})
	if err != nil {
		e.log.Warn("elector: a transfer request could not be cleared; trying again at the next renewal", "to", to, "err", err)
		return "", false
	}
	e.log.Info("elector: a transfer was requested; transferring", "to", to)
	return to, true
}

// handOverTo ends t to hand the claim over to the identity to, as
// Transfer does, without waiting for the outcome. It reports false: t
// leads no more.
func (l *loop) handOverTo(t *term, to string) bool {
	e := l.e
	e.mu.Lock()
	if e.stopping || !e.leadingLocked(e.clock.Now()) {
		e.mu.Unlock()
		return false
	}
	t.transfer = &transferReq{to: to, done: make(chan error, 1)}
	tr, _ := e.demoteLocked(t, Cause{Reason: ReasonTransferred})
	e.mu.Unlock()
	e.afterDemote(t, tr)
	return false
}

// candidacy is the candidacy goroutine, run while the Elector runs when
// Config.Candidacy is set: it declares the candidacy, renews it on the
// renewal grid, declares it again when it was lost, and withdraws it at
// the end (bounded by ReleaseTimeout). Errors are retried with the
// follower's backoff; a candidacy that lapses meanwhile only makes this
// Elector invisible to the leader's preference until it is back.
func (e *Elector) candidacy(ctx context.Context) {
	defer close(e.candDone)
	bo := e.newBackoff(e.cfg.RetryPeriod, e.cfg.TTL)
	var (
		cur  backends.Candidate
		have bool
		wait time.Duration
	)
	for {
		if wait > 0 {
			timer := e.clock.Timer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				e.withdraw(ctx, cur, have)
				return
			case <-timer.C:
			case <-e.candKick:
				timer.Stop()
			}
		} else if ctx.Err() != nil {
			e.withdraw(ctx, cur, have)
			return
		}
		sent := e.clock.Now()
		err := e.bounded(ctx, e.cfg.RenewTimeout, func(ctx context.Context) (err error) {
			if have {
				cur, err = e.cands.RenewCandidacy(ctx, cur)
				return err
			}
			cur, err = e.cands.DeclareCandidacy(ctx, e.cfg.Key, e.holder, e.cfg.Priority, e.cfg.TTL)
			return err
		})
		switch {
		case err == nil:
			have = true
			bo.Reset()
			wait = e.renewAt(sent).Sub(e.clock.Now())
			if e.IsLeader() {
				// A leader's candidacy serves no one (a leader never
				// transfers to itself), so it is left unrenewed until
				// the term ends (kickCandidacy): a leader pays nothing
				// per period for it. It may lapse meanwhile, and is
				// then declared again.
				wait = candidacyIdle
			}
		case ctx.Err() != nil:
			e.withdraw(ctx, cur, have)
			return
		case backends.Classify(err) == backends.ClassLost:
			e.log.Warn("elector: candidacy lost; declaring it again", "err", err)
			have, wait = false, 0
		default:
			wait = bo.NextBackOff()
			e.log.Warn("elector: candidacy write failed", "err", err, "retry_in", wait.String())
			if errors.Is(err, backends.ErrUsage) || backends.Classify(err) == backends.ClassFatal {
				have = false
			}
		}
	}
}

// withdraw deletes the candidacy c (if have), bounded by ReleaseTimeout
// even though ctx is done. It waits first until the campaign goroutine has
// given its claim up (settled), so that on a leader the withdrawal does not
// contend with the release or the handover for the store while the next
// leader waits; but no longer than RenewTimeout + DrainTimeout, the rest of
// Stop's bound, after which it withdraws beside the release as before.
func (e *Elector) withdraw(ctx context.Context, c backends.Candidate, have bool) {
	if !have {
		return
	}
	wait := e.clock.Timer(e.cfg.RenewTimeout + e.cfg.DrainTimeout)
	select {
	case <-e.settled:
	case <-wait.C:
	}
	wait.Stop()
	err := e.bounded(context.WithoutCancel(ctx), e.cfg.ReleaseTimeout, func(ctx context.Context) error {
		return e.cands.WithdrawCandidacy(ctx, c)
	})
	if err != nil {
		e.log.Warn("elector: candidacy not withdrawn; it will expire", "err", fmt.Errorf("elector: candidacy %q: %w", e.cfg.Key, err))
	}
}

// candidacyIdle is how long a leader's candidacy goroutine waits for
// the term to end before it looks again: a backstop, in case a kick was
// missed.
const candidacyIdle = 24 * time.Hour

// kickCandidacy makes the candidacy goroutine renew (or declare again)
// now: the term it waited on has ended.
func (e *Elector) kickCandidacy() {
	if e.candKick == nil {
		return
	}
	select {
	case e.candKick <- struct{}{}:
	default:
	}
}

// releaseToPreferred gives up a stopped leader's claim: to the candidate
// of highest priority above this Elector's, if one is listed, as Transfer
// hands it over (a leader that is leaving need not wait for the settle
// time), and otherwise, or if that fails, as Stop releases it. The
// listing and the transfer share one ReleaseTimeout, the release's part
// of Stop's bound.
func (l *loop) releaseToPreferred(ctx context.Context, t *term) {
	e := l.e
	var to string
	err := e.bounded(context.WithoutCancel(ctx), e.cfg.ReleaseTimeout, func(ctx context.Context) error {
		cands, _, err := e.cands.Candidates(ctx, e.cfg.Key)
		if err != nil {
			return err
		}
		for _, c := range cands { // by descending priority
			if c.Holder.Nonce != e.holder.Nonce && c.Priority > e.cfg.Priority {
				to = c.Holder.ID
				break
			}
		}
		if to == "" {
			return nil
		}
		return e.transferCall(ctx, t.lease, to)
	})
	switch {
	case err == nil && to != "":
		e.log.Info("elector: stopped; the claim went to a preferred candidate", "token", t.lease.Token, "to", to)
		return
	case err != nil:
		e.log.Warn("elector: stopped; handing the claim to a preferred candidate failed, releasing it", "to", to, "err", err)
		if backends.Classify(err) == backends.ClassLost {
			return
		}
	}
	e.release(ctx, t.lease)
}
