package backendtest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/backends"
)

// locker returns the generic Locker over st.
func locker(t *testing.T, st backends.Store) *backends.StoreLocker {
	t.Helper()
	need(t, st, backends.CapClaims)
	l, err := backends.NewLocker(st)
	if err != nil {
		t.Fatalf("NewLocker: %v", err)
	}
	return l
}

func holder(t *testing.T, id string) backends.Holder {
	t.Helper()
	h, err := backends.NewHolder(id)
	if err != nil {
		t.Fatalf("NewHolder(%q): %v", id, err)
	}
	return h
}

func (s *suite) acquire(t *testing.T, l backends.Locker, key string, h backends.Holder) backends.Claim {
	t.Helper()
	le, err := l.TryAcquire(t.Context(), key, h, s.ttl)
	if err != nil {
		t.Fatalf("TryAcquire(%q, %s): %v", key, h, err)
	}
	if le.Key != key || le.Holder != h || le.Token <= 0 || le.Revision < le.Token {
		t.Fatalf("TryAcquire(%q, %s) = %+v, want the key, the holder, a positive token and revision >= token", key, h, le)
	}
	return le
}

func wantHolders(t *testing.T, l backends.Locker, key string, want ...backends.Claim) {
	t.Helper()
	got, err := l.Holders(t.Context(), key)
	if err != nil {
		t.Fatalf("Holders(%q): %v", key, err)
	}
	if len(got) != len(want) {
		t.Fatalf("Holders(%q) = %d leases %+v, want %d", key, len(got), got, len(want))
	}
	for i := range got {
		if got[i].Holder != want[i].Holder || got[i].Token != want[i].Token {
			t.Errorf("Holders(%q)[%d] = %s token %d, want %s token %d", key, i, got[i].Holder, got[i].Token, want[i].Holder, want[i].Token)
		}
	}
}

func (s *suite) testLockerSameIdentity(t *testing.T) {
	st := s.store(t)
	l, lp := locker(t, st), locker(t, s.peer(t, st))
	ctx := t.Context()
	const key = "claims/same id/leader"
	// Two processes configured with the same identity are two holders.
	h1, h2 := holder(t, "indexer 1 / ünï"), holder(t, "indexer 1 / ünï")
	if h1 == h2 {
		t.Fatalf("NewHolder twice with one id gave equal holders %s", h1)
	}

	// h2 held the claim once; that old lease is what it may still carry.
	old := s.acquire(t, lp, key, h2)
	if err := lp.Release(ctx, old); err != nil {
		t.Fatalf("Release(%s's lease): %v", h2, err)
	}
	l1 := s.acquire(t, l, key, h1)

	_, err := lp.TryAcquire(ctx, key, h2, s.ttl)
	var he *backends.HeldError
	if !errors.As(err, &he) || !errors.Is(err, backends.ErrHeld) {
		t.Fatalf("second holder with the same id: TryAcquire = %v, want a *HeldError wrapping ErrHeld", err)
	}
	if len(he.Holders) != 1 || he.Holders[0].Holder != h1 || he.Holders[0].Token != l1.Token {
		t.Errorf("HeldError.Holders = %+v, want [%s token %d]", he.Holders, h1, l1.Token)
	}
	wantHolders(t, l, key, l1)

	// Neither h2's old lease nor h1's lease with h2's name renews or
	// releases h1's claim.
	forged := l1
	forged.Holder = h2
	for _, tc := range []struct {
		name  string
		lease backends.Claim
	}{
		{"old lease of the second holder", old},
		{"first holder's lease under the second holder's name", forged},
	} {
		if _, err := lp.Renew(ctx, tc.lease); err == nil || backends.Classify(err) != backends.ClassLost {
			t.Errorf("Renew(%s) = %v, want an error of class lost", tc.name, err)
		}
	}
	if err := lp.Release(ctx, old); !errors.Is(err, backends.ErrNotHolder) {
		t.Errorf("Release(old lease of the second holder) = %v, want ErrNotHolder", err)
	}
	wantHolders(t, l, key, l1)
	r, err := l.Renew(ctx, l1)
	if err != nil {
		t.Fatalf("Renew(first holder's lease) after the second holder's attempts: %v", err)
	}
	if r.Token != l1.Token || r.Revision != l1.Revision || r.Holder != h1 {
		t.Errorf("Renew = token %d rev %d holder %s, want token %d rev %d holder %s (renewal keeps them)", r.Token, r.Revision, r.Holder, l1.Token, l1.Revision, h1)
	}
	if err := l.Release(ctx, r); err != nil {
		t.Errorf("Release(first holder's lease): %v", err)
	}
	wantHolders(t, l, key)
}

