package check

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/tenure-go/tenure/tests/chaos/journal"
)

// The linearizability check of the backend's own history, from outside:
// every worker journals each store operation on the claim's keys as a call
// (before the request) and a return (after the answer), by its own
// CLOCK_MONOTONIC (one host, one clock; see check.go). porcupine then
// looks for one sequential order of all of them, consistent with real
// time, that a model of one key accepts. The model is the contract of
// package backends for one key, with expiry:
//
//   - revisions strictly increase over the key's life; a create sets
//     Revision = CreateRevision; keep-alive changes neither;
//   - conditional writes succeed exactly when their condition holds, and a
//     refusal reports the key's current state;
//   - an entry with a TTL may be judged expired, and so absent, only once
//     its TTL has run from the call of the operation that last set it.
//     Counting from the call is the most lenient reading (the backend
//     applied the operation later); a backend that expires an entry before
//     then fails the check.
//
// An operation that failed with an error leaving its outcome unknown (a
// timeout, a cut connection), or whose process was killed or stopped before
// it returned, may have happened at any point after its call, or never;
// the model tries both, with the revision it would have written unknown
// until an answer shows it. A claim key written by a transaction (slot
// groups on stores with transactions) is left out: its history is not
// complete.

// linIn is one operation's input.
type linIn struct {
	kind  string
	rev   int64
	ttl   int64
	value string
	call  int64
	ret   int64 // the return instant; math.MaxInt64 when there was none
}

// linOut is one operation's answer.
type linOut struct {
	unknown        bool
	ok, found      bool
	rev, createRev int64
	value          string
}

// linState is the key's state in the model. rev -1 means present with a
// revision not seen yet (written by an operation whose answer was lost).
type linState struct {
	present        bool
	rev, createRev int64
	value          string
	maxRev         int64 // the highest revision the key has had
	ttl            bool  // the entry has a TTL
	expireAt       int64 // the earliest instant it may be judged expired
}

// matches reports whether an answer showing the key present with out's
// revision agrees with s, and returns s with an unseen revision filled in.
func (s linState) matches(o linOut) (linState, bool) {
	if !s.present {
		return s, false
	}
	if s.rev == -1 {
		if o.rev <= s.maxRev || o.value != s.value {
			return s, false
		}
		if s.createRev == -1 {
			if o.createRev != o.rev {
				return s, false
			}
			s.createRev = o.rev
		} else if o.createRev != s.createRev {
			return s, false
		}
		s.rev, s.maxRev = o.rev, o.rev
		return s, true
	}
	return s, o.rev == s.rev && o.createRev == s.createRev && o.value == s.value
}

// agrees is matches for a refusal: a conflict may carry the current entry
// or only say whether the key was there.
func (s linState) agrees(o linOut) (linState, bool) {
	if o.found != s.present {
		return s, false
	}
	if !s.present || o.rev == 0 {
		return s, true
	}
	return s.matches(o)
}

func linStep(st, in, out any) []any {
	s0, i, o := st.(linState), in.(linIn), out.(linOut)
	cands := []linState{s0}
	if s0.present && s0.ttl && i.ret >= s0.expireAt {
		cands = append(cands, linState{maxRev: s0.maxRev})
	}
	var next []any
	for _, s := range cands {
		next = append(next, linApply(s, i, o)...)
	}
	return next
}

// linStepLocal is linStep for a store whose expiry each process judges
// for itself, from when it saw the entry's last write (kube, NATS and
// PostgreSQL: see their package docs). There, expiry is what one process
// may observe, not a change of the entry: once the entry's TTL has run
// from the call of the write that last set it, an operation may see the
// key absent (a read, a refusal, or a create that takes it over), but an
// operation that writes nothing over it leaves the entry in place for
// every other process. A renewal its holder sent in time and the server
// applied late (it was paused, with the renewal queued) can so keep the
// entry alive after one process judged it expired, as those stores do;
// taking over an expired entry stays conditioned on the revision seen, so
// only one of that renewal and a takeover lands.
func linStepLocal(st, in, out any) []any {
	s0, i, o := st.(linState), in.(linIn), out.(linOut)
	next := linApply(s0, i, o)
	if s0.present && s0.ttl && i.ret >= s0.expireAt {
		gone := linState{maxRev: s0.maxRev}
		for _, n := range linApply(gone, i, o) {
			if n.(linState) == gone {
				n = s0 // seen absent, written over by nothing: still there for others
			}
			next = append(next, n)
		}
	}
	return next
}

