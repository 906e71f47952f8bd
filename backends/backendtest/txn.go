package backendtest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/tenure-go/tenure/backends"
)

// txner returns st as a Txner, skipping t unless txn is declared.
func txner(t *testing.T, st backends.Store) backends.Txner {
	t.Helper()
	need(t, st, backends.CapTxn)
	tx, ok := st.(backends.Txner)
	if !ok {
		t.Fatalf("store %T declares txn but is not a backends.Txner", st)
	}
	return tx
}

func (s *suite) testTxnAllOrNothing(t *testing.T) {
	st := s.store(t)
	tx := txner(t, st)
	ctx := t.Context()
	a := mustCreate(t, st, "txn/a", []byte("a1"), 0)
	b1 := mustCreate(t, st, "txn/b", []byte("b1"), 0)
	b := mustCAS(t, st, "txn/b", b1.Revision, []byte("b2"), 0)
	ops := []backends.Op{
		{Kind: backends.OpPut, Key: "txn/a", Value: []byte("a2")},
		{Kind: backends.OpPut, Key: "txn/c", Value: []byte("c1")},
		{Kind: backends.OpDelete, Key: "txn/b"},
	}
	tests := []struct {
		name     string
		conds    []backends.Cond
		failKey  string
		expected int64
		found    bool
	}{
		{"stale revision fails", []backends.Cond{{Key: "txn/a", Revision: a.Revision}, {Key: "txn/b", Revision: b1.Revision}, {Key: "txn/c", Revision: 5}}, "txn/b", b1.Revision, true},
		{"absent required present fails", []backends.Cond{{Key: "txn/c", Revision: b.Revision}, {Key: "txn/a", Revision: 0}}, "txn/c", b.Revision, false},
		{"present required absent fails", []backends.Cond{{Key: "txn/a", Revision: a.Revision}, {Key: "txn/b", Revision: 0}}, "txn/b", 0, true},
	}
	for _, tt := range tests {
		_, err := tx.Txn(ctx, tt.conds, ops)
		ce := conflictOf(t, fmt.Sprintf("Txn %s (conds %v)", tt.name, tt.conds), err, tt.failKey, tt.expected, tt.found)
		if ce != nil && tt.found {
			sameEntry(t, fmt.Sprintf("Txn %s: ConflictError.Current", tt.name), ce.Current, mustGet(t, st, tt.failKey))
		}
		sameEntry(t, fmt.Sprintf("Get(txn/a) after a failed Txn (%s)", tt.name), mustGet(t, st, "txn/a"), a)
		sameEntry(t, fmt.Sprintf("Get(txn/b) after a failed Txn (%s)", tt.name), mustGet(t, st, "txn/b"), b)
		wantAbsent(t, st, "txn/c")
	}
}

func (s *suite) testTxnApplies(t *testing.T) {
	st := s.store(t)
	tx := txner(t, st)
	a := mustCreate(t, st, "txn/a", []byte("a1"), 0)
	b := mustCreate(t, st, "txn/b", []byte("b1"), 0)
	conds := []backends.Cond{{Key: "txn/a", Revision: a.Revision}, {Key: "txn/c", Revision: 0}}
	ops := []backends.Op{
		{Kind: backends.OpPut, Key: "txn/a", Value: []byte("a2")},
		{Kind: backends.OpPut, Key: "txn/c", Value: []byte("c1"), TTL: s.ttl},
		{Kind: backends.OpDelete, Key: "txn/b"},
		{Kind: backends.OpDelete, Key: "txn/never"},
	}
	res, err := tx.Txn(t.Context(), conds, ops)
	if err != nil {
		t.Fatalf("Txn(conds %v): %v, want success", conds, err)
	}
	if len(res.Entries) != len(ops) {
		t.Fatalf("Txn returned %d entries for %d ops", len(res.Entries), len(ops))
	}
	ra, rc, rb, rn := res.Entries[0], res.Entries[1], res.Entries[2], res.Entries[3]
	if ra.Key != "txn/a" || string(ra.Value) != "a2" || ra.Revision <= a.Revision || ra.CreateRevision != a.CreateRevision {
		t.Errorf("Txn put of an existing key = %s, want value a2, a revision above %d, create revision %d", show(ra), a.Revision, a.CreateRevision)
	}
	if rc.Key != "txn/c" || string(rc.Value) != "c1" || rc.CreateRevision != rc.Revision || rc.Revision <= 0 {
		t.Errorf("Txn put of a new key = %s, want value c1, a positive revision equal to its create revision", show(rc))
	}
	checkTTL(t, "Txn put with TTL", rc, s.ttl)
	if rb.Key != "txn/b" || rb.Revision != b.Revision || rb.CreateRevision != b.CreateRevision {
		t.Errorf("Txn delete result = %s, want the deleted entry %s", show(rb), show(b))
	}
	if rn.Key != "txn/never" || rn.Revision != 0 || rn.CreateRevision != 0 {
		t.Errorf("Txn delete of an absent key = %s, want key txn/never with zero revisions", show(rn))
	}
	sameEntry(t, "Get(txn/a) after Txn", mustGet(t, st, "txn/a"), ra)
	sameEntry(t, "Get(txn/c) after Txn", mustGet(t, st, "txn/c"), rc)
	wantAbsent(t, st, "txn/b")
	wantAbsent(t, st, "txn/never")
}

// testTxnAtomic writes two keys together while readers list both: no reader
// may see one written without the other.
func (s *suite) testTxnAtomic(t *testing.T) {
	st := s.store(t)
	tx := txner(t, st)
	x := mustCreate(t, st, "pair/x", []byte("0"), 0)
	y := mustCreate(t, st, "pair/y", []byte("0"), 0)
	const rounds = 50
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				es, err := st.List(ctx, "pair/")
				if err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("List(pair/): %w", err)
					}
					return
				}
				if len(es) != 2 || string(es[0].Value) != string(es[1].Value) {
					errs <- fmt.Errorf("List(pair/) saw %q: a Txn half applied", valuesOf(es))
					return
				}
			}
		}()
	}
	for i := 1; i <= rounds && !t.Failed(); i++ {
		v := []byte(strconv.Itoa(i))
		res, err := tx.Txn(ctx,
			[]backends.Cond{{Key: x.Key, Revision: x.Revision}, {Key: y.Key, Revision: y.Revision}},
			[]backends.Op{{Kind: backends.OpPut, Key: x.Key, Value: v}, {Kind: backends.OpPut, Key: y.Key, Value: v}})
		if err != nil {
			t.Errorf("Txn round %d: %v", i, err)
			break
		}
		x, y = res.Entries[0], res.Entries[1]
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}
}

func valuesOf(es []backends.Entry) []string {
	vs := make([]string, len(es))
	for i, e := range es {
		vs[i] = e.Key + "=" + string(e.Value)
	}
	return vs
}
