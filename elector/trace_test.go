package elector_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

// TestTraceArguments checks that the hooks carry what a metric needs: the
// term, the error class, the round trip and the time left.
func TestTraceArguments(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	rec := electortest.NewRecorder(t, nil)
	cfg := baseConfig(clk, "a")
	rec.InstallCallbacks(&cfg)
	type call struct {
		hook          string
		token         int64
		class         backends.Class
		latency, left time.Duration
	}
	calls := make(chan call, 16)
	cfg.Trace.ElectionWon = func(tm elector.Term, latency time.Duration) {
		calls <- call{hook: "won", token: tm.Token, latency: latency}
	}
	cfg.Trace.RenewFailed = func(tm elector.Term, c backends.Class, latency, left time.Duration) {
		calls <- call{hook: "renew-failed", token: tm.Token, class: c, latency: latency, left: left}
	}
	cfg.Trace.Renewed = func(tm elector.Term, latency, left time.Duration) {
		calls <- call{hook: "renewed", token: tm.Token, latency: latency, left: left}
	}
	fl := electortest.Wrap(newFakeLocker(clk))
	block, entered := make(chan struct{}), make(chan struct{})
	fl.Set(electortest.Renew, &electortest.Fault{Once: true, Block: block, Entered: entered, Err: fmt.Errorf("test: slow: %w", backends.ErrUnavailable)})
	startElector(t, fl, cfg)
	rec.WaitElected(t, ctx, 1)
	if got, want := <-calls, (call{hook: "won", token: 1}); got != want {
		t.Errorf("first hook = %+v, want %+v", got, want)
	}
	if err := clk.BlockUntil(ctx, 2); err != nil { // the renewal timer and the term's end
		t.Fatal(err)
	}
	clk.Add(renewPeriod)
	<-entered
	clk.Add(200 * time.Millisecond)
	close(block)
	// Sent at 3s, answered at 3.2s; the deadline is 9.9s.
	if got, want := <-calls, (call{hook: "renew-failed", token: 1, class: backends.ClassTransient, latency: 200 * time.Millisecond, left: 6700 * time.Millisecond}); got != want {
		t.Errorf("after a failed renewal: %+v, want %+v", got, want)
	}
	if err := clk.BlockUntil(ctx, 2); err != nil { // the retry timer and the term's end
		t.Fatal(err)
	}
	clk.Add(retryPeriod)
	// Sent and answered at 4.2s: the deadline moves to 14.1s.
	if got, want := <-calls, (call{hook: "renewed", token: 1, left: ttl - margin}); got != want {
		t.Errorf("after a renewal: %+v, want %+v", got, want)
	}
}
