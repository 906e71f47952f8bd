package health_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/clocktest"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/health"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	ttl       = 10 * time.Second
	margin    = 100 * time.Millisecond
	tolerance = 5 * time.Second
)

func config(clk clock.Clock, id string) elector.Config {
	return elector.Config{
		Key: "jobs", Identity: id, Clock: clk,
		TTL: ttl, RenewPeriod: 3 * time.Second, SafetyMargin: margin, DisableJitter: true,
	}
}

func barrier(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func start(t *testing.T, l backends.Locker, cfg elector.Config) *elector.Elector {
	t.Helper()
	e, err := elector.New(l, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	return e
}

func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched() // waiting for goroutines, not for time
	}
}

// probe serves one GET and decodes the report.
func probe(t *testing.T, h http.Handler) (int, health.Report) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var rep health.Report
	if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	if (rec.Code == http.StatusOK) != rep.Healthy {
		t.Errorf("status %d with healthy=%v", rec.Code, rep.Healthy)
	}
	// Identities are values of their own, not quoted inside a value.
	if strings.ContainsAny(rep.Holder+rep.Leader, `"#`) {
		t.Errorf("body %s: holder %q, leader %q, want identities as configured", rec.Body, rep.Holder, rep.Leader)
	}
	return rec.Code, rep
}

func newLocker(t *testing.T, clk clock.Clock) backends.Locker {
	t.Helper()
	store := memstore.New(memstore.WithClock(clk))
	t.Cleanup(func() { store.Close() })
	l, err := backends.NewLocker(store)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLeaderAndFollower checks that both the leader and a follower are live;
// only the leader is ready when RequireLeader is set.
func TestLeaderAndFollower(t *testing.T) {
	ctx := barrier(t)
	clk := clocktest.New(time.Time{})
	locker := newLocker(t, clk)
	a := start(t, locker, config(clk, "a"))
	eventually(t, ctx, "a leads", a.IsLeader)
	b := start(t, locker, config(clk, "b"))
	eventually(t, ctx, "b sees a", func() bool { l, ok := b.Leader(); return ok && l.Holder == a.Holder() })

	code, rep := probe(t, health.New(a, health.Config{Key: "jobs", Clock: clk}))
	if code != http.StatusOK || !rep.Leading || rep.State != "leader" || rep.Key != "jobs" || rep.Token != 1 ||
		rep.Leader != "a" || rep.LeaderNonce != a.Holder().Nonce || rep.Holder != "a" || rep.HolderNonce != a.Holder().Nonce ||
		rep.DeadlineLeft == nil || *rep.DeadlineLeft != 9.9 {
		t.Errorf("leader: %d %+v", code, rep)
	}
	code, rep = probe(t, health.New(b, health.Config{Key: "jobs", Clock: clk}))
	if code != http.StatusOK || rep.Leading || rep.State != "follower" || rep.Leader != "a" || rep.Holder != "b" || rep.DeadlineLeft != nil {
		t.Errorf("follower, liveness: %d %+v", code, rep)
	}
	code, rep = probe(t, health.New(b, health.Config{Key: "jobs", Clock: clk, RequireLeader: true}))
	if code != http.StatusServiceUnavailable || rep.Status != "not leading" {
		t.Errorf("follower, RequireLeader: %d %+v", code, rep)
	}
	code, _ = probe(t, health.New(a, health.Config{Key: "jobs", Clock: clk, RequireLeader: true}))
	if code != http.StatusOK {
		t.Errorf("leader, RequireLeader: %d", code)
	}

	// A stopped Elector is not stuck: it was stopped on purpose.
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	code, rep = probe(t, health.New(a, health.Config{Clock: clk}))
	if code != http.StatusOK || rep.State != "stopped" {
		t.Errorf("stopped: %d %+v", code, rep)
	}

	rec := httptest.NewRecorder()
	health.New(b, health.Config{}).ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/healthz", nil))
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("HEAD: %d, body %q", rec.Code, rec.Body)
	}
}

// starved is the Elector's clock in a process whose timers do not run:
// AfterFunc callbacks (the term's end, request timeouts) never fire.
type starved struct{ *clocktest.Clock }

func (s starved) AfterFunc(time.Duration, func()) *clock.Timer {
	return s.Clock.AfterFunc(1000*time.Hour, func() {})
}

// blocking is a Locker whose Renew hangs until released.
type blocking struct {
	backends.Locker
	entered chan struct{}
	release chan struct{}
}

func (b *blocking) Renew(ctx context.Context, c backends.Claim) (backends.Claim, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	return backends.Claim{}, fmt.Errorf("test: %w", backends.ErrUnavailable)
}

