package main

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/health"
	"github.com/tenure-go/tenure/metrics"
)

// metricsServer serves /metrics for tenure run --metrics: the elector's
// series (package metrics) and the Go and process collectors, from a
// registry of its own; and /healthz, /readyz and /leaderz, package
// health's handlers for the elector of the current term.
type metricsServer struct {
	m    *metrics.Metrics
	srv  *http.Server
	done chan struct{}

	mu     sync.Mutex
	live   *health.Handler // guarded by mu: liveness (and readiness) of the current term's elector; nil before the first
	leader *health.Handler // guarded by mu: leading, or holding a slot, for the same
}

// probeKind is what a probe asks.
type probeKind int

const (
	probeLive   probeKind = iota // /healthz: the elector is not stuck
	probeReady                   // /readyz: the same, once the store is open and the elector runs
	probeLeader                  // /leaderz: this tenure leads, or holds a slot
)

// serveMetrics listens on addr and serves /metrics, /healthz, /readyz and
// /leaderz until close.
func serveMetrics(addr string, log *slog.Logger) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	s := &metricsServer{
		m:    m,
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		done: make(chan struct{}),
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { s.probe(w, r, probeLive) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) { s.probe(w, r, probeReady) })
	mux.HandleFunc("/leaderz", func(w http.ResponseWriter, r *http.Request) { s.probe(w, r, probeLeader) })
	log.Info("serving metrics", "addr", ln.Addr().String())
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	return s, nil
}

// follow makes the probes report on e, the elector of a new term, with
// cfg its Config; a nil server does nothing. Between terms they go on
// reporting the last elector, stopped: live and ready, not leading.
func (s *metricsServer) follow(e *elector.Elector, cfg elector.Config) {
	if s == nil {
		return
	}
	// A healthy demotion lasts up to the drain and the release; the
	// tolerance stays well above that.
	hc := health.Config{Key: cfg.Key, Clock: cfg.Clock, Tolerance: health.DefaultTolerance + cfg.DrainTimeout + cfg.TTL}
	live := health.New(e, hc)
	hc.RequireLeader = true
	leader := health.New(e, hc)
	s.mu.Lock()
	s.live, s.leader = live, leader
	s.mu.Unlock()
}

// probe answers a probe of kind. /readyz is /healthz once the first
// term's elector runs: a healthy follower is ready (a standby that can
// take over), and readiness is not leading, which /leaderz tells. Before
// the first term's elector, tenure is live (it opens the store, or waits to
// campaign), not ready and not leading.
func (s *metricsServer) probe(w http.ResponseWriter, r *http.Request, kind probeKind) {
	s.mu.Lock()
	h := s.live
	if kind == probeLeader {
		h = s.leader
	}
	s.mu.Unlock()
	if h != nil {
		h.ServeHTTP(w, r)
		return
	}
	rep := health.Report{Healthy: kind == probeLive, Status: "ok", State: "starting"}
	switch kind {
	case probeReady:
		rep.Status = "starting"
	case probeLeader:
		rep.Status = "not leading"
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if rep.Healthy {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	if r.Method != http.MethodHead {
		_ = json.NewEncoder(w).Encode(rep)
	}
}

// trace returns the hooks for key; a nil server traces nothing.
func (s *metricsServer) trace(key string) elector.Trace {
	if s == nil {
		return elector.Trace{}
	}
	return s.m.Trace(key)
}

// close stops serving and waits for the server's goroutine.
func (s *metricsServer) close() {
	if s == nil {
		return
	}
	_ = s.srv.Close()
	<-s.done
}
