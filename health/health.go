package health

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/lifecycle"
)

// DefaultTolerance is Config.Tolerance when it is zero.
const DefaultTolerance = 30 * time.Second

// Config configures a Handler.
type Config struct {
	// Key is the Elector's Config.Key, shown in the report.
	Key string

	// Tolerance is how long past its local deadline a leader state, and
	// how long a demotion, may last before the Elector counts as stuck.
	// Keep it above the Elector's DrainTimeout + ReleaseTimeout, the
	// longest a healthy demotion takes. Default DefaultTolerance.
	Tolerance time.Duration

	// RequireLeader makes the handler answer 503 while this process does
	// not lead: for a readiness probe of an active/passive service only,
	// never for liveness (see the package documentation).
	RequireLeader bool

	// Clock must be the Elector's Config.Clock. Default: the real clock.
	Clock clock.Clock
}

// Report is what the handler knows, as its JSON body shows it.
type Report struct {
	Healthy bool   `json:"healthy"`
	Status  string `json:"status"` // "ok", or why not
	Key     string `json:"key,omitempty"`
	State   string `json:"state"`
	// Holder and HolderNonce are this Elector's holder: its identity, as
	// configured, and its per-instance nonce.
	Holder      string `json:"holder"`
	HolderNonce string `json:"holder_nonce"`
	Leading     bool   `json:"leading"`
	// Leader and LeaderNonce are the holder this Elector last saw leading
	// (maybe itself), with its Token and Slot; a hint, not a guarantee.
	Leader      string `json:"leader,omitempty"`
	LeaderNonce string `json:"leader_nonce,omitempty"`
	Token       int64  `json:"token,omitempty"`
	Slot        int    `json:"slot,omitempty"`
	// DeadlineLeft is the time, in seconds, to this holder's local
	// deadline while it leads.
	DeadlineLeft *float64 `json:"deadline_left_seconds,omitempty"`
	Error        string   `json:"error,omitempty"`
}

// Handler is an http.Handler reporting an Elector's health. It is safe for
// concurrent use; it remembers what earlier probes saw, so use one Handler
// per probe path rather than a new one per request.
type Handler struct {
	e   *elector.Elector
	cfg Config

	mu           sync.Mutex
	deadlineOf   map[int64]time.Time // guarded by mu: the last deadline seen for a token this holder led with (latest term only)
	pastEndSince time.Time           // guarded by mu: first probe that saw state leader but not leading; zero if the last did not
	pastEndToken int64               // guarded by mu: the token observed then
	demotingFrom time.Time           // guarded by mu: first probe of the current demoting stretch; zero if none
}

// New returns a Handler for e.
func New(e *elector.Elector, cfg Config) *Handler {
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = DefaultTolerance
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	return &Handler{e: e, cfg: cfg, deadlineOf: map[int64]time.Time{}}
}

// ServeHTTP answers 200 if Check reports healthy, else 503, with the
// Report as JSON.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rep := h.Check()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if rep.Healthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	if r.Method == http.MethodHead {
		return
	}
	_ = json.NewEncoder(w).Encode(rep) // the client has gone if this fails
}

// Check observes the Elector once and reports.
func (h *Handler) Check() Report {
	e := h.e
	state := e.State()
	term, leading := e.Term()
	leader, seen := e.Leader()
	var done bool
	select {
	case <-e.Done():
		done = true
	default:
	}
	now := h.cfg.Clock.Now()

	rep := Report{
		Healthy:     true,
		Status:      "ok",
		Key:         h.cfg.Key,
		State:       state.String(),
		Holder:      e.Holder().ID,
		HolderNonce: e.Holder().Nonce,
		Leading:     leading,
	}
	if seen {
		rep.Leader, rep.LeaderNonce, rep.Token, rep.Slot = leader.Holder.ID, leader.Holder.Nonce, leader.Token, leader.Slot
	}
	if leading {
		left := term.Deadline.Sub(now).Seconds()
		rep.DeadlineLeft = &left
	}
	if done {
		if err := e.Err(); err != nil {
			rep.Error = err.Error()
		}
	}
	mine := seen && leader.Holder == e.Holder()

	h.mu.Lock()
	defer h.mu.Unlock()
	if leading {
		h.deadlineOf = map[int64]time.Time{term.Token: term.Deadline}
	}
	switch {
	case state == lifecycle.Leader && !leading:
		// The term is over by the clock, but the state has not moved on.
		// Timed from the term's deadline when this Handler saw it, else
		// from the first probe that saw the state stuck.
		if h.pastEndSince.IsZero() || h.pastEndToken != leader.Token {
			h.pastEndSince, h.pastEndToken = now, leader.Token
			if d, ok := h.deadlineOf[leader.Token]; ok && mine && d.Before(now) {
				h.pastEndSince = d
			}
		}
	default:
		h.pastEndSince = time.Time{}
	}
	if state == lifecycle.Demoting {
		if h.demotingFrom.IsZero() {
			h.demotingFrom = now
		}
	} else {
		h.demotingFrom = time.Time{}
	}

	switch {
	case done && rep.Error != "":
		rep.Healthy, rep.Status = false, "ended: "+rep.Error
	case !h.pastEndSince.IsZero() && now.Sub(h.pastEndSince) > h.cfg.Tolerance:
		rep.Healthy, rep.Status = false, "stuck: leader state "+now.Sub(h.pastEndSince).String()+" past the term's local deadline"
	case !h.demotingFrom.IsZero() && now.Sub(h.demotingFrom) > h.cfg.Tolerance:
		rep.Healthy, rep.Status = false, "stuck: demoting for "+now.Sub(h.demotingFrom).String()+" (the leader's work has not returned)"
	case h.cfg.RequireLeader && !leading:
		rep.Healthy, rep.Status = false, "not leading"
	}
	return rep
}