// TestStuckLeader checks that a leader whose loop hangs in a renewal and
// whose timers do not run stays in state leader past its deadline; the
// handler says so once Tolerance has passed, not before.
func TestStuckLeader(t *testing.T) {
	ctx := barrier(t)
	clk := clocktest.New(time.Time{})
	l := &blocking{Locker: newLocker(t, clk), entered: make(chan struct{}, 1), release: make(chan struct{})}
	e := start(t, l, config(starved{clk}, "a"))
	defer close(l.release) // before Stop, which start registered first
	eventually(t, ctx, "a leads", e.IsLeader)
	h := health.New(e, health.Config{Key: "jobs", Clock: clk, Tolerance: tolerance})
	if code, rep := probe(t, h); code != http.StatusOK {
		t.Fatalf("leading: %d %+v", code, rep)
	}
	if err := clk.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	clk.Add(3 * time.Second) // the renewal goes out and hangs
	<-l.entered

	clk.Add(ttl - margin - 3*time.Second + tolerance) // exactly Tolerance past the deadline
	code, rep := probe(t, h)
	if code != http.StatusOK || rep.State != "leader" || rep.Leading {
		t.Errorf("at Tolerance past the deadline: %d %+v, want 200 in state leader, not leading", code, rep)
	}
	clk.Add(time.Millisecond)
	code, rep = probe(t, h)
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(rep.Status, "stuck: leader state 5.001s past") {
		t.Errorf("past Tolerance: %d %+v, want 503 stuck", code, rep)
	}

	// A Handler that never saw the term times the stuck state from its
	// first probe.
	h2 := health.New(e, health.Config{Clock: clk, Tolerance: tolerance})
	if code, rep := probe(t, h2); code != http.StatusOK {
		t.Errorf("first probe of a new handler: %d %+v", code, rep)
	}
	clk.Add(tolerance + time.Millisecond)
	if code, rep := probe(t, h2); code != http.StatusServiceUnavailable {
		t.Errorf("new handler, Tolerance later: %d %+v", code, rep)
	}
}

// TestStuckDemoting checks that a leader's work that ignores its context
// keeps the Elector demoting; the handler says so once it has seen that for
// longer than Tolerance. The handler's clock moves; the Elector's does not,
// as in a process whose elector is wedged.
func TestStuckDemoting(t *testing.T) {
	ctx := barrier(t)
	clk := clocktest.New(time.Time{})
	probeClk := clocktest.New(time.Time{})
	working, quit := make(chan struct{}), make(chan struct{})
	cfg := config(clk, "a")
	cfg.OnElected = func(context.Context, elector.Term) {
		close(working)
		<-quit // ignores its context
	}
	e := start(t, newLocker(t, clk), cfg)
	<-working
	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop(context.Background()) }()
	eventually(t, ctx, "demoting", func() bool { return e.State().String() == "demoting" })

	h := health.New(e, health.Config{Clock: probeClk, Tolerance: tolerance})
	if code, rep := probe(t, h); code != http.StatusOK || rep.State != "demoting" {
		t.Errorf("demoting: %d %+v", code, rep)
	}
	probeClk.Add(tolerance)
	if code, _ := probe(t, h); code != http.StatusOK {
		t.Errorf("demoting for Tolerance: %d", code)
	}
	probeClk.Add(time.Millisecond)
	if code, rep := probe(t, h); code != http.StatusServiceUnavailable || !strings.Contains(rep.Status, "demoting for 5.001s") {
		t.Errorf("demoting past Tolerance: %d %+v", code, rep)
	}
	close(quit)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if code, rep := probe(t, h); code != http.StatusOK {
		t.Errorf("stopped: %d %+v", code, rep)
	}
}

// denied refuses every acquisition with a fatal error.
type denied struct{ backends.Locker }

func (denied) TryAcquire(context.Context, string, backends.Holder, time.Duration) (backends.Claim, error) {
	return backends.Claim{}, fmt.Errorf("test: %w", backends.ErrPermission)
}

// TestEnded checks that an Elector that gave up after repeated fatal errors
// is unhealthy, and the report carries its error.
func TestEnded(t *testing.T) {
	ctx := barrier(t)
	clk := clocktest.New(time.Time{})
	e := start(t, denied{newLocker(t, clk)}, config(clk, "a"))
	for {
		select {
		case <-e.Done():
		default:
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clk.Add(time.Second)
			continue
		}
		break
	}
	code, rep := probe(t, health.New(e, health.Config{Clock: clk}))
	if code != http.StatusServiceUnavailable || rep.State != "stopped" || !strings.Contains(rep.Error, "permission") || !strings.HasPrefix(rep.Status, "ended: ") {
		t.Errorf("ended: %d %+v", code, rep)
	}
}
