package check

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tenure-go/tenure/tests/chaos/journal"
	"github.com/tenure-go/tenure/tests/chaos/schedule"
)

// The checker judges a run from its journal alone: what each worker says
// it did, by its own clock, what the fenced resource accepted and
// rejected, and when the driver injected faults. It knows nothing of the
// elector.
//
// Clocks: every timestamp is CLOCK_MONOTONIC of one host. The campaign
// runs every process on one host, so the workers' clocks, the resource's
// and the driver's are one clock, and instants they wrote compare
// directly. On several hosts this checker would not apply as written.
//
// Acting: a worker reads the clock, then checks its term (the leader's
// context), and journals an act stamped with that reading only if the
// check passed. The reading therefore precedes the instant the elector
// judged the term live, which precedes the term's local deadline, which
// precedes the moment the backend lets another holder in. So acts of two
// terms never interleave, by the workers' own clocks, whatever pauses the
// schedule injected: a pause after the check delays the write, not the
// act's timestamp. The write that lands after such a pause is the fenced
// resource's to reject, and that is checked separately.

// never is the recovery of a run in which nobody acted after the last fault.
const never = time.Duration(1<<63 - 1)

// Violation is one broken property of a run.
type Violation struct {
	Check  string `json:"check"`
	Detail string `json:"detail"`
}

// Result is what the checker found in one run.
type Result struct {
	Acts, Accepted, Rejected int
	Terms                    int
	StaleCaught              int            // rejections of writes made after a long pause of their writer
	LongPauses               int            // stop-long faults applied
	Faults                   map[string]int // applied faults by kind
	Recovery                 time.Duration  // from the end of the last fault to the first act after it; -1 if no fault
	Violations               []Violation
	LinOps                   int    // store operations checked for linearizability
	LinNote                  string // why some were not checked
}

func (res *Result) fail(check, format string, args ...any) {
	res.Violations = append(res.Violations, Violation{check, fmt.Sprintf(format, args...)})
}

// term is one worker process's tenure as seen in its acts.
type TermKey struct {
	Worker string
	PID    int
	Tok    int64
	Slot   int
}

type termSpan struct {
	TermKey
	first, last int64
}

// Check judges recs, the journal of a run with the given TTL and slot
// count (0 or 1: a single claim). settle is how much longer than TTL + 1s
// the run's backend may take to serve again after a fault (see the
// settler of package servers).
func Check(recs []journal.Record, ttl time.Duration, slots int, settle time.Duration) Result {
	res := Result{Faults: map[string]int{}, Recovery: -1}
	granted, list := res.checkTerms(recs)
	res.checkOverlaps(recs, list, max(slots, 1))
	res.checkTokens(list)
	res.checkFence(recs, granted)
	res.checkRecovery(recs, ttl, settle)
	return res
}

// checkTerms finds the terms granted, by the workers' own record of
// OnElected, and the spans of the terms that acted, in the order they
// began acting; a term that acted must have been granted.
func (res *Result) checkTerms(recs []journal.Record) (granted map[TermKey]bool, list []*termSpan) {
	granted = map[TermKey]bool{}
	spans := map[TermKey]*termSpan{}
	for _, r := range recs {
		switch r.Ev {
		case journal.EvElected:
			granted[TermKey{r.Worker, r.PID, r.Tok, r.Slot}] = true
		case journal.EvAct:
			res.Acts++
			k := TermKey{r.Worker, r.PID, r.Tok, r.Slot}
			s := spans[k]
			if s == nil {
				s = &termSpan{TermKey: k, first: r.T, last: r.T}
				spans[k] = s
			}
			s.first, s.last = min(s.first, r.T), max(s.last, r.T)
		}
	}
	res.Terms = len(spans)
	for k := range spans {
		if !granted[k] {
			res.fail("token", "%s (pid %d) acted with token %d on slot %d, which it was never granted", k.Worker, k.PID, k.Tok, k.Slot)
		}
	}
	list = make([]*termSpan, 0, len(spans))
	for _, s := range spans {
		list = append(list, s)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].first < list[j].first })
	return granted, list
}

// checkOverlaps checks that at most n terms of list act at once, and one
// per slot.
func (res *Result) checkOverlaps(recs []journal.Record, list []*termSpan, n int) {
	var open []*termSpan
	for _, s := range list {
		kept := open[:0]
		for _, o := range open {
			if o.last >= s.first {
				kept = append(kept, o)
			}
		}
		open = append(kept, s)
		same := false
		for _, o := range open[:len(open)-1] {
			if o.Slot == s.Slot {
				same = true
				res.fail("overlap", "slot %d: %s acted until %s while %s acted from %s", s.Slot,
					o.name(), at(recs, o.last), s.name(), at(recs, s.first))
			}
		}
		if len(open) > n && !same {
			res.fail("overlap", "%d terms acting at once (at most %d): %s", len(open), n, describe(open))
		}
	}
}

// checkTokens checks that tokens strictly increase per slot, in the order
// terms began acting, and that no token is acted on by two processes.
func (res *Result) checkTokens(list []*termSpan) {
	lastTok := map[int]*termSpan{}
	for _, s := range list {
		if p := lastTok[s.Slot]; p != nil && s.Tok <= p.Tok && (s.Worker != p.Worker || s.PID != p.PID) {
			res.fail("tokens", "slot %d: %s began acting after %s with a token not above it", s.Slot, s.name(), p.name())
		}
		if p := lastTok[s.Slot]; p == nil || s.Tok > p.Tok {
			lastTok[s.Slot] = s
		}
	}
}