// LocalExpiry reports whether backend's store judges expiry in each
// process (see linStepLocal).
func LocalExpiry(backend string) bool {
	for _, p := range []string{"kube", "nats", "postgres", "dynamodb"} {
		if strings.HasPrefix(backend, p) {
			return true
		}
	}
	return false
}

// linApply is the states a key in state s may be in after operation i
// returned o; none if o could not have come from s.
func linApply(s linState, i linIn, o linOut) []any {
	kind := i.kind
	if kind == "cas" && i.rev == 0 {
		kind = "create"
	}
	if o.unknown {
		return s.applyUnknown(i, kind)
	}
	switch kind {
	case "get":
		return s.applyGet(o)
	case "create":
		return s.applyCreate(i, o)
	case "cas":
		return s.applyCAS(i, o)
	case "delete":
		return s.applyDelete(i, o)
	case "keepalive":
		return s.applyKeepAlive(i, o)
	}
	return nil
}

// written is the state after a write of i at rev that created the key at
// create (-1: unknown).
func (s linState) written(i linIn, rev, create int64) linState {
	return linState{present: true, rev: rev, createRev: create, value: i.value,
		maxRev: max(s.maxRev, rev), ttl: i.ttl > 0, expireAt: i.call + i.ttl}
}

// condRev reports whether the revision condition of i (a cas, delete or
// keepalive) may hold in s.
func (s linState) condRev(i linIn) bool {
	return s.present && (s.rev == i.rev || (s.rev == -1 && i.rev > s.maxRev))
}

// applyUnknown is the states after a write whose outcome is unknown: as
// before (it never took effect, or it was a read), or as if it did.
func (s linState) applyUnknown(i linIn, kind string) []any {
	out := []any{s}
	switch kind {
	case "create":
		if !s.present {
			out = append(out, s.written(i, -1, -1))
		}
	case "cas":
		if s.condRev(i) {
			n := s.written(i, -1, s.createRev)
			n.maxRev = s.maxRev
			out = append(out, n)
		}
	case "delete":
		if s.condRev(i) {
			out = append(out, linState{maxRev: max(s.maxRev, i.rev)})
		}
	case "keepalive":
		if s.condRev(i) {
			n := s
			n.ttl, n.expireAt = true, i.call+i.ttl
			out = append(out, n)
		}
	}
	return out
}

func (s linState) applyGet(o linOut) []any {
	if !o.ok {
		if s.present {
			return nil
		}
		return []any{s}
	}
	if n, ok := s.matches(o); ok {
		return []any{n}
	}
	return nil
}

func (s linState) applyCreate(i linIn, o linOut) []any {
	if o.ok {
		if !s.present && o.rev > s.maxRev && o.createRev == o.rev {
			return []any{s.written(i, o.rev, o.rev)}
		}
		return nil
	}
	if s.present {
		if n, ok := s.agrees(o); ok && o.found {
			return []any{n}
		}
	}
	return nil
}

func (s linState) applyCAS(i linIn, o linOut) []any {
	if o.ok {
		if !s.condRev(i) || o.rev <= max(s.maxRev, i.rev) {
			return nil
		}
		create := s.createRev
		if create == -1 {
			create = i.rev
		}
		if o.createRev != create {
			return nil
		}
		return []any{s.written(i, o.rev, create)}
	}
	return s.refused(i, o)
}

func (s linState) applyDelete(i linIn, o linOut) []any {
	if o.ok {
		if !s.condRev(i) {
			return nil
		}
		return []any{linState{maxRev: max(s.maxRev, i.rev)}}
	}
	return s.refused(i, o)
}

