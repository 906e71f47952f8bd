package backendtest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/backendtest"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRealTime runs the suite with Elapse nil, as for a store that judges
// expiry on real time, so that its polling paths run too. The TTL leaves the
// suite's 20ms keep-alive poll a wide margin.
func TestRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for real TTLs")
	}
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Store {
			s := memstore.New()
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		TTL: 300 * time.Millisecond,
	})
}

// brokenEnv names the defect TestBrokenStore gives its store; unset, that
// test skips. TestSuiteCatches sets it in a child process.
const brokenEnv = "BACKENDTEST_BROKEN"

// defects maps each defect to the subtest of Run that must catch it.
var defects = map[string]string{
	"blind-cas":        "Conflicts",
	"racy-create":      "CreateIfAbsent/Race",
	"keepalive-bumps":  "KeepAlive/KeepsRevisionAndValue",
	"no-keepalive":     "KeepAlive/ExtendsExpiry",
	"unsorted-list":    "List/PrefixAndOrder",
	"list-expired":     "Expiry/AbsentForEveryOperation",
	"panic-empty-key":  "BadInput",
	"reused-token":     "Revisions/UpdateDeleteRecreate",
	"leaky-watch":      "Watch/OrderAndPrefix",
	"txn-not-atomic":   "Txn/AllOrNothing",
	"declares-no-txn":  "Capabilities/Declared",
	"open-after-close": "Closed",
	"shared-value":     "Values/CopiedInAndOut",
	"lost-update":      "CompareAndSet/NoLostUpdate",
	"stale-get":        "Linearizable",
	"silent-expiry":    "Watch/ReportsExpiry",
	"unbounded-ttl":    "TTLBound",
}

// TestSuiteCatches proves the suite can fail: each defect, planted in a
// memstore wrapper, must fail the subtest meant to catch it.
func TestSuiteCatches(t *testing.T) {
	names := make([]string, 0, len(defects))
	for name := range defects {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenStore$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("suite over a store with defect %q: err = %v, want a failing run; output:\n%s", name, err, out)
			}
			if want := "--- FAIL: TestBrokenStore/" + defects[name] + " "; !strings.Contains(string(out), want) {
				t.Errorf("suite over a store with defect %q did not fail %q; output:\n%s", name, defects[name], out)
			}
		})
	}
}

// TestBrokenStore runs the suite over a store with the defect named in
// BACKENDTEST_BROKEN; it is run by TestSuiteCatches and must fail.
func TestBrokenStore(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip(brokenEnv + " is not set: run by TestSuiteCatches")
	}
	if _, ok := defects[name]; !ok {
		t.Fatalf("unknown defect %q", name)
	}
	clk := clocktest.New(time.Time{})
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Store {
			s := memstore.New(memstore.WithClock(clk))
			t.Cleanup(func() { _ = s.Close() })
			b := &broken{Store: s, defect: name, created: map[string]backends.Entry{}, tokens: map[string]int64{}, reads: map[string]backends.Entry{}, deleted: map[string]int64{}}
			if name == "declares-no-txn" {
				return noTxn{b}
			}
			return b
		},
		Elapse: clk.Add,
	})
}

// broken wraps a memstore with one defect.
type broken struct {
	*memstore.Store
	defect string

	mu      sync.Mutex
	closed  bool
	created map[string]backends.Entry // list-expired: entries as created
	tokens  map[string]int64          // reused-token: first token per key
	reads   map[string]backends.Entry // shared-value, stale-get: what Get handed out
	gets    int                       // stale-get: reads so far
	deleted map[string]int64          // silent-expiry: revisions deleted through the wrapper
}

// noTxn declares txn (through Capabilities) but has no Txn method.
type noTxn struct{ backends.Store }

func (b *broken) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	switch b.defect {
	case "racy-create":
		// Check, then write: two creators can both see the key absent.
		if _, err := b.Store.Get(ctx, key); err == nil {
			return b.Store.CreateIfAbsent(ctx, key, value, ttl)
		}
		runtime.Gosched()
		e, err := b.Store.CreateIfAbsent(ctx, key, value, ttl)
		var ce *backends.ConflictError
		if errors.As(err, &ce) && ce.Found {
			return b.Store.CompareAndSet(ctx, key, ce.Current.Revision, value, ttl)
		}
		return e, err
	case "open-after-close":
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if closed {
			return backends.Entry{Key: key, Value: value, Revision: 1, CreateRevision: 1}, nil
		}
	}
	if b.defect == "unbounded-ttl" && ttl > backends.MaxTTL {
		ttl = 0 // a TTL it cannot keep, written as none
	}
	e, err := b.Store.CreateIfAbsent(ctx, key, value, ttl)
	if err != nil {
		return e, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.created[key] = e
	if b.defect == "reused-token" {
		if first, ok := b.tokens[key]; ok {
			e.CreateRevision = first
		} else {
			b.tokens[key] = e.CreateRevision
		}
	}
	return e, nil
}

