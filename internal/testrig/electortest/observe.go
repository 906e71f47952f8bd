package electortest

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
)

// ObserverDelays are the times an ObserverScenario measured from a change
// of the claim to the observer's delivery of it, on the real clock.
type ObserverDelays struct {
	Elected  time.Duration // from the acquisition's answer to the held observation
	Released time.Duration // from the release's answer to the free observation
	// Expired is from the TTL's end, counted from the acquisition's
	// answer, to the free observation. On a store that judges expiry by
	// local observation it includes the observer's own wait of a TTL from
	// its first sighting of the claim.
	Expired time.Duration
}

// ObserverScenario checks, on a real store, that an observer of key over
// observe sees: no leader; a holder taken over claims (another
// connection, as another process would use) with its token and advertised
// value; its release as no leader; a holder that never renews, and its
// expiry as no leader; and a new holder at a greater token. It fails the
// test on any other observation, unknown included (the server is up). It
// returns the delays it measured, and bounds every wait by limit.
func ObserverScenario(t testing.TB, observe, claims backends.Locker, key string, ttl, limit time.Duration) ObserverDelays {
	t.Helper()
	wall := clock.New()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := elector.Observe(ctx, observe, elector.ObserverConfig{Key: key, RetryPeriod: ttl / 6, Clock: wall})
	if err != nil {
		cancel()
		t.Fatalf("Observe: %v", err)
	}
	defer func() {
		cancel()
		for range ch {
		}
	}()
	next := func(what string, want elector.ClaimState) (elector.Observation, time.Time) {
		t.Helper()
		timer := time.NewTimer(limit)
		defer timer.Stop()
		select {
		case obs := <-ch:
			at := wall.Now()
			if obs.State != want {
				t.Fatalf("%s: observed %v %+v (err %v), want %v", what, obs.State, obs.Leaders, obs.Err, want)
			}
			return obs, at
		case <-timer.C:
			t.Fatalf("%s: no observation within %v", what, limit)
		}
		return elector.Observation{}, time.Time{}
	}
	holder := func(id, adv string) backends.Holder {
		t.Helper()
		h, err := backends.NewHolder(id)
		if err == nil {
			h, err = h.Advertising(adv)
		}
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	acquire := func(h backends.Holder) (backends.Claim, time.Time) {
		t.Helper()
		c, err := claims.TryAcquire(ctx, key, h, ttl)
		if err != nil {
			t.Fatalf("TryAcquire(%s): %v", h, err)
		}
		return c, wall.Now()
	}
	wantLeader := func(obs elector.Observation, c backends.Claim) {
		t.Helper()
		ld, ok := obs.Leader()
		if !ok || len(obs.Leaders) != 1 || ld.Holder != c.Holder || ld.Token != c.Token {
			t.Fatalf("observed %+v, want %s (advertising %q) at token %d", obs.Leaders, c.Holder, c.Holder.Advertised, c.Token)
		}
	}
	var d ObserverDelays

	next("before anyone holds the claim", elector.ClaimFree)
	a := holder("observed a", "127.0.0.1:7001")
	ca, at := acquire(a)
	obs, seen := next("a took the claim", elector.ClaimHeld)
	wantLeader(obs, ca)
	d.Elected = seen.Sub(at)

	if err := claims.Release(ctx, ca); err != nil {
		t.Fatalf("Release: %v", err)
	}
	at = wall.Now()
	_, seen = next("a released the claim", elector.ClaimFree)
	d.Released = seen.Sub(at)

	b := holder("observed b", "[::1]:7002")
	cb, at := acquire(b) // and never renews it
	obs, _ = next("b took the claim", elector.ClaimHeld)
	wantLeader(obs, cb)
	_, seen = next("b's claim expired", elector.ClaimFree)
	d.Expired = seen.Sub(at.Add(ttl))

	c := holder("observed c", "http://c.example:7003")
	cc, _ := acquire(c)
	obs, _ = next("c took the claim", elector.ClaimHeld)
	wantLeader(obs, cc)
	if cc.Token <= cb.Token {
		t.Errorf("c's token %d is not above b's %d", cc.Token, cb.Token)
	}
	if err := claims.Release(ctx, cc); err != nil {
		t.Errorf("Release: %v", err)
	}
	return d
}
