package dynamodb_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/dynamodb/dynamotest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
)

// The DynamoDB twins of the failure-mode catalogue's rows from the seed's
// DynamoDB table (package failuremodes lists them, FM-32 and FM-33): the
// same scenarios as FM-13 and FM-14, against the real store over dynalite
// instead of memstore and the fake clock.

// TestFM32ThrottledRenewalOnDynamoDB checks FM-32, the seed's "throttling
// causes false demotion" on DynamoDB: renewals answered with
// ProvisionedThroughputExceededException must not demote a leader whose
// deadline has not passed.
//
// Trigger: the next three requests of the leader's store are throttled
// (an HTTP proxy answers them with DynamoDB's error).
//
// The seed's dynamolock treats the error as a failed renewal and demotes.
//
// Tenure: the store classifies it ErrThrottled (transient) and makes each
// request one attempt, and the elector retries with its own backoff,
// halving towards its deadline; the term goes on. TestFaultThrottledBriefly
// is the same check; TestFaultThrottledPastDeadline the throttling that
// outlasts the deadline.
func TestFM32ThrottledRenewalOnDynamoDB(t *testing.T) {
	TestFaultThrottledBriefly(t)
}

// TestFM33DuplicateIdentityOnDynamoDB checks FM-33, the seed's "duplicate
// ownerID across processes" on DynamoDB: two processes configured with one
// identity must be two holders.
//
// Trigger: two electors with the identity "same", each on a store and a
// client of its own, over one table.
//
// The seed's dynamolock renews on the condition "ownerId = :me", which
// both satisfy: both renew, both lead.
//
// Tenure: a holder is the identity plus a per-instance nonce, and every
// renewal is conditioned on the revision of the holder's own write. The
// second elector is refused, reports the duplicate, never renews or
// releases the first's claim, and leads with a higher token only after
// the first stops.
func TestFM33DuplicateIdentityOnDynamoDB(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	wall := clock.New()
	ts := electortest.NewTerms(wall)
	const id = "same"
	var dups atomic.Int32
	start := func(l backends.Locker, name string) *elector.Elector {
		cfg := elector.Config{Key: "leader", Identity: id, TTL: electionTTL, Logger: testLogger(t, name)}
		ts.Install(&cfg, name)
		if name == "b" {
			cfg.Trace.DuplicateIdentity = func(backends.Holder) { dups.Add(1) }
		}
		el, err := elector.New(l, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := el.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		return el
	}
	la := electortest.Wrap(newLocker(t, open(t, srv.Endpoint(), tbl)))
	a := start(la, "a")
	t.Cleanup(func() { stopElector(t, a, "a") })
	if who := ts.Next(t, within(t, faultLimit)); who != "a" {
		t.Fatalf("first leader = %s, want a", who)
	}
	lb := electortest.Wrap(newLocker(t, open(t, srv.Endpoint(), tbl)))
	b := start(lb, "b")
	t.Cleanup(func() { stopElector(t, b, "b") })
	// b tries, is refused and waits a TTL between attempts: wait for three
	// of them, and for a's renewals meanwhile.
	renews := la.Count(electortest.Renew)
	electortest.Await(t, within(t, faultLimit), "b's third refused attempt", func() bool { return lb.Count(electortest.Acquire) >= 3 }, lb)
	if a.Holder() == b.Holder() {
		t.Fatalf("two electors with identity %q share holder %v", id, a.Holder())
	}
	if got := ts.Leading(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("leading %v, want only a", got)
	}
	if la.Count(electortest.Renew) <= renews {
		t.Errorf("a did not renew while b tried")
	}
	if n := lb.Count(electortest.Renew) + lb.Count(electortest.Release); n != 0 {
		t.Errorf("b renewed or released %d times while a held the claim", n)
	}
	if dups.Load() == 0 {
		t.Error("b did not report the duplicate identity")
	}
	stopElector(t, a, "a")
	if who := ts.Next(t, within(t, faultLimit)); who != "b" {
		t.Fatalf("leader after a stopped = %s, want b", who)
	}
	all := ts.Check(t)
	if len(all) != 2 || all[1].Token <= all[0].Token {
		t.Errorf("terms %+v, want a's then b's with a higher token", all)
	}
}
