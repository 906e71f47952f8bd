package check

import (
	"testing"
	"time"

	"github.com/tenure-go/tenure/tests/chaos/journal"
)

// ops builds a store history by hand for the linearizability check.
type ops struct {
	recs []journal.Record
	seq  int64
}

// op journals one operation by pid from call to ret (ret 0: no return).
func (o *ops) op(pid int, call, ret int64, in journal.OpRec, out journal.OpRec) {
	o.seq++
	in.Seq, in.Key = o.seq, "chaos"
	o.recs = append(o.recs, journal.Record{Ev: journal.EvOp, T: call, PID: pid, Op: &in})
	if ret == 0 {
		return
	}
	out.Seq, out.Key, out.Kind, out.Ret = o.seq, "chaos", in.Kind, true
	o.recs = append(o.recs, journal.Record{Ev: journal.EvOp, T: ret, PID: pid, Op: &out})
}

var linTTL = int64(2 * time.Second)

func linViolations(o *ops, local bool) []Violation {
	var res Result
	Linearizable(o.recs, local, &res)
	return res.Violations
}

// lateRenewal is the history a paused server gives a store whose expiry
// each process judges: the holder's renewal, sent in time, is applied
// after the holder's own store judged the entry expired and reported it
// absent; others then find it at its revision.
func lateRenewal(o *ops) {
	o.op(1, 0, 10*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "a"}, journal.OpRec{OK: true, OutRev: 5, OutCreate: 5, OutValue: "a"})
	o.op(1, 600*Ms, 0, journal.OpRec{Kind: "keepalive", Rev: 5, TTL: linTTL}, journal.OpRec{}) // answer lost
	o.op(1, 2100*Ms, 2500*Ms, journal.OpRec{Kind: "delete", Rev: 5}, journal.OpRec{})          // refused: absent
	o.op(2, 2600*Ms, 2610*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "b"}, journal.OpRec{Found: true, OutRev: 5, OutCreate: 5, OutValue: "a"})
}

func TestLinearizableAcceptsLegalHistories(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(o *ops)
	}{
		{"create, keep alive, expire, create", func(o *ops) {
			o.op(1, 0, 10*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "a"}, journal.OpRec{OK: true, OutRev: 5, OutCreate: 5, OutValue: "a"})
			o.op(1, 500*Ms, 510*Ms, journal.OpRec{Kind: "keepalive", Rev: 5, TTL: linTTL}, journal.OpRec{OK: true, OutRev: 5, OutCreate: 5, OutValue: "a"})
			o.op(2, 600*Ms, 610*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "b"}, journal.OpRec{Found: true, OutRev: 5, OutCreate: 5, OutValue: "a"})
			o.op(2, 2600*Ms, 2610*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "b"}, journal.OpRec{OK: true, OutRev: 9, OutCreate: 9, OutValue: "b"})
		}},
		{"a create whose answer was lost, seen later", func(o *ops) {
			o.op(1, 0, 0, journal.OpRec{Kind: "create", TTL: linTTL, Value: "a"}, journal.OpRec{})
			o.op(2, 100*Ms, 110*Ms, journal.OpRec{Kind: "get"}, journal.OpRec{OK: true, OutRev: 3, OutCreate: 3, OutValue: "a"})
		}},
		{"release then create", func(o *ops) {
			o.op(1, 0, 10*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "a"}, journal.OpRec{OK: true, OutRev: 2, OutCreate: 2, OutValue: "a"})
			o.op(1, 20*Ms, 30*Ms, journal.OpRec{Kind: "delete", Rev: 2}, journal.OpRec{OK: true})
			o.op(2, 40*Ms, 50*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "b"}, journal.OpRec{OK: true, OutRev: 3, OutCreate: 3, OutValue: "b"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, local := range []bool{false, true} {
				o := &ops{}
				tc.build(o)
				if v := linViolations(o, local); len(v) > 0 {
					t.Errorf("local expiry %v: violations %v, want none", local, v)
				}
			}
		})
	}
}