func (b *broken) CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	switch b.defect {
	case "blind-cas":
		if cur, err := b.Store.Get(ctx, key); err == nil && rev > 0 {
			rev = cur.Revision
		}
	case "lost-update":
		// Check, then write over whatever is there by then.
		if cur, err := b.Store.Get(ctx, key); err == nil && rev > 0 && cur.Revision == rev {
			runtime.Gosched()
			if now, err := b.Store.Get(ctx, key); err == nil {
				rev = now.Revision
			}
		}
	}
	return b.Store.CompareAndSet(ctx, key, rev, value, ttl)
}

func (b *broken) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	switch b.defect {
	case "keepalive-bumps":
		cur, err := b.Store.Get(ctx, key)
		if err != nil || cur.Revision != rev {
			return b.Store.KeepAlive(ctx, key, rev, ttl)
		}
		return b.Store.CompareAndSet(ctx, key, rev, cur.Value, ttl)
	case "no-keepalive":
		cur, err := b.Store.Get(ctx, key)
		if err == nil && cur.Revision == rev && ttl > 0 {
			cur.TTL = ttl
			return cur, nil
		}
	}
	return b.Store.KeepAlive(ctx, key, rev, ttl)
}

func (b *broken) Get(ctx context.Context, key string) (backends.Entry, error) {
	if b.defect == "panic-empty-key" && key == "" {
		panic("empty key")
	}
	e, err := b.Store.Get(ctx, key)
	if b.defect == "shared-value" && err == nil {
		// Hands every reader the same slice while the revision stands.
		b.mu.Lock()
		defer b.mu.Unlock()
		if c, ok := b.reads[key]; ok && c.Revision == e.Revision {
			return c, nil
		}
		b.reads[key] = e
	}
	if b.defect == "stale-get" {
		// Every other read answers with what the previous read saw.
		b.mu.Lock()
		defer b.mu.Unlock()
		b.gets++
		prev, ok := b.reads[key]
		if err == nil {
			b.reads[key] = e
		}
		if ok && b.gets%2 == 0 {
			return prev, nil
		}
	}
	return e, err
}

func (b *broken) List(ctx context.Context, prefix string) ([]backends.Entry, error) {
	es, err := b.Store.List(ctx, prefix)
	switch b.defect {
	case "unsorted-list":
		slices.Reverse(es)
	case "list-expired":
		// Lists what was created, expired or not (deletes are honoured).
		b.mu.Lock()
		defer b.mu.Unlock()
		for k, e := range b.created {
			if strings.HasPrefix(k, prefix) && !slices.ContainsFunc(es, func(x backends.Entry) bool { return x.Key == k }) && e.TTL > 0 {
				es = append(es, e)
			}
		}
		slices.SortFunc(es, func(a, c backends.Entry) int { return strings.Compare(a.Key, c.Key) })
	}
	return es, err
}

func (b *broken) CompareAndDelete(ctx context.Context, key string, rev int64) error {
	err := b.Store.CompareAndDelete(ctx, key, rev)
	if err == nil {
		b.mu.Lock()
		delete(b.created, key)
		b.deleted[key] = rev
		b.mu.Unlock()
	}
	return err
}

func (b *broken) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	if b.defect == "leaky-watch" {
		prefix = ""
	}
	ch, err := b.Store.Watch(ctx, prefix)
	if err != nil || b.defect != "silent-expiry" {
		return ch, err
	}
	// Declares expiry events (memstore does) but passes on only the
	// deletes made through CompareAndDelete.
	out := make(chan backends.Event, cap(ch))
	go func() {
		defer close(out)
		for ev := range ch {
			if ev.Kind == backends.EventDelete {
				b.mu.Lock()
				rev, ok := b.deleted[ev.Entry.Key]
				b.mu.Unlock()
				if !ok || rev != ev.Entry.Revision {
					continue
				}
			}
			out <- ev
		}
	}()
	return out, nil
}

func (b *broken) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	if b.defect == "txn-not-atomic" {
		// Applies the writes one by one, then checks.
		res, err := b.Store.Txn(ctx, nil, ops)
		if err != nil {
			return res, err
		}
		return b.Store.Txn(ctx, conds, nil)
	}
	return b.Store.Txn(ctx, conds, ops)
}

func (b *broken) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return b.Store.Close()
}
