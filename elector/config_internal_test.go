package elector

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Config
		want Config // durations and jitter only
	}{
		{"all zero", Config{}, Config{
			TTL: 15 * time.Second, RenewPeriod: 5 * time.Second, RenewTimeout: 5 * time.Second,
			SafetyMargin: 150 * time.Millisecond, CancelLead: 150 * time.Millisecond, RetryPeriod: 2500 * time.Millisecond, Jitter: defaultJitter,
			DrainTimeout: 5 * time.Second, ReleaseTimeout: 5 * time.Second,
		}},
		{"short ttl keeps the margin floor", Config{TTL: 2 * time.Second, RenewPeriod: 500 * time.Millisecond}, Config{
			TTL: 2 * time.Second, RenewPeriod: 500 * time.Millisecond, RenewTimeout: 500 * time.Millisecond,
			SafetyMargin: 20 * time.Millisecond, CancelLead: 20 * time.Millisecond, RetryPeriod: 250 * time.Millisecond, Jitter: defaultJitter,
			DrainTimeout: 500 * time.Millisecond, ReleaseTimeout: 500 * time.Millisecond,
		}},
		{"tiny ttl", Config{TTL: 300 * time.Millisecond, DisableJitter: true}, Config{
			TTL: 300 * time.Millisecond, RenewPeriod: 100 * time.Millisecond, RenewTimeout: 100 * time.Millisecond,
			SafetyMargin: minSafetyMargin, CancelLead: minSafetyMargin, RetryPeriod: 50 * time.Millisecond, Jitter: 0,
			DrainTimeout: 100 * time.Millisecond, ReleaseTimeout: 100 * time.Millisecond,
		}},
	} {
		got := tc.in.withDefaults()
		if got.TTL != tc.want.TTL || got.RenewPeriod != tc.want.RenewPeriod || got.RenewTimeout != tc.want.RenewTimeout ||
			got.SafetyMargin != tc.want.SafetyMargin || got.CancelLead != tc.want.CancelLead || got.RetryPeriod != tc.want.RetryPeriod || got.Jitter != tc.want.Jitter ||
			got.DrainTimeout != tc.want.DrainTimeout || got.ReleaseTimeout != tc.want.ReleaseTimeout {
			t.Errorf("%s: withDefaults(%+v) =\n%+v\nwant\n%+v", tc.name, tc.in, got, tc.want)
		}
		if got.Clock == nil || got.Logger == nil {
			t.Errorf("%s: withDefaults left Clock or Logger nil", tc.name)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Key: "k", Identity: "me"}
	for _, tc := range []struct {
		name  string
		edit  func(c *Config)
		wants []string // substrings of the error; none: valid
	}{
		{"defaults", func(*Config) {}, nil},
		{"no key", func(c *Config) { c.Key = "" }, []string{"key"}},
		{"no identity", func(c *Config) { c.Identity = "" }, []string{"identity: backends: empty holder id"}},
		{"long identity", func(c *Config) { c.Identity = strings.Repeat("x", 1<<20) }, []string{"identity: backends: holder id of 1048576 bytes exceeds"}},
		{"bad utf8 identity", func(c *Config) { c.Identity = "\xff" }, []string{"UTF-8"}},
		{"negative ttl", func(c *Config) { c.TTL = -time.Second }, []string{"ttl -1s is negative"}},
		{"renew period not below ttl", func(c *Config) { c.TTL, c.RenewPeriod = time.Second, time.Second }, []string{"renew period 1s must be below ttl 1s"}},
		{"renew timeout too long", func(c *Config) { c.TTL, c.RenewPeriod, c.RenewTimeout = time.Second, 300*time.Millisecond, time.Second }, []string{"renew timeout 1s"}},
		{"margin too big", func(c *Config) {
			c.TTL, c.RenewPeriod, c.SafetyMargin = time.Second, 300*time.Millisecond, 900*time.Millisecond
		}, []string{"safety margin 900ms"}},
		{"jitter one", func(c *Config) { c.Jitter = 1 }, []string{"jitter 1 must be in [0, 1)"}},
		{"jitter negative", func(c *Config) { c.Jitter = -0.5 }, []string{"jitter -0.5"}},
		{"no jitter", func(c *Config) { c.DisableJitter = true }, nil},
		{"jitter and no jitter", func(c *Config) { c.Jitter, c.DisableJitter = 0.1, true }, []string{"jitter 0.1 set with DisableJitter"}},
		{"negative drain", func(c *Config) { c.DrainTimeout = -1 }, []string{"drain timeout -1ns is negative"}},
		{"several at once", func(c *Config) { c.Key, c.Identity, c.Jitter = "", "", 2 }, []string{"key", "identity", "jitter"}},
	} {
		c := ok
		tc.edit(&c)
		err := c.Validate()
		if len(tc.wants) == 0 {
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: Validate() = nil, want errors %q", tc.name, tc.wants)
			continue
		}
		if n := strings.Count(err.Error(), "elector: config: "); n != 1 {
			t.Errorf("%s: Validate() = %q names \"elector: config: \" %d times, want once", tc.name, err, n)
		}
		for _, w := range tc.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Validate() = %q, want it to mention %q", tc.name, err, w)
			}
		}
		var joined interface{ Unwrap() []error }
		if errors.As(err, &joined) && len(joined.Unwrap()) < len(tc.wants) {
			t.Errorf("%s: Validate() joined %d errors, want at least %d", tc.name, len(joined.Unwrap()), len(tc.wants))
		}
	}
}