func (s *suite) testLockerTokens(t *testing.T) {
	st := s.store(t)
	l, lp := locker(t, st), locker(t, s.peer(t, st))
	ctx := t.Context()
	const key = "claims/tokens"
	h1, h2 := holder(t, "one"), holder(t, "two")

	t1 := s.acquire(t, l, key, h1)
	wantHolders(t, lp, key, t1)
	if err := l.Release(ctx, t1); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantHolders(t, l, key)
	t2 := s.acquire(t, lp, key, h2)
	r2, err := lp.Renew(ctx, t2)
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if r2.Token != t2.Token {
		t.Errorf("Renew changed the token from %d to %d", t2.Token, r2.Token)
	}
	if err := lp.Release(ctx, r2); err != nil {
		t.Fatalf("Release after Renew: %v", err)
	}
	t3 := s.acquire(t, l, key, h1)
	s.expire(t, st, backends.Entry{Key: key, TTL: t3.TTL})
	wantHolders(t, l, key)
	if _, err := l.Renew(ctx, t3); backends.Classify(err) != backends.ClassLost {
		t.Errorf("Renew of an expired lease = %v, want an error of class lost", err)
	}
	if err := l.Release(ctx, t3); err != nil {
		t.Errorf("Release of an expired lease = %v, want nil", err)
	}
	t4 := s.acquire(t, lp, key, h2)
	increasing(t,
		[]string{"acquire", "release and acquire", "release and acquire", "expiry and acquire"},
		[]int64{t1.Token, t2.Token, t3.Token, t4.Token})
}

func (s *suite) testLockerWatch(t *testing.T) {
	st := s.store(t)
	l := locker(t, st)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const key = "claims/watched"
	if !st.Capabilities().Has(backends.CapWatch) {
		_, err := l.WatchClaim(ctx, key)
		wantErrIs(t, "WatchClaim on a store without watch", err, backends.ErrUnsupported)
		return
	}
	le := s.acquire(t, l, key, holder(t, "watched"))
	signals, err := l.WatchClaim(ctx, key)
	if err != nil {
		t.Fatalf("WatchClaim(%q): %v", key, err)
	}
	mustCreate(t, st, key+"/other", nil, 0) // a key under the claim's name is not the claim
	if err := l.Release(ctx, le); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wait, stop := context.WithTimeout(ctx, eventWait)
	defer stop()
	select {
	case _, ok := <-signals:
		if !ok {
			t.Fatal("WatchClaim channel closed instead of signalling the release")
		}
	case <-wait.Done():
		t.Fatalf("WatchClaim(%q) did not signal the release within %v", key, eventWait)
	}
	cancel()
	closed, stop2 := context.WithTimeout(t.Context(), eventWait)
	defer stop2()
	for {
		select {
		case _, ok := <-signals:
			if !ok {
				return
			}
		case <-closed.Done():
			t.Fatalf("WatchClaim channel not closed within %v of its context's cancel", eventWait)
		}
	}
}

// testLockerAdvertised checks that the value a holder advertises is stored
// with its claim: another process reads it in Holders and in a HeldError,
// a renewal keeps it, and a value ValidateAdvertised refuses is refused
// before anything is written.
func (s *suite) testLockerAdvertised(t *testing.T) {
	st := s.store(t)
	l, lp := locker(t, st), locker(t, s.peer(t, st))
	ctx := t.Context()
	const key = "claims/advertised"
	// The largest value allowed, in several scripts and with spaces.
	adv := "https://indexer-2.例え.example:8443/ ü"
	adv += strings.Repeat("x", backends.MaxAdvertisedBytes-len(adv))
	h, err := holder(t, "advertiser").Advertising(adv)
	if err != nil {
		t.Fatalf("Advertising(%d bytes): %v", len(adv), err)
	}
	c := s.acquire(t, l, key, h)
	wantHolders(t, lp, key, c)
	_, err = lp.TryAcquire(ctx, key, holder(t, "other"), s.ttl)
	var he *backends.HeldError
	if !errors.As(err, &he) || len(he.Holders) != 1 || he.Holders[0].Holder != h {
		t.Errorf("TryAcquire of the held claim = %v, want a *HeldError listing %s advertising %q", err, h, adv)
	}
	r, err := l.Renew(ctx, c)
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if r.Holder.Advertised != adv {
		t.Errorf("Renew = holder advertising %q, want %q", r.Holder.Advertised, adv)
	}
	wantHolders(t, lp, key, r)
	if err := l.Release(ctx, r); err != nil {
		t.Fatalf("Release: %v", err)
	}

	bad := holder(t, "advertiser")
	bad.Advertised = adv + "x"
	if _, err := l.TryAcquire(ctx, key, bad, s.ttl); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("TryAcquire with an advertised value of %d bytes = %v, want ErrInvalid", len(bad.Advertised), err)
	}
	bad.Advertised = "line\nbreak"
	if _, err := l.TryAcquire(ctx, key, bad, s.ttl); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("TryAcquire advertising %q = %v, want ErrInvalid", bad.Advertised, err)
	}
	wantHolders(t, lp, key)
}
