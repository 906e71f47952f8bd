// Package toxiproc runs a toxiproxy server as a process of its own and
// drives it through its HTTP API, for the tests and the fault campaign
// that put a TCP proxy between a client and a real server: to add
// latency, to drop everything sent while connections stay open (a
// partition or a blackhole), or to close every connection and refuse new
// ones (a cut).
//
// The server is the toxiproxy-server command of a pinned tools module
// (server/build.sh), found through package toolbuild: the path
// TENURE_TOXIPROXY_SERVER names, or the cached build. It listens on
// 127.0.0.1 on a port picked at start; its proxies listen on ports the
// kernel picks and keep them while disabled, so that a client reconnects
// to the same address after Enable.
//
// Not promised: a proxy that cannot be reached any more because its
// server died reports errors from every call; nothing restarts it.
package toxiproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/internal/tools/toolbuild"
)

// Tool is the toxiproxy server: TENURE_TOXIPROXY_SERVER, or the binary
// server/build.sh builds and caches.
var Tool = toolbuild.Tool{Env: "TENURE_TOXIPROXY_SERVER", Script: "internal/testrig/toxiproc/server/build.sh"}

const (
	// readyTimeout bounds a start on busy cores.
	readyTimeout = 60 * time.Second
	// callTimeout bounds one API call.
	callTimeout = 30 * time.Second
	startTries  = 3
)

// Server is a toxiproxy server process. Its methods are safe for
// concurrent use.
type Server struct {
	api  string // http://127.0.0.1:PORT
	log  string
	proc *childproc.Process
	hc   *http.Client
}

// Start starts the toxiproxy server bin, logging to a file in dir, and
// returns once its API answers. Close ends it.
func Start(bin, dir string) (*Server, error) {
	var err error
	for try := range startTries {
		var s *Server
		if s, err = start(bin, filepath.Join(dir, fmt.Sprintf("toxiproxy%d.log", try))); err == nil {
			return s, nil
		}
	}
	return nil, err
}

// StartTest starts a toxiproxy server for the test, building the binary
// if need be, and ends it at cleanup.
func StartTest(t testing.TB) *Server {
	t.Helper()
	bin, err := Tool.Path()
	if err != nil {
		t.Fatalf("toxiproc: %v", err)
	}
	s, err := Start(bin, t.TempDir())
	if err != nil {
		t.Fatalf("toxiproc: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func start(bin, logPath string) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("toxiproc: pick a port: %w", err)
	}
	port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	proc, err := childproc.Start(childproc.Spec{Argv: []string{bin, "-host", "127.0.0.1", "-port", port}, Log: logPath})
	if err != nil {
		return nil, fmt.Errorf("toxiproc: start %s: %w", bin, err)
	}
	s := &Server{
		api:  "http://127.0.0.1:" + port,
		log:  logPath,
		proc: proc,
		hc:   &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	}
	if err := s.waitReady(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) waitReady() error {
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := s.call(http.MethodGet, "/version", nil, nil)
		if err == nil {
			return nil
		}
		select {
		case <-s.proc.Done():
			return fmt.Errorf("toxiproc: server exited before serving: %v\n%s", s.proc.Wait(), logTail(s.log))
		case <-deadline.C:
			return fmt.Errorf("toxiproc: server not ready after %v: %w\n%s", readyTimeout, err, logTail(s.log))
		case <-tick.C:
		}
	}
}

// Close ends the server, and with it every proxy, and waits for it to
// exit.
func (s *Server) Close() {
	s.proc.Signal(syscall.SIGKILL)
	<-s.proc.Done()
}

// Proxy is one proxy of a server: it accepts connections on Listen and
// forwards them to Upstream.
type Proxy struct {
	s        *Server
	Name     string
	Listen   string // host:port, kept while the proxy is disabled
	Upstream string // host:port
}

type proxyJSON struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	Enabled  bool   `json:"enabled"`
}

