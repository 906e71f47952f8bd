package faults

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
)

// Op is a set of store operations a fault applies to.
type Op uint16

// The operations of backends.Store, Watcher and Txner.
const (
	OpGet Op = 1 << iota
	OpList
	OpCreate // CreateIfAbsent
	OpCompareAndSet
	OpCompareAndDelete
	OpKeepAlive
	OpWatch
	OpTxn
)

// Sets of operations.
const (
	Reads  = OpGet | OpList
	Writes = OpCreate | OpCompareAndSet | OpCompareAndDelete | OpKeepAlive | OpTxn
	AllOps = Reads | Writes | OpWatch
)

var opNames = []struct {
	op   Op
	name string
}{
	{OpGet, "get"}, {OpList, "list"}, {OpCreate, "create"}, {OpCompareAndSet, "cas"},
	{OpCompareAndDelete, "delete"}, {OpKeepAlive, "keepalive"}, {OpWatch, "watch"}, {OpTxn, "txn"},
}

// String lists the operations in o, e.g. "create|keepalive".
func (o Op) String() string {
	if o == 0 {
		return "none"
	}
	var parts []string
	for _, n := range opNames {
		if o&n.op != 0 {
			parts = append(parts, n.name)
		}
	}
	if rest := o &^ AllOps; rest != 0 {
		parts = append(parts, fmt.Sprintf("0x%x", uint16(rest)))
	}
	return strings.Join(parts, "|")
}

// Stage says where in a call a fault acts.
type Stage int

const (
	// BeforeCall acts before the call reaches the inner store; nothing has
	// been applied yet.
	BeforeCall Stage = iota + 1
	// AfterCall acts after the inner store answered; a write has been applied
	// (or refused), and the answer is on its way back.
	AfterCall
)

func (s Stage) String() string {
	switch s {
	case BeforeCall:
		return "before"
	case AfterCall:
		return "after"
	}
	return fmt.Sprintf("stage(%d)", int(s))
}

// PartitionMode is how a partitioned call fails.
type PartitionMode int

const (
	// PartitionFail makes every call fail at once with an error wrapping
	// backends.ErrUnavailable (a refused connection).
	PartitionFail PartitionMode = iota + 1
	// PartitionBlock makes every call hang until its context is done or the
	// partition is removed, then fail with an error wrapping
	// backends.ErrUnavailable (packets silently dropped).
	PartitionBlock
)

type kind int

const (
	kindFail kind = iota + 1
	kindDelay
	kindDrop
	kindPartition
	kindGate
	kindStale
)

// Store is a backends.Store that passes calls to an inner store and injects
// the faults installed on it. Make one with Wrap. It is safe for concurrent
// use, and faults may be installed and removed while calls are in flight.
//
// Store has Watch and Txn methods whatever the inner store is; Capabilities
// declares CapWatch and CapTxn only when the inner store declares them and
// implements Watcher and Txner, and the methods fail with an error wrapping
// backends.ErrUnsupported otherwise.
type Store struct {
	inner backends.Store
	clk   clock.Clock
	caps  backends.Capabilities

	mu     sync.Mutex
	faults []*Fault   // guarded by mu; live faults in installation order
	calls  map[Op]int // guarded by mu; calls received, per operation
}

var (
	_ backends.Store   = (*Store)(nil)
	_ backends.Watcher = (*Store)(nil)
	_ backends.Txner   = (*Store)(nil)
)

// Wrap returns a Store over inner with no fault installed. Delays run on clk;
// nil means the real clock.
func Wrap(inner backends.Store, clk clock.Clock) *Store {
	if clk == nil {
		clk = clock.New()
	}
	caps := inner.Capabilities()
	if _, ok := inner.(backends.Watcher); !ok {
		caps.Atomic &^= backends.CapWatch
		caps.ExpiryEvents = false
	}
	if _, ok := inner.(backends.Txner); !ok {
		caps.Atomic &^= backends.CapTxn
	}
	return &Store{inner: inner, clk: clk, caps: caps, calls: make(map[Op]int)}
}

