package backendtest

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// overMaxTTL are TTLs just and far above backends.MaxTTL: one a store that
// rounds to milliseconds or seconds would round to a representable value,
// and ones that overflow those units.
var overMaxTTL = []time.Duration{
	backends.MaxTTL + time.Nanosecond,
	backends.MaxTTL + time.Second,
	math.MaxInt64 / 2,
	math.MaxInt64 - time.Millisecond + 2,
	math.MaxInt64,
}

// testTTLBound checks backends.MaxTTL on every write path the store
// supports: a TTL above it is refused with ErrInvalid and writes nothing
// (a create leaves the key absent; a write over a live entry leaves it as
// it was); MaxTTL itself is accepted and stays live, for the store and for
// a peer, after time passes.
func (s *suite) testTTLBound(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	v := []byte("v")
	held := mustCreate(t, st, "ttlbound/held", []byte("held"), s.ttl)
	const absent = "ttlbound/new"
	tx, txn := st.(backends.Txner)
	txn = txn && st.Capabilities().Has(backends.CapTxn)

	unchanged := func(what string) {
		t.Helper()
		got, err := st.Get(ctx, held.Key)
		if err != nil {
			t.Errorf("after %s: Get(%q): %v, want the entry as it was", what, held.Key, err)
			return
		}
		sameEntry(t, "after "+what+": Get", got, held)
		if got.TTL != held.TTL {
			t.Errorf("after %s: TTL = %v, want %v as before", what, got.TTL, held.TTL)
		}
	}
	for _, ttl := range overMaxTTL {
		cases := []badCase{
			{"CreateIfAbsent", func() error { _, err := st.CreateIfAbsent(ctx, absent, v, ttl); return err }},
			{"CompareAndSet rev 0", func() error { _, err := st.CompareAndSet(ctx, absent, 0, v, ttl); return err }},
			{"CompareAndSet", func() error { _, err := st.CompareAndSet(ctx, held.Key, held.Revision, v, ttl); return err }},
			{"KeepAlive", func() error { _, err := st.KeepAlive(ctx, held.Key, held.Revision, ttl); return err }},
		}
		if txn {
			cases = append(cases,
				badCase{"Txn put of an absent key", func() error {
					_, err := tx.Txn(ctx, []backends.Cond{{Key: absent}}, []backends.Op{{Kind: backends.OpPut, Key: absent, Value: v, TTL: ttl}})
					return err
				}},
				badCase{"Txn put over a live entry", func() error {
					_, err := tx.Txn(ctx, []backends.Cond{{Key: held.Key, Revision: held.Revision}}, []backends.Op{{Kind: backends.OpPut, Key: held.Key, Value: v, TTL: ttl}})
					return err
				}},
			)
		}
		for _, c := range cases {
			what := fmt.Sprintf("%s with ttl %v (MaxTTL %v)", c.name, ttl, backends.MaxTTL)
			err := call(t, what, c.do)
			if errors.Is(err, errPanicked) {
				continue
			}
			wantErrIs(t, what, err, backends.ErrInvalid)
			wantAbsent(t, st, absent)
			unchanged(what)
		}
	}

	// MaxTTL itself is a TTL like any other.
	top := mustCreate(t, st, "ttlbound/max", v, backends.MaxTTL)
	checkTTL(t, "CreateIfAbsent with MaxTTL", top, backends.MaxTTL)
	ka, err := st.KeepAlive(ctx, top.Key, top.Revision, backends.MaxTTL)
	if err != nil {
		t.Fatalf("KeepAlive(%q, rev %d, MaxTTL %v): %v", top.Key, top.Revision, backends.MaxTTL, err)
	}
	checkTTL(t, "KeepAlive with MaxTTL", ka, backends.MaxTTL)
	top = mustCAS(t, st, top.Key, top.Revision, []byte("v2"), backends.MaxTTL)
	checkTTL(t, "CompareAndSet with MaxTTL", top, backends.MaxTTL)
	keys := []string{top.Key}
	if txn {
		res, err := tx.Txn(ctx, []backends.Cond{{Key: "ttlbound/maxtxn"}}, []backends.Op{{Kind: backends.OpPut, Key: "ttlbound/maxtxn", Value: v, TTL: backends.MaxTTL}})
		if err != nil {
			t.Fatalf("Txn put with MaxTTL %v: %v", backends.MaxTTL, err)
		}
		checkTTL(t, "Txn put with MaxTTL", res.Entries[0], backends.MaxTTL)
		keys = append(keys, "ttlbound/maxtxn")
	}
	if s.h.Elapse == nil {
		return // the rest makes time pass
	}
	p := s.peer(t, st)
	for _, k := range keys {
		mustGet(t, st, k)
		mustGet(t, p, k)
	}
	s.h.Elapse(3 * s.ttl)
	for _, k := range keys {
		for _, x := range []struct {
			who string
			st  backends.Store
		}{{"store", st}, {"peer", p}} {
			if e, err := x.st.Get(ctx, k); err != nil {
				t.Errorf("%s Get(%q) written with MaxTTL, %v later: (rev %d, %v), want live", x.who, k, 3*s.ttl, e.Revision, err)
			}
		}
	}
}