func (s linState) applyKeepAlive(i linIn, o linOut) []any {
	if o.ok {
		if !s.condRev(i) {
			return nil
		}
		n, ok := s.matches(linOut{rev: o.rev, createRev: o.createRev, value: s.value})
		if s.rev == -1 {
			n, ok = s.matches(linOut{rev: i.rev, createRev: o.createRev, value: s.value})
		}
		if !ok || o.rev != i.rev {
			return nil
		}
		n.ttl, n.expireAt = true, i.call+i.ttl
		return []any{n}
	}
	return s.refused(i, o)
}

// refused is the state after a cas, delete or keepalive of i refused with
// o: one that agrees with the entry o reports, and not at i's revision.
func (s linState) refused(i linIn, o linOut) []any {
	if n, ok := s.agrees(o); ok && !(s.present && n.rev == i.rev) {
		return []any{n}
	}
	return nil
}

// linModelFor is the model of one key's history on a store whose expiry
// is judged in each process (local) or not.
func linModelFor(local bool) *porcupine.NondeterministicModel {
	step := linStep
	if local {
		step = linStepLocal
	}
	return &porcupine.NondeterministicModel{
		Init: func() []any { return []any{linState{}} },
		Step: step,
		DescribeOperation: func(in, out any) string {
			i, o := in.(linIn), out.(linOut)
			if o.unknown {
				return fmt.Sprintf("%s(rev %d) -> unknown", i.kind, i.rev)
			}
			return fmt.Sprintf("%s(rev %d %q) -> ok %v found %v rev %d create %d", i.kind, i.rev, i.value, o.ok, o.found, o.rev, o.createRev)
		},
	}
}

// Linearizable checks the store history in recs, key by key, and
// adds what it found to res; local says the store judges expiry in each
// process (see linStepLocal).
func Linearizable(recs []journal.Record, local bool, res *Result) {
	type id struct {
		pid int
		seq int64
	}
	calls := map[id]journal.Record{}
	rets := map[id]journal.Record{}
	txnKeys := map[string]bool{}
	for _, r := range recs {
		if r.Ev != journal.EvOp || r.Op == nil {
			continue
		}
		k := id{r.PID, r.Op.Seq}
		switch {
		case r.Op.Kind == "txn":
			txnKeys[r.Op.Key] = true
		case r.Op.Ret:
			rets[k] = r
		default:
			calls[k] = r
		}
	}
	byKey := map[string][]porcupine.Operation{}
	for k, c := range calls {
		if txnKeys[c.Op.Key] {
			continue
		}
		in := linIn{kind: c.Op.Kind, rev: c.Op.Rev, ttl: c.Op.TTL, value: c.Op.Value, call: c.T, ret: math.MaxInt64}
		out := linOut{unknown: true}
		if r, ok := rets[k]; ok {
			in.ret = r.T
			o := r.Op
			out = linOut{unknown: o.Unknown, ok: o.OK, found: o.Found, rev: o.OutRev, createRev: o.OutCreate, value: o.OutValue}
			if o.Unknown {
				in.ret = math.MaxInt64
			}
		}
		if out.unknown && in.kind == "get" {
			continue // a read that never answered tells nothing
		}
		byKey[c.Op.Key] = append(byKey[c.Op.Key], porcupine.Operation{ClientId: k.pid, Input: in, Call: in.call, Output: out, Return: in.ret})
	}
	if len(txnKeys) > 0 {
		res.LinNote = fmt.Sprintf("%d keys written by txn not checked", len(txnKeys))
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	model := linModelFor(local).ToModel()
	var timedOut []string
	for _, k := range keys {
		ops := byKey[k]
		res.LinOps += len(ops)
		switch porcupine.CheckOperationsTimeout(model, ops, 60*time.Second) {
		case porcupine.Illegal:
			res.fail("linearizable", "key %q: the %d operations on it have no linearization the model accepts", k, len(ops))
		case porcupine.Unknown:
			timedOut = append(timedOut, k)
		}
	}
	if len(timedOut) > 0 {
		note := "check timed out on " + strings.Join(timedOut, ",")
		if res.LinNote != "" {
			note = res.LinNote + "; " + note
		}
		res.LinNote = note
	}
}