// CreateProxy creates and enables a proxy named name (unique on the
// server) from a port the kernel picks on 127.0.0.1 to upstream.
func (s *Server) CreateProxy(name, upstream string) (*Proxy, error) {
	var got proxyJSON
	if err := s.call(http.MethodPost, "/proxies", proxyJSON{Name: name, Listen: "127.0.0.1:0", Upstream: upstream, Enabled: true}, &got); err != nil {
		return nil, fmt.Errorf("toxiproc: create proxy %q: %w", name, err)
	}
	return &Proxy{s: s, Name: name, Listen: got.Listen, Upstream: upstream}, nil
}

// Proxy creates a proxy to upstream for the test (see CreateProxy) and
// deletes it at cleanup.
func (s *Server) Proxy(t testing.TB, name, upstream string) *Proxy {
	t.Helper()
	p, err := s.CreateProxy(name, upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Delete() })
	return p
}

// Toxic is a toxic of a proxy: Type is toxiproxy's name for it
// ("latency", "timeout", ...), Stream "upstream" (client to server) or
// "downstream", Attributes its type's parameters.
type Toxic struct {
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Stream     string         `json:"stream"`
	Toxicity   float64        `json:"toxicity"`
	Attributes map[string]int `json:"attributes"`
}

// AddToxic adds the toxic to every connection of p, the open ones
// included. A Toxicity of 0 is taken as 1: always.
func (p *Proxy) AddToxic(x Toxic) error {
	if x.Toxicity == 0 {
		x.Toxicity = 1
	}
	if err := p.s.call(http.MethodPost, "/proxies/"+url.PathEscape(p.Name)+"/toxics", x, nil); err != nil {
		return fmt.Errorf("toxiproc: proxy %q: add toxic %q: %w", p.Name, x.Name, err)
	}
	return nil
}

// RemoveToxic removes the toxic named name from p.
func (p *Proxy) RemoveToxic(name string) error {
	if err := p.s.call(http.MethodDelete, "/proxies/"+url.PathEscape(p.Name)+"/toxics/"+url.PathEscape(name), nil, nil); err != nil {
		return fmt.Errorf("toxiproc: proxy %q: remove toxic %q: %w", p.Name, name, err)
	}
	return nil
}

// AddBoth adds a toxic of type typ with attrs in both directions, named
// name+"-upstream" and name+"-downstream".
func (p *Proxy) AddBoth(name, typ string, attrs map[string]int) error {
	for _, dir := range streams {
		if err := p.AddToxic(Toxic{Name: name + "-" + dir, Type: typ, Stream: dir, Attributes: attrs}); err != nil {
			return err
		}
	}
	return nil
}

// RemoveBoth removes the toxics AddBoth added under name.
func (p *Proxy) RemoveBoth(name string) error {
	var errs []error
	for _, dir := range streams {
		errs = append(errs, p.RemoveToxic(name+"-"+dir))
	}
	return errors.Join(errs...)
}

// Blackhole drops everything sent either way through p's connections,
// which stay open, until RemoveBoth(name): a partition.
func (p *Proxy) Blackhole(name string) error {
	return p.AddBoth(name, "timeout", map[string]int{"timeout": 0})
}

var streams = []string{"upstream", "downstream"}

// Disable closes every connection of p and refuses new ones until Enable.
func (p *Proxy) Disable() error { return p.setEnabled(false) }

// Enable makes a disabled p accept connections again, on the same
// address.
func (p *Proxy) Enable() error { return p.setEnabled(true) }

func (p *Proxy) setEnabled(on bool) error {
	body := map[string]bool{"enabled": on}
	if err := p.s.call(http.MethodPatch, "/proxies/"+url.PathEscape(p.Name), body, nil); err != nil {
		return fmt.Errorf("toxiproc: proxy %q: set enabled %v: %w", p.Name, on, err)
	}
	return nil
}

// Delete closes every connection of p and removes it from its server.
func (p *Proxy) Delete() error {
	if err := p.s.call(http.MethodDelete, "/proxies/"+url.PathEscape(p.Name), nil, nil); err != nil {
		return fmt.Errorf("toxiproc: delete proxy %q: %w", p.Name, err)
	}
	return nil
}

// call sends one API request with body as JSON and decodes the answer
// into out, unless out is nil.
func (s *Server) call(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.api+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// logTail is the end of the server's log, for a failure message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return "toxiproxy log:\n" + strings.Join(lines, "\n")
}