// Inner returns the wrapped store.
func (s *Store) Inner() backends.Store { return s.inner }

// Calls returns how many calls of the operations in ops the wrapper has
// received, faulted or not.
func (s *Store) Calls(ops Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for op, c := range s.calls {
		if op&ops != 0 {
			n += c
		}
	}
	return n
}

// Clear removes every fault, as Remove on each would.
func (s *Store) Clear() {
	s.mu.Lock()
	fs := s.faults
	s.faults = nil
	s.mu.Unlock()
	for _, f := range fs {
		f.Remove()
	}
}

// Fault is one installed fault. Remove it to stop it.
type Fault struct {
	s     *Store
	kind  kind
	ops   Op
	stage Stage
	err   error
	delay time.Duration
	mode  PartitionMode
	snap  []backends.Entry // kindStale: sorted by key
	taken time.Time        // kindStale: when snap was read, on the wrapper's clock

	removed    chan struct{} // closed by Remove
	removeOnce sync.Once
	heldSignal chan struct{} // kindGate: one token whenever held grows

	left    int           // guarded by s.mu; calls it still acts on, <0 = no limit
	hits    int           // guarded by s.mu
	holding int           // guarded by s.mu; calls blocked in the fault now
	changed chan struct{} // guarded by s.mu; closed when holding changes
	held    []*Call       // guarded by s.mu; kindGate: calls waiting for Next
}

func (s *Store) install(f *Fault, times int) *Fault {
	f.s = s
	f.removed = make(chan struct{})
	f.left = times
	if times <= 0 {
		f.left = -1
	}
	if f.ops == 0 {
		f.ops = AllOps
	}
	s.mu.Lock()
	s.faults = append(s.faults, f)
	s.mu.Unlock()
	return f
}

// Remove uninstalls f. Calls f is holding (partitions, delays, gates) are
// woken: a partitioned call fails, a delayed or gated call goes on. Remove
// is idempotent.
func (f *Fault) Remove() {
	f.s.mu.Lock()
	f.s.faults = slices.DeleteFunc(f.s.faults, func(g *Fault) bool { return g == f })
	f.s.mu.Unlock()
	f.removeOnce.Do(func() { close(f.removed) })
}

// Hits returns how many calls f has acted on.
func (f *Fault) Hits() int {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return f.hits
}

// Holding returns how many calls are blocked in f right now: waiting out a
// delay, hanging in a partition, or held at a gate.
func (f *Fault) Holding() int {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return f.holding
}

// AwaitHolding returns nil once at least n calls are blocked in f, and an
// error wrapping ctx.Err() if ctx is done first. It is the barrier a test
// waits on before it moves a clock or heals a partition, knowing the call is
// in flight.
func (f *Fault) AwaitHolding(ctx context.Context, n int) error {
	for {
		f.s.mu.Lock()
		have := f.holding
		if f.changed == nil {
			f.changed = make(chan struct{})
		}
		changed := f.changed
		f.s.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("faults: waiting for %d calls blocked in a fault on %s, have %d: %w", n, f.ops, have, ctx.Err())
		}
	}
}

// block counts a call in or out of f (delta +1 or -1) and wakes
// AwaitHolding.
func (f *Fault) block(delta int) {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	f.holding += delta
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
}

// Spent reports whether f was limited to a number of calls and has acted on
// all of them.
func (f *Fault) Spent() bool {
	f.s.mu.Lock()
	defer f.s.mu.Unlock()
	return f.left == 0
}

// Fail makes the next times calls of ops (every call until removed, if times
// <= 0) fail with an error wrapping err, without reaching the inner store.
// Pass a backends sentinel (ErrUnavailable, ErrThrottled, ErrPermission,
// ErrMissingResource, ...) to choose the class of the error.
func (s *Store) Fail(ops Op, times int, err error) *Fault {
	return s.install(&Fault{kind: kindFail, ops: ops, stage: BeforeCall, err: err}, times)
}

// Delay makes every call of ops wait d on the wrapper's clock before it
// reaches the inner store. A call whose context ends while it waits fails
// without reaching the inner store.
func (s *Store) Delay(ops Op, d time.Duration) *Fault {
	return s.install(&Fault{kind: kindDelay, ops: ops, stage: BeforeCall, delay: d}, 0)
}