func TestLinearizableCatches(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(o *ops)
	}{
		{"two creates while the first is live", func(o *ops) {
			o.op(1, 0, 10*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "a"}, journal.OpRec{OK: true, OutRev: 5, OutCreate: 5, OutValue: "a"})
			o.op(2, 500*Ms, 510*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "b"}, journal.OpRec{OK: true, OutRev: 6, OutCreate: 6, OutValue: "b"})
		}},
		{"a token that goes back", func(o *ops) {
			o.op(1, 0, 10*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "a"}, journal.OpRec{OK: true, OutRev: 5, OutCreate: 5, OutValue: "a"})
			o.op(1, 20*Ms, 30*Ms, journal.OpRec{Kind: "delete", Rev: 5}, journal.OpRec{OK: true})
			o.op(2, 40*Ms, 50*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "b"}, journal.OpRec{OK: true, OutRev: 4, OutCreate: 4, OutValue: "b"})
		}},
		{"a keep-alive that changed the revision", func(o *ops) {
			o.op(1, 0, 10*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "a"}, journal.OpRec{OK: true, OutRev: 5, OutCreate: 5, OutValue: "a"})
			o.op(1, 20*Ms, 30*Ms, journal.OpRec{Kind: "keepalive", Rev: 5, TTL: linTTL}, journal.OpRec{OK: true, OutRev: 6, OutCreate: 5, OutValue: "a"})
		}},
		{"a read that misses a write that had returned", func(o *ops) {
			o.op(1, 0, 10*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "a"}, journal.OpRec{OK: true, OutRev: 5, OutCreate: 5, OutValue: "a"})
			o.op(2, 20*Ms, 30*Ms, journal.OpRec{Kind: "get"}, journal.OpRec{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, local := range []bool{false, true} {
				o := &ops{}
				tc.build(o)
				if v := linViolations(o, local); len(v) == 0 || v[0].Check != "linearizable" {
					t.Errorf("local expiry %v: violations %v, want a linearizable one", local, v)
				}
			}
		})
	}
}

// TestLinearizableLocalExpiry checks that expiry judged in each process is an
// observation, not a change of the entry. A renewal applied late keeps an
// entry alive after one process saw it expire: that passes only under the
// model of such stores; a takeover before the TTL has run from the last
// renewal's call fails under both, and so does one that lands beside a
// renewal that was applied.
func TestLinearizableLocalExpiry(t *testing.T) {
	o := &ops{}
	lateRenewal(o)
	if v := linViolations(o, false); len(v) == 0 {
		t.Errorf("a late renewal after the entry was seen expired: no violation under the model of one expiry for all")
	}
	if v := linViolations(o, true); len(v) > 0 {
		t.Errorf("a late renewal after the entry was seen expired: %v under the model of expiry judged in each process", v)
	}

	early := &ops{}
	early.op(1, 0, 10*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "a"}, journal.OpRec{OK: true, OutRev: 5, OutCreate: 5, OutValue: "a"})
	early.op(1, 1000*Ms, 1010*Ms, journal.OpRec{Kind: "keepalive", Rev: 5, TTL: linTTL}, journal.OpRec{OK: true, OutRev: 5, OutCreate: 5, OutValue: "a"})
	early.op(2, 2500*Ms, 2510*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "b"}, journal.OpRec{OK: true, OutRev: 6, OutCreate: 6, OutValue: "b"})
	if v := linViolations(early, true); len(v) == 0 {
		t.Errorf("a takeover 1.5 s after a 2 s renewal's call: no violation")
	}

	both := &ops{}
	lateRenewal(both)
	both.op(3, 2300*Ms, 2400*Ms, journal.OpRec{Kind: "create", TTL: linTTL, Value: "c"}, journal.OpRec{OK: true, OutRev: 6, OutCreate: 6, OutValue: "c"})
	both.op(2, 2700*Ms, 2710*Ms, journal.OpRec{Kind: "get"}, journal.OpRec{OK: true, OutRev: 5, OutCreate: 5, OutValue: "a"})
	if v := linViolations(both, true); len(v) == 0 {
		t.Errorf("a takeover and, after it, the old entry read back: no violation")
	}
}