// TestConfigValidateRenewalFitsTTL checks that a renewal sent at the latest
// moment its jitter allows and answered at the latest moment its timeout
// allows must be answered before the term ends: RenewPeriod + RenewTimeout +
// SafetyMargin + CancelLead < TTL. Before this rule, TTL 10s with RenewPeriod
// 9.95s validated.
func TestConfigValidateRenewalFitsTTL(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	for _, tc := range []struct {
		ttl, period, timeout, margin, lead time.Duration // zero: default
		want                               string        // the error; "" for valid
	}{
		{ttl: 10 * s, period: 9950 * ms, timeout: s, margin: 100 * ms,
			want: "elector: config: renew period 9.95s + renew timeout 1s + safety margin 100ms + cancel lead 100ms must be less than ttl 10s"},
		{ttl: 10 * s, period: 5 * s, timeout: 5 * s, margin: 100 * ms,
			want: "elector: config: renew period 5s + renew timeout 5s + safety margin 100ms + cancel lead 100ms must be less than ttl 10s"},
		{ttl: 10 * s, period: 4 * s, timeout: 5 * s, margin: s,
			want: "elector: config: renew period 4s + renew timeout 5s + safety margin 1s + cancel lead 100ms must be less than ttl 10s"},
		{ttl: 10 * s, period: 4 * s, timeout: 5 * s, margin: 899 * ms},
		{ttl: 10 * s, period: 4 * s, timeout: 5 * s, margin: 500 * ms, lead: 500 * ms,
			want: "elector: config: renew period 4s + renew timeout 5s + safety margin 500ms + cancel lead 500ms must be less than ttl 10s"},
		{ttl: 10 * s, period: 4 * s, timeout: 5 * s, margin: 500 * ms, lead: 499 * ms},
		{ttl: 10 * s, lead: -ms, want: "elector: config: cancel lead -1ms is negative"},
		{ttl: 10 * s, period: 3 * s, timeout: s, margin: 100 * ms},
		// Defaults: TTL/3 + TTL/3 + TTL/100.
		{},
		{ttl: 2 * s},
		{ttl: 300 * ms},
		// RenewTimeout defaults to RenewPeriod.
		{ttl: 10 * s, period: 5 * s,
			want: "elector: config: renew period 5s + renew timeout 5s + safety margin 100ms + cancel lead 100ms must be less than ttl 10s"},
		{ttl: 10 * s, period: 10 * s, timeout: s,
			want: "elector: config: renew period 10s must be below ttl 10s"},
	} {
		c := Config{Key: "k", Identity: "me", TTL: tc.ttl, RenewPeriod: tc.period, RenewTimeout: tc.timeout, SafetyMargin: tc.margin, CancelLead: tc.lead}
		got := ""
		if err := c.Validate(); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Validate(ttl %v, renew period %v, renew timeout %v, safety margin %v, cancel lead %v) = %q, want %q",
				tc.ttl, tc.period, tc.timeout, tc.margin, tc.lead, got, tc.want)
		}
	}
}