// DelayResponse makes every call of ops wait d on the wrapper's clock after
// the inner store answered. A call whose context ends while it waits fails
// with an error wrapping backends.ErrUnavailable, though its write was
// applied: the outcome is unknown to the caller. Watch is not delayed.
func (s *Store) DelayResponse(ops Op, d time.Duration) *Fault {
	return s.install(&Fault{kind: kindDelay, ops: ops &^ OpWatch, stage: AfterCall, delay: d}, 0)
}

// DropResponse lets the next times calls of ops (every call until removed,
// if times <= 0) reach the inner store and then fails them with an error
// wrapping backends.ErrUnavailable: a write is applied, but the caller does
// not know it. Watch responses are never dropped.
func (s *Store) DropResponse(ops Op, times int) *Fault {
	return s.install(&Fault{kind: kindDrop, ops: ops &^ OpWatch, stage: AfterCall}, times)
}

// Partition cuts the wrapper off from the inner store: every call fails (or
// hangs, then fails) as mode says, until the fault is removed.
func (s *Store) Partition(mode PartitionMode) *Fault {
	return s.install(&Fault{kind: kindPartition, ops: AllOps, stage: BeforeCall, mode: mode}, 0)
}

// StaleReads reads every live entry of the inner store now and answers Get
// and List from that snapshot until the fault is removed. Writes still reach
// the inner store. Remaining times in the snapshot run down on the wrapper's
// clock and may go to zero or below; such entries are still returned.
func (s *Store) StaleReads(ctx context.Context) (*Fault, error) {
	entries, err := s.inner.List(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("faults: snapshot for stale reads: %w", err)
	}
	snap := make([]backends.Entry, len(entries))
	for i, e := range entries {
		e.Value = slices.Clone(e.Value)
		snap[i] = e
	}
	slices.SortFunc(snap, func(a, b backends.Entry) int { return strings.Compare(a.Key, b.Key) })
	return s.install(&Fault{kind: kindStale, ops: Reads, snap: snap, taken: s.clk.Now()}, 0), nil
}

// Gate holds calls at one stage until the test lets them go.
type Gate struct {
	*Fault
}

// Pause installs a gate that holds the next times calls of ops (every call
// until removed, if times <= 0) at stage. Take each held call with Next and
// let it go with Release or Fail. Removing the gate lets every call it holds
// go on. A held call whose context ends returns at once; at AfterCall its
// error wraps backends.ErrUnavailable. Watch is held only BeforeCall.
func (s *Store) Pause(ops Op, stage Stage, times int) *Gate {
	if stage == AfterCall {
		ops &^= OpWatch
	}
	f := &Fault{kind: kindGate, ops: ops, stage: stage, heldSignal: make(chan struct{}, 1)}
	return &Gate{s.install(f, times)}
}

// Next waits until a call is held at the gate and returns it. Calls are
// returned in the order they arrived.
func (g *Gate) Next(ctx context.Context) (*Call, error) {
	for {
		g.s.mu.Lock()
		if len(g.held) > 0 {
			c := g.held[0]
			g.held = g.held[1:]
			g.s.mu.Unlock()
			return c, nil
		}
		g.s.mu.Unlock()
		select {
		case <-g.heldSignal:
		case <-ctx.Done():
			return nil, fmt.Errorf("faults: waiting for a call at the %s gate on %s: %w", g.stage, g.ops, ctx.Err())
		}
	}
}

// Call is a call held at a gate.
type Call struct {
	Op    Op
	Key   string // the key; the prefix for List and Watch; the first key for Txn
	Stage Stage

	resume chan error // buffered; the first decision wins
}

// Release lets the call go on.
func (c *Call) Release() { c.decide(nil) }

// Fail makes the call return an error wrapping err. At AfterCall the inner
// store has already applied the call.
func (c *Call) Fail(err error) {
	if err == nil {
		err = backends.ErrUnavailable
	}
	c.decide(err)
}

