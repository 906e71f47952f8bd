package main

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/metrics"
)

// metricsServer serves /metrics for tenure run --metrics: the elector's
// series (package metrics) and the Go and process collectors, from a
// registry of its own.
type metricsServer struct {
	m    *metrics.Metrics
	srv  *http.Server
	done chan struct{}
}

// serveMetrics listens on addr and serves /metrics until close.
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
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s := &metricsServer{
		m:    m,
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		done: make(chan struct{}),
	}
	log.Info("serving metrics", "addr", ln.Addr().String())
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	return s, nil
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
