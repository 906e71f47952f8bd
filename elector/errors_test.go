package elector_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
)

// wantPrefixOnce checks that err's message names the package once: each
// layer adds its prefix once.
func wantPrefixOnce(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s = nil, want an error", what)
		return
	}
	if n := strings.Count(err.Error(), "elector: "); n != 1 {
		t.Errorf("%s = %q: \"elector: \" %d times, want once", what, err, n)
	}
}

func TestErrorsPrefixOnce(t *testing.T) {
	clk := clocktest.New(t0)
	_, err := elector.New(nil, baseConfig(clk, "a"))
	wantPrefixOnce(t, "New(nil locker)", err)
	cfg := baseConfig(clk, "a")
	cfg.Key = ""
	_, err = elector.New(newFakeLocker(clk), cfg)
	wantPrefixOnce(t, "New with an empty key", err)

	e, err := elector.New(newFakeLocker(clk), baseConfig(clk, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	err = e.Start(context.Background())
	if !errors.Is(err, elector.ErrStopped) {
		t.Errorf("Start after Stop = %v, want ErrStopped", err)
	}
	wantPrefixOnce(t, "Start after Stop", err)

	for _, c := range []elector.Cause{
		{Reason: elector.ReasonExpired, Err: elector.ErrDeadlinePassed},
		{Reason: elector.ReasonExpired, Err: elector.ErrLateAnswer},
		{Reason: elector.ReasonPanic, Err: &elector.PanicError{Where: "OnElected", Value: "boom"}},
		{Reason: elector.ReasonStopped},
	} {
		wantPrefixOnce(t, "Cause "+c.Reason.String(), c)
		if c.Err != nil && !errors.Is(c, c.Err) {
			t.Errorf("Cause %v does not wrap %v", c, c.Err)
		}
	}
}
