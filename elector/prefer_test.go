package elector_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

// keepAliveLog is a Store (without Watch or Txn) that records when each
// key was kept alive, on clk.
type keepAliveLog struct {
	backends.Store
	clk *clocktest.Clock
	mu  sync.Mutex
	at  map[string][]time.Time // guarded by mu
}

func (s *keepAliveLog) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	s.mu.Lock()
	s.at[key] = append(s.at[key], s.clk.Now())
	s.mu.Unlock()
	return s.Store.KeepAlive(ctx, key, rev, ttl)
}

func (s *keepAliveLog) times(match func(string) bool) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Time
	for k, ts := range s.at {
		if match(k) {
			out = append(out, ts...)
		}
	}
	return out
}

// TestCandidacyRidesTheLeadersRenewals checks that a leader's candidacy
// entry is renewed at the instants its claim is, and no more often (but
// for the one renewal it timed before it led), with jitter on: a store that batches the keep-alives sent together
// (etcd's shared lease, kube's session) renews both with one request.
func TestCandidacyRidesTheLeadersRenewals(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	ms := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { ms.Close() })
	log := &keepAliveLog{Store: ms, clk: clk, at: map[string][]time.Time{}}
	sl, err := backends.NewLocker(log)
	if err != nil {
		t.Fatal(err)
	}
	cfg, rec, _, _ := loggedConfig(t, clk, "a")
	cfg.DisableJitter, cfg.Candidacy, cfg.Priority = false, true, 1
	startElector(t, sl, cfg)
	rec.Await(t, ctx, electortest.Elected, 1)
	isClaim := func(k string) bool { return k == key }
	isCand := func(k string) bool { return strings.HasPrefix(k, key+"/candidate-") }
	for len(log.times(isClaim)) < 8 {
		// At rest: the renewal, the deadline and the candidacy timers.
		if err := clk.BlockUntil(ctx, 3); err != nil {
			t.Fatal(err)
		}
		clk.Add(50 * time.Millisecond)
	}
	if err := clk.BlockUntil(ctx, 3); err != nil {
		t.Fatal(err)
	}
	claims, cands := log.times(isClaim), log.times(isCand)
	for _, c := range claims {
		// The kick is taken by the candidacy goroutine as soon as it
		// runs: the same instant, or at the latest the next step of the
		// clock, never a grid step (450ms) away.
		beside := false
		for _, k := range cands {
			if d := k.Sub(c); d >= 0 && d <= 50*time.Millisecond {
				beside = true
			}
		}
		if !beside {
			t.Errorf("the claim was renewed at %v with no candidacy renewal beside it", c.Sub(t0))
		}
	}
	// The candidacy's first renewal was timed while it was a follower's.
	if len(cands) > len(claims)+1 {
		t.Errorf("%d candidacy renewals for %d claim renewals, want at most one more", len(cands), len(claims))
	}
}

// TestCandidacyNeedsALockerThatKeepsThem checks that New fails closed
// when Candidacy is asked of a Locker without candidacies.
func TestCandidacyNeedsALockerThatKeepsThem(t *testing.T) {
	clk := clocktest.New(t0)
	cfg := baseConfig(clk, "a")
	cfg.Candidacy = true
	if _, err := elector.New(newFakeLocker(clk), cfg); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("New with Candidacy over a Locker without candidacies = %v, want an error saying so", err)
	}
}
