package elector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
)

// DefaultTTL is the TTL of a Config that leaves it zero.
const DefaultTTL = 15 * time.Second

const (
	defaultJitter = 0.15
	// minSafetyMargin is the smallest default SafetyMargin and CancelLead.
	minSafetyMargin = 10 * time.Millisecond
)

// Config configures an Elector. Zero durations take the defaults documented
// on each field; negative ones are errors. Validate states every rule.
type Config struct {
	// Key is the claim key. Required; any key backends.ValidateKey accepts.
	Key string

	// Identity names this participant in the claim (a host name, a pod
	// name). Required; any identity backends.NewHolder accepts (non-empty
	// valid UTF-8 of at most backends.MaxKeyBytes). Each Elector adds a random nonce, so two
	// Electors configured with the same Identity are two holders; seeing the
	// other one hold the claim is reported as a duplicate identity.
	Identity string

	// Advertise is the value this Elector advertises with its claim, such
	// as the address at which it serves while it leads: every reader of
	// the claim (Leader, OnNewLeader, an Observer, tenure holders) sees it
	// as the holder's Advertised. Optional; at most
	// backends.MaxAdvertisedBytes of valid UTF-8 without control
	// characters (backends.ValidateAdvertised).
	Advertise string

	// EarlierHolders are the holders of this process's own earlier
	// Electors for the claim (Elector.Holder), for a program that runs one
	// Elector after another: a claim of theirs that lingers until it
	// expires (its release failed) is not reported as a duplicate
	// identity. Optional.
	EarlierHolders []backends.Holder

	// TTL is the lease asked of the backend on every acquire and renew.
	// Default DefaultTTL (15s).
	TTL time.Duration

	// RenewPeriod is the time from sending the request that last extended
	// the term (the acquisition or a renewal) to sending the next renewal.
	// A renewal goes out at the latest RenewPeriod after that send and, when
	// Jitter is at most 0.5, no earlier than RenewPeriod × (1 − 1.5 ×
	// Jitter) after it. Within that window the renewals of the Electors over
	// one Store go out together, whatever their Identity, while those over
	// different Stores stay apart (docs/safety.md says how).
	//
	// Default TTL/3. Must be below TTL, and RenewPeriod + RenewTimeout +
	// SafetyMargin + CancelLead must be below TTL (see Validate).
	RenewPeriod time.Duration

	// RenewTimeout bounds each acquire and renew request. Default
	// RenewPeriod.
	RenewTimeout time.Duration

	// SafetyMargin is taken off every local deadline: it covers the rate
	// drift between this host's monotonic clock and the clock that judges
	// expiry at the backend over one TTL. Default TTL/100, but at least
	// 10ms.
	SafetyMargin time.Duration

	// CancelLead is how long before the local deadline a term ends: from
	// then on IsLeader is false, the leader's context reports an error, a
	// renewal answered later extends nothing, and a timer closes the
	// context's Done channel. Done is so closed before the local deadline
	// even if that timer runs up to CancelLead late (a starved process).
	// Default TTL/100, but at least 10ms: the same order
	// as the default margin, far above the scheduling delay of a timer in a
	// process that is not pathologically starved, and a small share of the
	// term.
	CancelLead time.Duration

	// RetryPeriod is the base of the follower's waits when nothing better is
	// known (no holder's remaining time was observed) and of the
	// exponential backoff after errors (capped at TTL). Default
	// RenewPeriod/2.
	RetryPeriod time.Duration

	// Jitter is the fraction by which every renewal and retry wait is
	// randomised: 0 < Jitter < 1. Zero means 0.15. It also sets the spacing
	// of the grid renewals are aligned to (see RenewPeriod).
	Jitter float64

	// DisableJitter turns jitter off: every wait is exactly its nominal
	// length (for tests that step a fake clock exactly). Jitter must then
	// be left zero.
	DisableJitter bool

	// DrainTimeout is how long a demoted leader waits for OnElected to
	// return before it gives up waiting. If OnElected returns in time the
	// claim is released; if not, the claim is left to expire (it is never
	// released under running work) and the Elector does not campaign again
	// until OnElected has returned. Default RenewPeriod.
	DrainTimeout time.Duration

	// ReleaseTimeout bounds every Release request. Default RenewTimeout.
	ReleaseTimeout time.Duration

	// TransferBound is how long a claim handed over by Transfer stays
	// reserved for its target: until the target takes it or this time has
	// passed (judged by the store, as a TTL is), no other candidate can.
	// After it the claim is open to all. Default TTL; at most
	// backends.MaxTTL.
	TransferBound time.Duration

	// Candidacy opts this Elector in to preferred candidates. While it
	// follows it keeps a candidacy entry for the claim, with Priority and
	// its advertised value, renewed like a claim (on the renewal grid,
	// so a store that batches renewals renews it with the process's
	// other entries); while it leads it leaves the entry unrenewed (a
	// leader never transfers to itself) and declares it again when the
	// term ends. While it leads, it reads the candidacies at each
	// renewal and hands the
	// claim over (as Transfer does) to the candidate of highest
	// Priority above its own, once that candidate has stayed present,
	// at that Priority, for SettleTime. New fails with an error wrapping
	// backends.ErrUnsupported unless the Locker implements
	// backends.Candidacies and backends.Transferer.
	Candidacy bool

	// Priority is this Elector's preference: of two candidates, the
	// higher Priority should lead. Equal priorities never move the
	// claim. Used only with Candidacy.
	Priority int64

	// SettleTime is how long a candidate preferred to the leader must
	// stay present before the leader transfers to it, so that flapping
	// preferences cannot bounce the claim. Default TTL.
	SettleTime time.Duration

	// Clock is the source of all time. Default clock.New(), the real clock.
	Clock clock.Clock

	// Logger receives structured logs with the keys key, holder, token, rev
	// and state; states, reasons and error classes are logged by name and
	// durations as strings such as "1.5s". Default: nil, which logs
	// nothing; slog.Default() logs through the process's default logger.
	Logger *slog.Logger

	// Trace holds the instrumentation hooks (metrics, tracing). Hooks left
	// nil cost nothing. See Trace for who calls them and when.
	Trace Trace

	// OnElected is called when this Elector becomes the leader. ctx is the
	// leadership: it is cancelled at demotion, at the latest CancelLead
	// before the local deadline, and ctx.Deadline reports that instant (the
	// term's Deadline minus CancelLead; renewals push it forward). ctx.Err
	// reads the clock: it reports an error from that instant on even if the
	// timer that closes ctx.Done has not run yet. OnElected may block until
	// ctx is done, doing the leader's work, or return at once. The claim is not released
	// before it returns. See the package documentation for the delivery
	// rules shared by all callbacks.
	OnElected func(ctx context.Context, term Term)

	// OnDemoted is called exactly once after each OnElected call, when that
	// term has ended and its claim was released or left to expire, with the
	// reason it ended. It is never called for a term whose OnElected was not
	// called.
	OnDemoted func(term Term, cause Cause)

	// OnNewLeader is called when the observed leader (holder and token)
	// changes, including to this Elector.
	OnNewLeader func(leader Leader)
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.RenewPeriod == 0 {
		c.RenewPeriod = c.TTL / 3
	}
	if c.RenewTimeout == 0 {
		c.RenewTimeout = c.RenewPeriod
	}
	if c.SafetyMargin == 0 {
		c.SafetyMargin = max(c.TTL/100, minSafetyMargin)
	}
	if c.CancelLead == 0 {
		c.CancelLead = max(c.TTL/100, minSafetyMargin)
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = c.RenewPeriod / 2
	}
	if c.Jitter == 0 && !c.DisableJitter {
		c.Jitter = defaultJitter
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = c.RenewPeriod
	}
	if c.ReleaseTimeout == 0 {
		c.ReleaseTimeout = c.RenewTimeout
	}
	if c.TransferBound == 0 {
		c.TransferBound = c.TTL
	}
	if c.SettleTime == 0 {
		c.SettleTime = c.TTL
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
// with errors.Join under one "elector: config: " prefix; nil if c is
// usable. The rules:
//
//   - Key passes backends.ValidateKey; Identity passes backends.NewHolder;
//     Advertise passes backends.ValidateAdvertised.
//   - No duration is negative; TransferBound is at most backends.MaxTTL;
//     0 <= Jitter < 1, and Jitter is zero when
//     DisableJitter is set.
//   - RenewPeriod < TTL, and RenewPeriod + RenewTimeout + SafetyMargin +
//     CancelLead < TTL: a renewal sent at the latest moment its jitter
//     allows (RenewPeriod after the send time the current deadline counts
//     from; jitter only brings it earlier) and answered at the latest moment
//     its timeout allows is answered before the term ends (TTL -
//     SafetyMargin - CancelLead after that send time). Without it a term
//     could end with no error at all.
func (c Config) Validate() error {
	_, err := c.validate()
	return err
}

// validate is Validate, returning also the holder made of the Identity (and
// a fresh nonce) when c is usable.
func (c Config) validate() (backends.Holder, error) {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	if err := backends.ValidateKey(c.Key); err != nil {
		bad("key: %w", err)
	}
	h, err := backends.NewHolder(c.Identity)
	if err != nil {
		bad("identity: %w", err)
	}
	if h, err = h.Advertising(c.Advertise); err != nil {
		bad("advertise: %w", err)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ttl", c.TTL}, {"renew period", c.RenewPeriod}, {"renew timeout", c.RenewTimeout},
		{"safety margin", c.SafetyMargin}, {"cancel lead", c.CancelLead}, {"retry period", c.RetryPeriod},
		{"drain timeout", c.DrainTimeout}, {"release timeout", c.ReleaseTimeout},
		{"transfer bound", c.TransferBound}, {"settle time", c.SettleTime},
	} {
		if d.v < 0 {
			bad("%s %v is negative", d.name, d.v)
		}
	}
	switch {
	case c.RenewPeriod >= c.TTL:
		bad("renew period %v must be below ttl %v", c.RenewPeriod, c.TTL)
	case c.RenewPeriod+c.RenewTimeout+c.SafetyMargin+c.CancelLead >= c.TTL:
		// A renewal goes out at the latest RenewPeriod after the send time
		// the deadline counts from, and its answer may take RenewTimeout:
		// unless that answer can come before the term ends (TTL -
		// SafetyMargin - CancelLead after that send time), a term that
		// meets no error can still end for want of time.
		bad("renew period %v + renew timeout %v + safety margin %v + cancel lead %v must be less than ttl %v",
			c.RenewPeriod, c.RenewTimeout, c.SafetyMargin, c.CancelLead, c.TTL)
	}
	if c.TransferBound > backends.MaxTTL {
		bad("transfer bound %v exceeds the maximum of %v", c.TransferBound, backends.MaxTTL)
	}
	switch {
	case c.Jitter < 0 || c.Jitter >= 1:
		bad("jitter %v must be in [0, 1)", c.Jitter)
	case c.DisableJitter && c.Jitter != 0:
		bad("jitter %v set with DisableJitter", c.Jitter)
	}
	if len(errs) > 0 {
		return backends.Holder{}, fmt.Errorf("elector: config: %w", errors.Join(errs...))
	}
	return h, nil
}
