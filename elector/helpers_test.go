package elector_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/lifecycle"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// The timings of most tests: a deadline is acquired-at + 9.9s, and the term
// ends lead (the default CancelLead, TTL/100) before it, at 9.8s.
const (
	lead           = ttl / 100
	ttl            = 10 * time.Second
	renewPeriod    = 3 * time.Second
	renewTimeout   = time.Second
	margin         = 100 * time.Millisecond
	retryPeriod    = time.Second
	drainTimeout   = 2 * time.Second
	releaseTimeout = time.Second
	key            = "leader"
)

func baseConfig(clk clock.Clock, id string) elector.Config {
	return elector.Config{
		Key: key, Identity: id,
		TTL: ttl, RenewPeriod: renewPeriod, RenewTimeout: renewTimeout, SafetyMargin: margin,
		RetryPeriod: retryPeriod, DisableJitter: true,
		DrainTimeout: drainTimeout, ReleaseTimeout: releaseTimeout,
		Clock: clk,
	}
}

// loggedConfig is baseConfig for id with rec recording the callbacks, o
// the trace hooks, and logs the log.
func loggedConfig(t *testing.T, clk clock.Clock, id string) (cfg elector.Config, rec, o *electortest.Recorder, logs *logBuffer) {
	t.Helper()
	rec, o, logs = electortest.NewRecorder(t, nil), electortest.NewRecorder(t, nil), &logBuffer{}
	cfg = baseConfig(clk, id)
	rec.InstallCallbacks(&cfg)
	o.InstallTrace(&cfg)
	cfg.Logger = logs.logger()
	return cfg, rec, o, logs
}

// barrier bounds a wait in real time, so a broken test fails instead of
// hanging.
func barrier(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually returns once cond holds, checking it again at every change of
// srcs (recorders, fault lockers, log buffers); the test fails if ctx ends
// first.
func eventually(t *testing.T, ctx context.Context, what string, cond func() bool, srcs ...electortest.Source) {
	t.Helper()
	electortest.Await(t, ctx, what, cond, srcs...)
}

// eventuallyOrArmed is eventually that also returns once n timers are armed
// on clk.
func eventuallyOrArmed(t *testing.T, ctx context.Context, clk *clocktest.Clock, n int, what string, cond func() bool, srcs ...electortest.Source) {
	t.Helper()
	if err := electortest.UntilOrArmed(ctx, clk, n, what, cond, srcs...); err != nil {
		t.Fatal(err)
	}
}

// lockerKinds are the Lockers the single-elector tests run over: the
// in-test fake and memstore under the generic StoreLocker.
var lockerKinds = []string{"fake", "memstore"}

// newLocker returns a Locker of kind judging expiry by clk. Neither
// watches the claim, so neither arms timers of its own on clk.
func newLocker(t *testing.T, clk clock.Clock, kind string) backends.Locker {
	t.Helper()
	switch kind {
	case "fake":
		return newFakeLocker(clk)
	case "memstore":
		store := memstore.New(memstore.WithClock(clk))
		t.Cleanup(func() { store.Close() }) // after the electors stop
		sl, err := backends.NewLocker(store)
		if err != nil {
			t.Fatal(err)
		}
		return electortest.Wrap(sl) // hides the claim watch
	}
	t.Fatalf("unknown locker kind %q", kind)
	return nil
}

// startElector makes and starts an Elector, and stops it when the test ends.
func startElector(t *testing.T, l backends.Locker, cfg elector.Config) *elector.Elector {
	t.Helper()
	e, err := elector.New(l, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { stopAndWait(t, e) })
	return e
}

func stopAndWait(t *testing.T, e *elector.Elector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Stop(ctx); err != nil {
		t.Errorf("Stop: %v", err)
	}
	select {
	case <-e.Done():
	case <-ctx.Done():
		t.Errorf("Done not closed after Stop")
	}
	if got := e.State(); got != lifecycle.Stopped {
		t.Errorf("State() after Stop = %v, want stopped", got)
	}
}

// logBuffer is a slog handler target safe for concurrent use; it is an
// electortest.Source that changes at every write.
type logBuffer struct {
	sig electortest.Signal
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	n, err := b.buf.Write(p)
	b.mu.Unlock()
	b.sig.Notify()
	return n, err
}

func (b *logBuffer) Changed() <-chan struct{} { return b.sig.Changed() }

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
