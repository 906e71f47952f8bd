package dynamodb_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/dynamodb/dynamotest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/toxiproc"
)

// Fault tests: electors over a private dynalite that is killed, paused,
// cut off from one of them, or throttling one of them. Each checks what
// the safety model promises: the leader's term ends by its own deadline,
// no two terms overlap, and tokens strictly increase across the fault.

// faultLimit bounds each wait of a fault test.
const faultLimit = 30 * time.Second

// waitNotLeading waits until who no longer leads, bounded by faultLimit.
func waitNotLeading(t *testing.T, ts *electortest.Terms, who string) {
	t.Helper()
	electortest.Await(t, within(t, faultLimit), who+" stops leading after the fault", func() bool { return !slices.Contains(ts.Leading(), who) }, ts)
}

func tokensOf(all []electortest.Term) []int64 {
	var out []int64
	for _, tm := range all {
		out = append(out, tm.Token)
	}
	return out
}

// TestFaultServerKilled kills dynalite with SIGKILL while a leader holds
// the claim, and restarts it on its data directory a TTL later. The leader
// steps down by its deadline; after the restart an elector is elected with
// a higher token: the tombstone and the claim's item survived on disk.
func TestFaultServerKilled(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	wall := clock.New()
	ts := electortest.NewTerms(wall)
	startElector(t, newLocker(t, open(t, srv.Endpoint(), tbl)), "leader", "a", ts)
	startElector(t, newLocker(t, open(t, srv.Endpoint(), tbl)), "leader", "b", ts)
	leader := ts.Next(t, within(t, faultLimit))
	srv.Kill()
	waitNotLeading(t, ts, leader)
	srv.Restart()
	next := ts.Next(t, within(t, faultLimit))
	all := ts.Check(t)
	electortest.EndsByDeadline(t, all)
	t.Logf("%s led, the server was killed; after the restart %s was elected; terms %v", leader, next, tokensOf(all))
}

// TestFaultServerPaused stops dynalite with SIGSTOP for a TTL past the
// leader's step-down, with connections open, then continues it. The
// leader steps down by its deadline while nothing answers; once the
// server runs again an elector leads with a higher token, never beside
// another.
func TestFaultServerPaused(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	wall := clock.New()
	ts := electortest.NewTerms(wall)
	startElector(t, newLocker(t, open(t, srv.Endpoint(), tbl)), "leader", "a", ts)
	startElector(t, newLocker(t, open(t, srv.Endpoint(), tbl)), "leader", "b", ts)
	leader := ts.Next(t, within(t, faultLimit))
	srv.Pause(t)
	waitNotLeading(t, ts, leader)
	// The fault's length, on the real clock the electors run on; nothing
	// is asserted about when things happen.
	<-wall.After(electionTTL)
	srv.Resume(t)
	next := ts.Next(t, within(t, faultLimit))
	all := ts.Check(t)
	electortest.EndsByDeadline(t, all)
	t.Logf("%s led, the server was paused; after it continued %s was elected; terms %v", leader, next, tokensOf(all))
}

// TestFaultConnectionCut has the leader reach dynalite through a TCP
// proxy that starts dropping everything (connections stay open). The
// leader steps down by its deadline; the other elector, connected
// directly, sees the claim unchanged for a TTL and takes it over with a
// higher token.
func TestFaultConnectionCut(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	px := toxiproc.StartTest(t).Proxy(t, "dynamodb", srv.HostPort())
	ts := electortest.NewTerms(clock.New())
	startElector(t, newLocker(t, open(t, "http://"+px.Listen, tbl)), "leader", "proxied", ts)
	if who := ts.Next(t, within(t, faultLimit)); who != "proxied" {
		t.Fatalf("first leader = %s, want proxied", who)
	}
	startElector(t, newLocker(t, open(t, srv.Endpoint(), tbl)), "leader", "direct", ts)
	if err := px.Blackhole("cut"); err != nil {
		t.Fatal(err)
	}
	waitNotLeading(t, ts, "proxied")
	if who := ts.Next(t, within(t, faultLimit)); who != "direct" {
		t.Fatalf("leader after the cut = %s, want direct", who)
	}
	// The cut is never healed. Disabling the proxy ends its connections,
	// and the proxied store's calls fail at once from then on.
	if err := px.Disable(); err != nil {
		t.Fatal(err)
	}
	all := ts.Check(t)
	electortest.EndsByDeadline(t, all)
	t.Logf("terms %v", tokensOf(all))
}

// throttler is an HTTP proxy in front of dynalite that answers requests
// with a DynamoDB throttling error, as DynamoDB does when a table's or an
// account's capacity is exceeded: HTTP 400 with the JSON error body the
// SDK parses. It throttles the next budget requests, or every request
// while always is set, and passes the others on.
type throttler struct {
	srv  *httptest.Server
	next http.Handler

	mu sync.Mutex
	// The fields below are guarded by mu.
	code      string // the error code it answers
	budget    int    // requests still to throttle
	always    bool
	throttled int // requests answered with an error
	passed    int // requests passed on
	sig       electortest.Signal
}