// checkFence checks the fenced resource: accepted tokens never go down,
// and only granted ones are accepted; a write is rejected exactly when a
// higher token was accepted before it.
func (res *Result) checkFence(recs []journal.Record, granted map[TermKey]bool) {
	highest := map[int]int64{}
	pauses := pausesOf(recs)
	for _, r := range recs {
		switch r.Ev {
		case journal.EvAccept:
			res.Accepted++
			if r.Tok < highest[r.Slot] {
				res.fail("fence", "slot %d: accepted token %d from %s after accepting %d", r.Slot, r.Tok, r.Worker, highest[r.Slot])
			}
			highest[r.Slot] = max(highest[r.Slot], r.Tok)
			if !granted[TermKey{r.Worker, r.PID, r.Tok, r.Slot}] {
				res.fail("fence", "slot %d: accepted token %d from %s (pid %d), a token it was never granted", r.Slot, r.Tok, r.Worker, r.PID)
			}
		case journal.EvReject:
			res.Rejected++
			if r.Tok >= highest[r.Slot] {
				res.fail("fence", "slot %d: rejected token %d from %s, not below the highest accepted %d", r.Slot, r.Tok, r.Worker, highest[r.Slot])
			}
			if pauses.longAfter(r.Worker, r.Act, r.T) {
				res.StaleCaught++
			}
		}
	}
}

// checkRecovery counts the faults, and checks that someone acted soon
// enough after the last one ended.
func (res *Result) checkRecovery(recs []journal.Record, ttl, settle time.Duration) {
	var lastEnd int64
	for _, r := range recs {
		switch r.Ev {
		case journal.EvFault:
			if r.Target != "" {
				res.Faults[r.Kind]++
				if r.Kind == schedule.FStopLong {
					res.LongPauses++
				}
			}
		case journal.EvHeal:
			lastEnd = max(lastEnd, r.T)
			if strings.HasPrefix(r.Reason, "abandoned") {
				res.Faults["heal-abandoned"]++ // listed with the faults, so that a run's line shows it
			}
		}
	}
	if lastEnd == 0 {
		return
	}
	first := int64(-1)
	for _, r := range recs {
		if r.Ev == journal.EvAct && r.T > lastEnd && (first < 0 || r.T < first) {
			first = r.T
		}
	}
	if first < 0 {
		res.Recovery = never
		res.fail("recovery", "no one acted after the last fault ended")
		return
	}
	res.Recovery = time.Duration(first - lastEnd)
	if bound := ttl + time.Second + settle; res.Recovery > bound {
		res.fail("recovery", "first act %v after the last fault ended, more than TTL + 1s + the backend's settle time (%v)", res.Recovery.Round(time.Millisecond), bound)
	}
}

func (s *termSpan) name() string {
	return fmt.Sprintf("%s (pid %d, token %d)", s.Worker, s.PID, s.Tok)
}

func describe(ts []*termSpan) string {
	out := ""
	for i, t := range ts {
		if i > 0 {
			out += ", "
		}
		out += t.name()
	}
	return out
}

// at shows an instant relative to the first record of the journal.
func at(recs []journal.Record, t int64) string {
	if len(recs) == 0 {
		return fmt.Sprint(t)
	}
	t0 := recs[0].T
	for _, r := range recs {
		t0 = min(t0, r.T)
	}
	return "+" + time.Duration(t-t0).Round(time.Millisecond).String()
}

// pauseSet is where the driver stopped each worker for longer than a TTL.
type pauseSet map[string][][2]int64 // worker -> [stop, cont] intervals

func pausesOf(recs []journal.Record) pauseSet {
	ps := pauseSet{}
	began := map[int]journal.Record{}
	for _, r := range recs {
		switch {
		case r.Ev == journal.EvFault && r.Kind == schedule.FStopLong && r.Target != "":
			began[r.Fault] = r
		case r.Ev == journal.EvHeal && r.Kind == schedule.FStopLong:
			if b, ok := began[r.Fault]; ok {
				ps[b.Target] = append(ps[b.Target], [2]int64{b.T, r.T})
			}
		}
	}
	return ps
}

// longAfter reports whether worker was stopped for longer than a TTL
// between its act at act and its write arriving at t.
func (ps pauseSet) longAfter(worker string, act, t int64) bool {
	for _, iv := range ps[worker] {
		if act <= iv[0] && iv[1] <= t {
			return true
		}
	}
	return false
}

// Line is a run's result on one line of the campaign's output.
func (r Result) Line() string {
	var kinds []string
	nf := 0
	for k, n := range r.Faults {
		kinds = append(kinds, fmt.Sprintf("%s:%d", k, n))
		nf += n
	}
	sort.Strings(kinds)
	rec := FmtRecovery(r.Recovery)
	lin := fmt.Sprintf("lin=%d-ops", r.LinOps)
	if r.LinNote != "" {
		lin += "(" + r.LinNote + ")"
	}
	return fmt.Sprintf("faults=%d[%s] terms=%d acts=%d accepted=%d rejected=%d stale-caught=%d recovery=%s %s violations=%d",
		nf, strings.Join(kinds, " "), r.Terms, r.Acts, r.Accepted, r.Rejected, r.StaleCaught, rec, lin, len(r.Violations))
}

// FmtRecovery shows a recovery time: "-" when there was no fault to
// recover from, "none" when nobody acted after the last one.
func FmtRecovery(d time.Duration) string {
	switch {
	case d == never:
		return "none"
	case d < 0:
		return "-"
	}
	return d.Round(time.Millisecond).String()
}
