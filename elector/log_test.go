package elector_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/lifecycle"
)

// jsonLines parses the JSON log lines in b.
func jsonLines(t *testing.T, b *logBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if line == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// findLog returns the first line with msg, or nil.
func findLog(lines []map[string]any, msg string) map[string]any {
	for _, m := range lines {
		if m["msg"] == msg {
			return m
		}
	}
	return nil
}

// TestJSONLogsReadAsNames checks that with slog's JSON handler, states,
// reasons and error classes read as names and durations as "1s", not as
// numbers and nanoseconds; and a follower logs the change of leader at INFO.
func TestJSONLogsReadAsNames(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	fk := newFakeLocker(clk)
	fl := electortest.Wrap(fk)
	fl.Set(electortest.Acquire, &electortest.Fault{Once: true, Err: fmt.Errorf("test: down: %w", backends.ErrUnavailable)})
	ra, logsA := electortest.NewRecorder(t, nil), &logBuffer{}
	cfgA := baseConfig(clk, "a")
	ra.InstallCallbacks(&cfgA)
	cfgA.Logger = slog.New(slog.NewJSONHandler(logsA, nil)) // INFO and up
	a := startElector(t, fl, cfgA)
	eventually(t, ctx, "the failed attempt logged", func() bool { return strings.Contains(logsA.String(), "acquire failed") }, logsA)
	if err := clk.BlockUntil(ctx, 1); err != nil { // the retry timer
		t.Fatal(err)
	}
	clk.Add(retryPeriod)
	tm := ra.WaitElected(t, ctx, 1)

	logsB := &logBuffer{}
	cfgB := baseConfig(clk, "b")
	cfgB.Logger = slog.New(slog.NewJSONHandler(logsB, nil))
	startElector(t, fk, cfgB)
	eventually(t, ctx, "b logs the leader", func() bool { return strings.Contains(logsB.String(), "elector: new leader") }, logsB)
	stopAndWait(t, a)

	lines := jsonLines(t, logsA)
	for _, w := range []struct{ msg, key, want string }{
		{"elector: acquire failed", "class", "transient"},
		{"elector: acquire failed", "retry_in", retryPeriod.String()},
		{"elector: elected", "state", "leader"},
		{"elector: elected", "ttl", ttl.String()},
		{"elector: demoted", "reason", "stopped"},
		{"elector: demoted", "state", "demoting"},
		{"elector: stopped", "state", "stopped"},
	} {
		m := findLog(lines, w.msg)
		if m == nil {
			t.Errorf("no %q line in:\n%s", w.msg, logsA.String())
			continue
		}
		if got := fmt.Sprint(m[w.key]); got != w.want {
			t.Errorf("%q: %s = %s, want %q", w.msg, w.key, got, w.want)
		}
	}
	m := findLog(jsonLines(t, logsB), "elector: new leader")
	if got, want := fmt.Sprint(m["leader"]), fmt.Sprint(map[string]any{"id": a.Holder().ID, "nonce": a.Holder().Nonce}); got != want {
		t.Errorf("b's new leader line: leader = %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(m["token"]), fmt.Sprint(tm.Token); got != want {
		t.Errorf("b's new leader line: token = %s, want %s", got, want)
	}
}

// stopSpy is a slog handler that notes, when "elector: stopped" is logged,
// whether the leader's OnElected had returned by then.
type stopSpy struct {
	slog.Handler
	returned      *atomic.Bool
	logged        chan struct{}
	afterReturned *atomic.Bool
}

func (s stopSpy) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "elector: stopped" {
		s.afterReturned.Store(s.returned.Load())
		close(s.logged)
	}
	return s.Handler.Handle(ctx, r)
}

func (s stopSpy) WithAttrs(as []slog.Attr) slog.Handler {
	s.Handler = s.Handler.WithAttrs(as)
	return s
}

// TestStoppedLoggedWhenTrue checks that "elector: stopped" is logged once
// every callback has returned, not while a stuck OnElected still runs.
func TestStoppedLoggedWhenTrue(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec := electortest.NewRecorder(t, nil)
	var returned, afterReturned atomic.Bool
	allow := make(chan struct{})
	rec.SetWork(func(ctx context.Context, _ elector.Term) {
		<-ctx.Done()
		<-allow // stuck work that ignores its context
		returned.Store(true)
	})
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	logged := make(chan struct{})
	cfg.Logger = slog.New(stopSpy{Handler: slog.NewTextHandler(io.Discard, nil), returned: &returned, logged: logged, afterReturned: &afterReturned})
	e, err := elector.New(newFakeLocker(clk), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.WaitElected(t, ctx, 1)

	// Stop with a context already done: it ends the term and returns at
	// once, and the only timer left is the drain's.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Stop(done); err == nil {
		t.Errorf("Stop(done context) = nil while OnElected is stuck, want an error")
	}
	// Step the clock until the drain gives up (the claim is left to expire)
	// and the state becomes stopped.
	for i := 0; e.State() != lifecycle.Stopped; i++ {
		if i == 10 {
			t.Fatalf("state %v after %d drain timeouts, want stopped", e.State(), i)
		}
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Add(drainTimeout)
		eventuallyOrArmed(t, ctx, clk, 1, "stopped", func() bool { return e.State() == lifecycle.Stopped }, rec)
	}
	select {
	case <-logged:
		t.Errorf("\"elector: stopped\" logged while OnElected still runs")
	default:
	}
	close(allow)
	<-e.Done()
	select {
	case <-logged:
	default:
		t.Fatalf("\"elector: stopped\" not logged by the time Done is closed")
	}
	if !afterReturned.Load() {
		t.Errorf("\"elector: stopped\" logged before OnElected returned")
	}
}
