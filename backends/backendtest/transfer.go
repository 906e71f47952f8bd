package backendtest

import (
	"errors"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/wire"
)

// testLockerTransfer checks Transferer on the generic Locker: a transfer
// releases the claim and reserves it for its target, which takes it at a
// greater token while every other candidate, the giver included, is
// refused; a stale claim cannot transfer; a reservation whose target never
// comes expires and leaves the claim open to all.
func (s *suite) testLockerTransfer(t *testing.T) {
	st := s.store(t)
	l, lp := locker(t, st), locker(t, s.peer(t, st))
	ctx := t.Context()
	const key = "claims/transfer"
	one, two, three := holder(t, "one"), holder(t, "two"), holder(t, "three")

	t1 := s.acquire(t, l, key, one)
	if err := l.Transfer(ctx, t1, two.ID, s.ttl); err != nil {
		t.Fatalf("Transfer(%s -> %q): %v", one, two.ID, err)
	}
	wantHolders(t, lp, key)
	for _, c := range []struct {
		l backends.Locker
		h backends.Holder
	}{{lp, three}, {l, one}} {
		_, err := c.l.TryAcquire(ctx, key, c.h, s.ttl)
		var re *backends.ReservedError
		if !errors.As(err, &re) || re.To != two.ID || re.From != one || re.Token != t1.Token {
			t.Fatalf("TryAcquire(%s) of a claim transferred to %q = %v, want a *ReservedError naming it, from %s at token %d", c.h, two.ID, err, one, t1.Token)
		}
		if backends.Classify(err) != backends.ClassLost {
			t.Errorf("Classify(%v) = %v, want lost", err, backends.Classify(err))
		}
	}
	wantHolders(t, lp, key)
	t2 := s.acquire(t, lp, key, two)
	wantHolders(t, l, key, t2)
	if err := l.Transfer(ctx, t1, three.ID, s.ttl); !errors.Is(err, backends.ErrNotHolder) {
		t.Errorf("Transfer of a claim already transferred = %v, want ErrNotHolder", err)
	}
	wantHolders(t, l, key, t2)
	if err := lp.Release(ctx, t2); err != nil {
		t.Fatalf("Release by the target: %v", err)
	}
	// The target's take ended the reservation: the claim is open to all.
	t3 := s.acquire(t, l, key, three)
	if err := l.Transfer(ctx, t3, "absent", s.ttl); err != nil {
		t.Fatalf("Transfer(%s -> absent): %v", three, err)
	}
	s.expire(t, st, backends.Entry{Key: wire.TransferKey(key), TTL: s.ttl})
	t4 := s.acquire(t, l, key, one)
	increasing(t,
		[]string{"acquire", "transfer and take", "release and acquire", "transfer, reservation expired, acquire"},
		[]int64{t1.Token, t2.Token, t3.Token, t4.Token})
}

// testLockerCandidacies checks Candidacies on the generic Locker: entries
// are listed by priority, renewed without changing, replaced by a new
// declaration of the same holder, withdrawn, and gone once expired.
func (s *suite) testLockerCandidacies(t *testing.T) {
	st := s.store(t)
	l, lp := locker(t, st), locker(t, s.peer(t, st))
	ctx := t.Context()
	const key = "claims/candidates"
	low, high := holder(t, "low"), holder(t, "high")
	high, err := high.Advertising("10.0.0.2:8080")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := l.DeclareCandidacy(ctx, key, low, 1, s.ttl)
	if err != nil {
		t.Fatalf("DeclareCandidacy(low): %v", err)
	}
	ch, err := lp.DeclareCandidacy(ctx, key, high, 2, s.ttl)
	if err != nil {
		t.Fatalf("DeclareCandidacy(high): %v", err)
	}
	want := func(what string, hs ...backends.Holder) []backends.Candidate {
		t.Helper()
		got, req, err := lp.Candidates(ctx, key)
		if err != nil || req != nil {
			t.Fatalf("Candidates (%s): %v, request %+v (want none)", what, err, req)
		}
		if len(got) != len(hs) {
			t.Fatalf("Candidates (%s) = %+v, want %d", what, got, len(hs))
		}
		for i := range got {
			if got[i].Holder != hs[i] {
				t.Errorf("Candidates (%s)[%d] = %s, want %s", what, i, got[i].Holder, hs[i])
			}
		}
		return got
	}
	if got := want("two declared", high, low); got[0].Priority != 2 || got[1].Priority != 1 || got[0].Holder.Advertised != "10.0.0.2:8080" {
		t.Errorf("Candidates = %+v, want priorities 2, 1 and high's advertised value", got)
	}
	if _, err := l.RenewCandidacy(ctx, cl); err != nil {
		t.Errorf("RenewCandidacy(low): %v", err)
	}
	// A new declaration of the same holder replaces its entry.
	cl2, err := l.DeclareCandidacy(ctx, key, low, 3, s.ttl)
	if err != nil {
		t.Fatalf("DeclareCandidacy(low) again: %v", err)
	}
	want("low raised", low, high)
	if _, err := l.RenewCandidacy(ctx, cl); backends.Classify(err) != backends.ClassLost {
		t.Errorf("RenewCandidacy of a replaced entry = %v, want class lost", err)
	}
	if err := l.WithdrawCandidacy(ctx, cl2); err != nil {
		t.Errorf("WithdrawCandidacy(low): %v", err)
	}
	want("low withdrawn", high)
	s.expire(t, st, backends.Entry{Key: wire.CandidateKey(key, high.Nonce), TTL: ch.TTL})
	want("high expired")
	if err := lp.WithdrawCandidacy(ctx, ch); err != nil {
		t.Errorf("WithdrawCandidacy of an expired entry = %v, want nil", err)
	}
	// A transfer request is read in the same listing, replaced by a
	// later one, and cleared by its revision.
	if _, err := l.RequestTransfer(ctx, key, "", s.ttl); err != nil {
		t.Fatalf("RequestTransfer: %v", err)
	}
	r, err := l.RequestTransfer(ctx, key, "high", s.ttl)
	if err != nil {
		t.Fatalf("RequestTransfer again: %v", err)
	}
	got, req, err := lp.Candidates(ctx, key)
	if err != nil || len(got) != 0 || req == nil || req.To != "high" || req.Revision != r.Revision {
		t.Fatalf("Candidates with a request = %+v, %+v, %v; want no candidate and the request to %q at revision %d", got, req, err, "high", r.Revision)
	}
	if err := lp.ClearTransferRequest(ctx, *req); err != nil {
		t.Errorf("ClearTransferRequest: %v", err)
	}
	want("request cleared")
}
