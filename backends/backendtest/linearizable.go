package backendtest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/tenure-go/tenure/backends"
)

// The linearizability check: a few goroutines run random create, CAS, get
// and delete calls on a few keys; porcupine then searches for a sequential
// order of the recorded history that the per-key model accepts.
const (
	linWorkers = 4
	linOps     = 40
	linKeys    = 3
)

type linOp int

const (
	linGet linOp = iota
	linCreate
	linCAS
	linDelete
)

func (o linOp) String() string { return [...]string{"get", "create", "cas", "delete"}[o] }

type linInput struct {
	op    linOp
	key   string
	rev   int64 // cas, delete
	value string
}

type linOutput struct {
	ok        bool   // the write happened / the get found the key
	found     bool   // on failure: the key was present (the conflict carried it)
	rev       int64  // written or current revision
	createRev int64  // written or current create revision
	value     string // current value (get, conflicts)
}

// linState is one key's state in the model. maxRev is the highest revision
// the key ever had, so the model demands strictly increasing revisions.
type linState struct {
	present   bool
	rev       int64
	createRev int64
	value     string
	maxRev    int64
}

func linStep(st, in, out any) (bool, any) {
	s, i, o := st.(linState), in.(linInput), out.(linOutput)
	current := func() bool {
		return o.found == s.present && (!s.present || (o.rev == s.rev && o.createRev == s.createRev && o.value == s.value))
	}
	switch i.op {
	case linGet:
		if o.ok != s.present {
			return false, s
		}
		return !s.present || (o.rev == s.rev && o.createRev == s.createRev && o.value == s.value), s
	case linCreate, linCAS:
		want := s.present && s.rev == i.rev
		if i.op == linCreate || i.rev == 0 {
			want = !s.present
		}
		if !o.ok {
			return !want && current(), s
		}
		if !want || o.rev <= s.maxRev {
			return false, s
		}
		n := linState{present: true, rev: o.rev, createRev: s.createRev, value: i.value, maxRev: o.rev}
		if !s.present {
			n.createRev = o.rev
		}
		return o.createRev == n.createRev, n
	case linDelete:
		if !o.ok {
			return !(s.present && s.rev == i.rev) && current(), s
		}
		if !s.present || s.rev != i.rev {
			return false, s
		}
		return true, linState{maxRev: s.maxRev}
	}
	return false, s
}

var linModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(linInput).key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return linState{} },
	Step: linStep,
	DescribeOperation: func(in, out any) string {
		i, o := in.(linInput), out.(linOutput)
		return fmt.Sprintf("%v(%s rev %d %q) -> ok %v found %v rev %d create %d %q", i.op, i.key, i.rev, i.value, o.ok, o.found, o.rev, o.createRev, o.value)
	},
}

// linCall runs one operation and turns its result into a linOutput. An error
// that is neither a conflict nor "not found" is returned as is.
func linCall(t *testing.T, st backends.Store, in linInput) (linOutput, error) {
	ctx := t.Context()
	var (
		e   backends.Entry
		err error
	)
	switch in.op {
	case linGet:
		e, err = st.Get(ctx, in.key)
		if errors.Is(err, backends.ErrNotFound) {
			return linOutput{}, nil
		}
	case linCreate:
		e, err = st.CreateIfAbsent(ctx, in.key, []byte(in.value), 0)
	case linCAS:
		e, err = st.CompareAndSet(ctx, in.key, in.rev, []byte(in.value), 0)
	case linDelete:
		err = st.CompareAndDelete(ctx, in.key, in.rev)
		if err == nil {
			return linOutput{ok: true}, nil
		}
	}
	if err == nil {
		return linOutput{ok: true, rev: e.Revision, createRev: e.CreateRevision, value: string(e.Value)}, nil
	}
	var ce *backends.ConflictError
	if !errors.As(err, &ce) {
		return linOutput{}, err
	}
	c := ce.Current
	return linOutput{found: ce.Found, rev: c.Revision, createRev: c.CreateRevision, value: string(c.Value)}, nil
}

func (s *suite) testLinearizable(t *testing.T) {
	st := s.store(t)
	stores := []backends.Store{st, s.peer(t, st)}
	var (
		clock   atomic.Int64 // logical time: orders calls and returns as they happened
		mu      sync.Mutex
		history []porcupine.Operation
		wg      sync.WaitGroup
	)
	for w := range linWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := st0(stores, w)
			seenRev := map[string]int64{}
			rnd := uint64(w)*0x9e3779b97f4a7c15 + 1
			next := func(n int) int { // xorshift: reproducible, no shared state
				rnd ^= rnd << 13
				rnd ^= rnd >> 7
				rnd ^= rnd << 17
				return int(rnd % uint64(n))
			}
			for i := range linOps {
				in := linInput{key: fmt.Sprintf("lin/%d", next(linKeys)), value: fmt.Sprintf("w%d-%d", w, i)}
				switch r := next(20); {
				case r < 5:
					in.op = linGet
				case r < 10:
					in.op = linCreate
				case r < 16:
					in.op, in.rev = linCAS, seenRev[in.key] // sometimes 0, sometimes stale
				default:
					in.op, in.rev = linDelete, max(seenRev[in.key], 1)
				}
				call := clock.Add(1)
				out, err := linCall(t, st, in)
				ret := clock.Add(1)
				if err != nil {
					t.Errorf("worker %d: %v(%q, rev %d): unexpected error %v", w, in.op, in.key, in.rev, err)
					return
				}
				if out.rev > 0 {
					seenRev[in.key] = out.rev
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: w, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	res, info := porcupine.CheckOperationsVerbose(linModel, history, 10*time.Second)
	switch res {
	case porcupine.Illegal:
		t.Errorf("history of %d operations on %d keys is not linearizable", len(history), linKeys)
		for _, part := range info.PartialLinearizationsOperations() {
			for _, lin := range part {
				if len(lin) > 0 {
					t.Logf("longest linearizable prefix ends with: %s", linModel.DescribeOperation(lin[len(lin)-1].Input, lin[len(lin)-1].Output))
				}
			}
		}
	case porcupine.Unknown:
		t.Logf("linearizability check of %d operations timed out; treated as passing", len(history))
	}
}