func (c *Call) decide(err error) {
	select {
	case c.resume <- err:
	default:
	}
}

// matching returns the live faults acting at stage on op, in installation
// order.
func (s *Store) matching(op Op, stage Stage) []*Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Fault
	for _, f := range s.faults {
		if f.stage == stage && f.ops&op != 0 {
			out = append(out, f)
		}
	}
	return out
}

// take counts a call against f; false if f is spent or removed.
func (s *Store) take(f *Fault) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.left == 0 || !slices.Contains(s.faults, f) {
		return false
	}
	f.hits++
	if f.left > 0 {
		f.left--
		if f.left == 0 && f.kind != kindStale {
			s.faults = slices.DeleteFunc(s.faults, func(g *Fault) bool { return g == f })
		}
	}
	return true
}

// stage runs the faults of one stage for a call. A non-nil error ends the
// call with it.
func (s *Store) stage(ctx context.Context, op Op, key string, st Stage) error {
	for _, f := range s.matching(op, st) {
		if f.kind == kindStale || !s.take(f) {
			continue
		}
		if err := f.act(ctx, op, key); err != nil {
			return err
		}
	}
	return nil
}

func (f *Fault) act(ctx context.Context, op Op, key string) error {
	switch f.kind {
	case kindFail:
		return fmt.Errorf("faults: %s %q: injected: %w", op, key, f.err)
	case kindDrop:
		return fmt.Errorf("faults: %s %q: response lost after the call: %w", op, key, backends.ErrUnavailable)
	case kindPartition:
		if f.mode == PartitionBlock {
			f.block(+1)
			defer f.block(-1)
			select {
			case <-ctx.Done():
				return f.cut(op, key, ctx.Err())
			case <-f.removed:
			}
		}
		return fmt.Errorf("faults: %s %q: partitioned: %w", op, key, backends.ErrUnavailable)
	case kindDelay:
		if f.delay <= 0 {
			return nil
		}
		t := f.s.clk.Timer(f.delay)
		defer t.Stop()
		f.block(+1)
		defer f.block(-1)
		select {
		case <-t.C:
		case <-f.removed:
		case <-ctx.Done():
			return f.cut(op, key, ctx.Err())
		}
		return nil
	case kindGate:
		return f.hold(ctx, op, key)
	}
	return nil
}

// cut is the error of a call whose context ended inside the wrapper.
func (f *Fault) cut(op Op, key string, cause error) error {
	return fmt.Errorf("faults: %s %q: cut off %s the call: %w: %w", op, key, f.stage, backends.ErrUnavailable, cause)
}

func (f *Fault) hold(ctx context.Context, op Op, key string) error {
	c := &Call{Op: op, Key: key, Stage: f.stage, resume: make(chan error, 1)}
	f.s.mu.Lock()
	f.held = append(f.held, c)
	f.s.mu.Unlock()
	f.block(+1)
	defer f.block(-1)
	select {
	case f.heldSignal <- struct{}{}:
	default:
	}
	select {
	case err := <-c.resume:
		if err != nil {
			return fmt.Errorf("faults: %s %q: failed at the %s gate: %w", op, key, f.stage, err)
		}
		return nil
	case <-f.removed:
		return nil
	case <-ctx.Done():
		f.s.mu.Lock()
		f.held = slices.DeleteFunc(f.held, func(h *Call) bool { return h == c })
		f.s.mu.Unlock()
		return f.cut(op, key, ctx.Err())
	}
}

// stale returns the live stale-read fault, if any, counting the read.
func (s *Store) stale() *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.faults) - 1; i >= 0; i-- {
		if f := s.faults[i]; f.kind == kindStale {
			f.hits++
			return f
		}
	}
	return nil
}

func (f *Fault) aged(e backends.Entry) backends.Entry {
	e.Value = slices.Clone(e.Value)
	if e.TTL > 0 {
		e.Remaining -= f.s.clk.Since(f.taken)
	}
	return e
}

