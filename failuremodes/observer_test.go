package failuremodes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/faults"
)

// watcher is one observer of key over a Locker, read by the tests.
type watcher struct {
	t  *testing.T
	ch <-chan elector.Observation
}

// startObserver observes key over l on clk until the test ends, and then
// checks that the channel is closed.
func startObserver(t *testing.T, clk *clocktest.Clock, l backends.Locker) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := elector.Observe(ctx, l, elector.ObserverConfig{
		Key: key, RetryPeriod: retryPeriod, ReadTimeout: renewTimeout, DisableJitter: true, Clock: clk,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		for range ch {
		}
	})
	return &watcher{t: t, ch: ch}
}

// next returns the next observation within a generous real-time bound.
func (w *watcher) next(what string, want elector.ClaimState) elector.Observation {
	w.t.Helper()
	select {
	case obs := <-w.ch:
		if obs.State != want {
			w.t.Fatalf("%s: observed %v %+v, want %v", what, obs.State, obs.Leaders, want)
		}
		return obs
	case <-time.After(30 * time.Second):
		w.t.Fatalf("%s: no observation within 30s", what)
	}
	return elector.Observation{}
}

func observerStore(t *testing.T) (*clocktest.Clock, *memstore.Store, *backends.StoreLocker) {
	t.Helper()
	clk := clocktest.New(time.Time{})
	ms := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { ms.Close() })
	sl, err := backends.NewLocker(ms)
	if err != nil {
		t.Fatal(err)
	}
	return clk, ms, sl
}

func claimFor(t *testing.T, l backends.Locker, id string) (backends.Holder, backends.Claim) {
	t.Helper()
	h, err := backends.NewHolder(id)
	if err != nil {
		t.Fatal(err)
	}
	c, err := l.TryAcquire(t.Context(), key, h, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return h, c
}

// TestFM41ObserverSeesReleaseAndExpiry reproduces FM-41: an observer that
// reports only new leaders (etcd's Election.Observe delivers puts and never
// a deletion) keeps showing a leader that released its claim or died, and a
// client routing by it sends requests to nobody. Tenure's observer reports
// the release, at the watch's signal, and the expiry, and then the next
// leader at its greater token.
func TestFM41ObserverSeesReleaseAndExpiry(t *testing.T) {
	clk, _, sl := observerStore(t)
	w := startObserver(t, clk, sl)
	w.next("start", elector.ClaimFree)

	a, ca := claimFor(t, sl, "a")
	if ld, _ := w.next("a took the claim", elector.ClaimHeld).Leader(); ld.Holder != a {
		t.Fatalf("observed %s, want %s", ld.Holder, a)
	}
	if err := sl.Release(t.Context(), ca); err != nil {
		t.Fatal(err)
	}
	w.next("a released", elector.ClaimFree)

	b, cb := claimFor(t, sl, "b") // and dies: never renews
	if ld, _ := w.next("b took the claim", elector.ClaimHeld).Leader(); ld.Holder != b || ld.Token <= ca.Token {
		t.Fatalf("observed %s at token %d, want %s above token %d", ld.Holder, ld.Token, b, ca.Token)
	}
	clk.Add(ttl)
	w.next("b's claim expired", elector.ClaimFree)

	c, _ := claimFor(t, sl, "c")
	if ld, _ := w.next("c took the claim", elector.ClaimHeld).Leader(); ld.Holder != c || ld.Token <= cb.Token {
		t.Fatalf("observed %s at token %d, want %s above token %d", ld.Holder, ld.Token, c, cb.Token)
	}
}

// TestFM42ObserverCutOffFromTheStore reproduces FM-42: an observer cut off
// from the store that keeps its last answer reports the leader long after
// that leader's claim has expired, and a client keeps routing to it.
// Tenure's observer reads again at the expiry the store reported; the read
// fails, and it reports unknown rather than the leader. Once the store
// answers it reports what the store holds.
func TestFM42ObserverCutOffFromTheStore(t *testing.T) {
	clk, ms, sl := observerStore(t)
	fs := faults.Wrap(ms, clk)
	lo, err := backends.NewLocker(fs)
	if err != nil {
		t.Fatal(err)
	}
	w := startObserver(t, clk, lo)
	w.next("start", elector.ClaimFree)
	claimFor(t, sl, "a") // a takes the claim and then dies
	w.next("a took the claim", elector.ClaimHeld)

	cut := fs.Partition(faults.PartitionFail)
	clk.Add(ttl + time.Millisecond)
	obs := w.next("a's claim ran out while the observer was cut off", elector.ClaimUnknown)
	if !errors.Is(obs.Err, backends.ErrUnavailable) {
		t.Errorf("unknown observation's error = %v, want one wrapping ErrUnavailable", obs.Err)
	}
	cut.Remove()
	clk.Add(retryPeriod) // the backoff after the failed read
	w.next("the store answers again", elector.ClaimFree)
}

// TestFM43ObserverOverASilentWatch reproduces FM-43: a watch stream that
// stays open and delivers nothing (a stalled stream, a client retrying a
// lost connection without telling) leaves a watch-only observer showing the
// old leader for good. Tenure's observer reads the claim at the expiry the
// store reported whatever the watch says, so a release the watch did not
// deliver is seen there, and so is an expiry.
func TestFM43ObserverOverASilentWatch(t *testing.T) {
	clk, _, sl := observerStore(t)
	fl := electortest.Wrap(sl)
	w := startObserver(t, clk, fl.Watching(electortest.WatchSilent))
	w.next("start", elector.ClaimFree)
	clk.Add(6 * retryPeriod) // the read that confirms a free claim while a watch runs
	_, ca := claimFor(t, sl, "a")
	clk.Add(6 * retryPeriod)
	w.next("a seen at the next read", elector.ClaimHeld)
	if err := sl.Release(t.Context(), ca); err != nil {
		t.Fatal(err)
	}
	clk.Add(ttl)
	w.next("a's release, seen by the read due at its expiry", elector.ClaimFree)
}