func startThrottler(t *testing.T, upstream string) *throttler {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	tr := &http.Transport{}
	rp.Transport = tr
	th := &throttler{next: rp, code: "ProvisionedThroughputExceededException"}
	th.srv = httptest.NewServer(th)
	t.Cleanup(func() {
		th.srv.CloseClientConnections()
		th.srv.Close()
		tr.CloseIdleConnections()
	})
	return th
}

func (th *throttler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	th.mu.Lock()
	refuse := th.always || th.budget > 0
	code := th.code
	if refuse {
		if th.budget > 0 {
			th.budget--
		}
		th.throttled++
	} else {
		th.passed++
	}
	th.mu.Unlock()
	th.sig.Notify()
	if !refuse {
		th.next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Requestid", "throttled-by-test")
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":"throttled by the test's proxy"}`, code)
}

// set changes what the throttler does next.
func (th *throttler) set(code string, budget int, always bool) {
	th.mu.Lock()
	th.code, th.budget, th.always = code, budget, always
	th.mu.Unlock()
	th.sig.Notify()
}

func (th *throttler) counts() (throttled, passed int) {
	th.mu.Lock()
	defer th.mu.Unlock()
	return th.throttled, th.passed
}

func (th *throttler) Changed() <-chan struct{} { return th.sig.Changed() }

func (th *throttler) endpoint() string { return th.srv.URL }

// TestThrottledErrors checks that each of DynamoDB's throttling answers
// is ErrThrottled, transient, for a read and a write.
func TestThrottledErrors(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	th := startThrottler(t, srv.Endpoint())
	st := open(t, th.endpoint(), tbl)
	ctx := within(t, faultLimit)
	for _, code := range []string{"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"} {
		th.set(code, 0, true)
		_, err := st.Get(ctx, "k")
		if !errors.Is(err, backends.ErrThrottled) || backends.Classify(err) != backends.ClassTransient {
			t.Errorf("Get answered %s = %v (class %v), want ErrThrottled, transient", code, err, backends.Classify(err))
		}
		_, err = st.CreateIfAbsent(ctx, "k", []byte("v"), time.Second)
		if !errors.Is(err, backends.ErrThrottled) {
			t.Errorf("CreateIfAbsent answered %s = %v, want ErrThrottled", code, err)
		}
	}
	if n, _ := th.counts(); n != 6 {
		t.Errorf("the proxy throttled %d requests, want 6 (one attempt per call)", n)
	}
}

// startThrottledElector runs an elector with a longer TTL, so that a few
// refused renewals and their retries fit in its lease on a busy machine.
func startThrottledElector(t *testing.T, locker backends.Locker, who string, ts *electortest.Terms, ttl time.Duration) {
	t.Helper()
	cfg := elector.Config{Key: "leader", Identity: who, TTL: ttl, Logger: testLogger(t, who)}
	ts.Install(&cfg, who)
	el, err := elector.New(locker, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := el.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopElector(t, el, who) })
}

// TestFaultThrottledBriefly has the proxy in front of the leader throttle
// its next three requests (renewals), the seed's "throttling causes false
// demotion": the leader retries within its deadline, a renewal goes
// through, and it keeps leading: one term, still running.
func TestFaultThrottledBriefly(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	th := startThrottler(t, srv.Endpoint())
	ts := electortest.NewTerms(clock.New())
	startThrottledElector(t, newLocker(t, open(t, th.endpoint(), tbl)), "throttled", ts, 3*time.Second)
	if who := ts.Next(t, within(t, faultLimit)); who != "throttled" {
		t.Fatalf("first leader = %s, want throttled", who)
	}
	th.set("ProvisionedThroughputExceededException", 3, false)
	_, before := th.counts()
	electortest.Await(t, within(t, faultLimit), "three requests throttled and then two passed", func() bool {
		n, passed := th.counts()
		return n == 3 && passed >= before+2
	}, th)
	all := ts.Check(t)
	if len(all) != 1 || !all[0].End.IsZero() || !slices.Contains(ts.Leading(), "throttled") {
		t.Fatalf("terms %+v, leading %v: want the one term still running", all, ts.Leading())
	}
}

// TestFaultThrottledPastDeadline has the proxy in front of the leader
// throttle every request from some point on: the leader steps down by its
// deadline, and the other elector, not throttled, takes the claim over
// with a higher token; no two terms overlap.
func TestFaultThrottledPastDeadline(t *testing.T) {
	srv := dynamotest.Start(t)
	tbl := dynamotest.NewTable()
	th := startThrottler(t, srv.Endpoint())
	ts := electortest.NewTerms(clock.New())
	startElector(t, newLocker(t, open(t, th.endpoint(), tbl)), "leader", "throttled", ts)
	if who := ts.Next(t, within(t, faultLimit)); who != "throttled" {
		t.Fatalf("first leader = %s, want throttled", who)
	}
	startElector(t, newLocker(t, open(t, srv.Endpoint(), tbl)), "leader", "direct", ts)
	th.set("ThrottlingException", 0, true)
	waitNotLeading(t, ts, "throttled")
	if who := ts.Next(t, within(t, faultLimit)); who != "direct" {
		t.Fatalf("leader after the throttling = %s, want direct", who)
	}
	all := ts.Check(t)
	electortest.EndsByDeadline(t, all)
	if n, _ := th.counts(); n == 0 {
		t.Fatal("the proxy throttled nothing")
	}
	t.Logf("terms %v", tokensOf(all))
}