// run passes one call through the faults and the inner store.
func run[T any](s *Store, ctx context.Context, op Op, key string, call func(context.Context) (T, error)) (T, error) {
	var zero T
	s.mu.Lock()
	s.calls[op]++
	s.mu.Unlock()
	if err := s.stage(ctx, op, key, BeforeCall); err != nil {
		return zero, err
	}
	v, err := call(ctx)
	if ferr := s.stage(ctx, op, key, AfterCall); ferr != nil {
		return zero, ferr
	}
	return v, err
}

// Capabilities implements backends.Store.
func (s *Store) Capabilities() backends.Capabilities { return s.caps }

// Get implements backends.Store.
func (s *Store) Get(ctx context.Context, key string) (backends.Entry, error) {
	return run(s, ctx, OpGet, key, func(ctx context.Context) (backends.Entry, error) {
		if f := s.stale(); f != nil {
			i, ok := slices.BinarySearchFunc(f.snap, key, func(e backends.Entry, k string) int { return strings.Compare(e.Key, k) })
			if !ok {
				return backends.Entry{}, fmt.Errorf("faults: get %q from a stale snapshot: %w", key, backends.ErrNotFound)
			}
			return f.aged(f.snap[i]), nil
		}
		return s.inner.Get(ctx, key)
	})
}

// List implements backends.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]backends.Entry, error) {
	return run(s, ctx, OpList, prefix, func(ctx context.Context) ([]backends.Entry, error) {
		if f := s.stale(); f != nil {
			var out []backends.Entry
			for _, e := range f.snap {
				if strings.HasPrefix(e.Key, prefix) {
					out = append(out, f.aged(e))
				}
			}
			return out, nil
		}
		return s.inner.List(ctx, prefix)
	})
}

// CreateIfAbsent implements backends.Store.
func (s *Store) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	return run(s, ctx, OpCreate, key, func(ctx context.Context) (backends.Entry, error) {
		return s.inner.CreateIfAbsent(ctx, key, value, ttl)
	})
}

// CompareAndSet implements backends.Store.
func (s *Store) CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	return run(s, ctx, OpCompareAndSet, key, func(ctx context.Context) (backends.Entry, error) {
		return s.inner.CompareAndSet(ctx, key, rev, value, ttl)
	})
}

// CompareAndDelete implements backends.Store.
func (s *Store) CompareAndDelete(ctx context.Context, key string, rev int64) error {
	_, err := run(s, ctx, OpCompareAndDelete, key, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.inner.CompareAndDelete(ctx, key, rev)
	})
	return err
}

// KeepAlive implements backends.Store.
func (s *Store) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	return run(s, ctx, OpKeepAlive, key, func(ctx context.Context) (backends.Entry, error) {
		return s.inner.KeepAlive(ctx, key, rev, ttl)
	})
}

// Watch implements backends.Watcher. It fails with an error wrapping
// backends.ErrUnsupported unless the inner store declares and implements
// watch.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	if !s.caps.Has(backends.CapWatch) {
		return nil, fmt.Errorf("faults: watch %q: inner store %T cannot watch: %w", prefix, s.inner, backends.ErrUnsupported)
	}
	return run(s, ctx, OpWatch, prefix, func(ctx context.Context) (<-chan backends.Event, error) {
		return s.inner.(backends.Watcher).Watch(ctx, prefix)
	})
}

// Txn implements backends.Txner. It fails with an error wrapping
// backends.ErrUnsupported unless the inner store declares and implements
// txn.
func (s *Store) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	key := ""
	switch {
	case len(ops) > 0:
		key = ops[0].Key
	case len(conds) > 0:
		key = conds[0].Key
	}
	if !s.caps.Has(backends.CapTxn) {
		return backends.TxnResult{}, fmt.Errorf("faults: txn %q: inner store %T cannot run transactions: %w", key, s.inner, backends.ErrUnsupported)
	}
	return run(s, ctx, OpTxn, key, func(ctx context.Context) (backends.TxnResult, error) {
		return s.inner.(backends.Txner).Txn(ctx, conds, ops)
	})
}

// Close implements backends.Store. It closes the inner store.
func (s *Store) Close() error { return s.inner.Close() }
