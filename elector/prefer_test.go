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
// It is an electortest.Source that changes at every write it passes on.
type keepAliveLog struct {
	backends.Store
	clk *clocktest.Clock
	sig electortest.Signal
	mu  sync.Mutex
	at  map[string][]time.Time // guarded by mu
}

func (s *keepAliveLog) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	s.mu.Lock()
	s.at[key] = append(s.at[key], s.clk.Now())
	s.mu.Unlock()
	defer s.sig.Notify()
	return s.Store.KeepAlive(ctx, key, rev, ttl)
}

func (s *keepAliveLog) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	defer s.sig.Notify()
	return s.Store.CreateIfAbsent(ctx, key, value, ttl)
}

func (s *keepAliveLog) Changed() <-chan struct{} { return s.sig.Changed() }

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

// TestLeaderCandidacyCostsNothing checks that a leader sends nothing for
// its candidacy while it leads (jitter on, eight renewals of its claim),
// and declares it again once its term ends.
func TestLeaderCandidacyCostsNothing(t *testing.T) {
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
	a := startElector(t, sl, cfg)
	rec.Await(t, ctx, electortest.Elected, 1)
	isClaim := func(k string) bool { return k == key }
	isCand := func(k string) bool { return strings.HasPrefix(k, key+"/candidate-") }
	// At rest: the renewal, the deadline and the candidacy timers.
	step := func() {
		t.Helper()
		if err := clk.BlockUntil(ctx, 3); err != nil {
			t.Fatal(err)
		}
		clk.Add(50 * time.Millisecond)
	}
	for len(log.times(isClaim)) < 1 {
		step()
	}
	// The candidacy's renewal timed before the term began may still come.
	for range int(renewPeriod / (50 * time.Millisecond)) {
		step()
	}
	before := len(log.times(isCand))
	for len(log.times(isClaim)) < 9 {
		step()
	}
	if got := len(log.times(isCand)) - before; got != 0 {
		t.Errorf("the leader renewed its candidacy %d times over 8 renewals of its claim, want 0", got)
	}
	if err := a.Transfer(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	electortest.Await(t, ctx, "the candidacy declared again", func() bool {
		cs, _, err := sl.Candidates(ctx, key)
		return err == nil && len(cs) == 1 && cs[0].Holder == a.Holder()
	}, log)
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

// withdrawLog is a Store (without Watch or Txn) that records, each time a
// candidacy of claim key is deleted, whether the claim was still held. It
// closes declared once a candidacy was written.
type withdrawLog struct {
	backends.Store
	declared chan struct{}
	once     sync.Once
	mu       sync.Mutex
	held     []bool // guarded by mu
}

func (s *withdrawLog) CreateIfAbsent(ctx context.Context, k string, value []byte, ttl time.Duration) (backends.Entry, error) {
	e, err := s.Store.CreateIfAbsent(ctx, k, value, ttl)
	if err == nil && strings.HasPrefix(k, key+"/candidate-") {
		s.once.Do(func() { close(s.declared) })
	}
	return e, err
}

func (s *withdrawLog) CompareAndDelete(ctx context.Context, k string, rev int64) error {
	if strings.HasPrefix(k, key+"/candidate-") {
		_, err := s.Store.Get(ctx, key)
		s.mu.Lock()
		s.held = append(s.held, err == nil)
		s.mu.Unlock()
	}
	return s.Store.CompareAndDelete(ctx, k, rev)
}

// TestStopWithdrawsAfterRelease checks that a stopping leader withdraws
// its candidacy only once its claim is released: beside the release, the
// withdrawal would contend with it for the store while the next leader
// waits (it used to run as soon as Stop began, while the leader's work
// drained).
func TestStopWithdrawsAfterRelease(t *testing.T) {
	clk := clocktest.New(t0)
	ctx := barrier(t)
	ms := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { ms.Close() })
	log := &withdrawLog{Store: ms, declared: make(chan struct{})}
	sl, err := backends.NewLocker(log)
	if err != nil {
		t.Fatal(err)
	}
	cfg, rec, _, _ := loggedConfig(t, clk, "a")
	cfg.Candidacy, cfg.Priority = true, 1
	a := startElector(t, sl, cfg)
	rec.Await(t, ctx, electortest.Elected, 1)
	select {
	case <-log.declared:
	case <-ctx.Done():
		t.Fatal("no candidacy declared")
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.held) != 1 || log.held[0] {
		t.Errorf("candidacy withdrawals, each noting whether the claim was still held: %v, want [false]", log.held)
	}
}
