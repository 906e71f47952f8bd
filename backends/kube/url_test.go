package kube

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"

	"github.com/tenure-go/tenure/storeurl"
)

// TestParseURL checks what a kube URL asks for, as the registered scheme
// reads it.
func TestParseURL(t *testing.T) {
	tests := []struct {
		url  string
		want urlConfig
	}{
		{"kube://default", urlConfig{namespace: "default"}},
		{"kube://team-a/?kubeconfig=%2Fhome%2Fme%2F.kube%2Fconfig", urlConfig{namespace: "team-a", kubeconfig: "/home/me/.kube/config"}},
		{"kube://ns?session=1s", urlConfig{namespace: "ns", session: time.Second}},
		{"kube://ns?session=250ms&kubeconfig=%2Fk", urlConfig{namespace: "ns", kubeconfig: "/k", session: 250 * time.Millisecond}},
		{"kube://ns/?kubeconfig=/k&session=1m30s", urlConfig{namespace: "ns", kubeconfig: "/k", session: 90 * time.Second}},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := parseURL(u); err != nil || got != tt.want {
			t.Errorf("parseURL(%q) = %+v, %v; want %+v", tt.url, got, err, tt.want)
		}
		if _, err := storeurl.Parse(tt.url); err != nil {
			t.Errorf("storeurl.Parse(%q): %v", tt.url, err)
		}
	}
}

// TestOpenUnreachable checks that opening a kube:// store whose API server
// refuses connections fails at open, bounded by ctx, naming the server and
// the refusal, instead of succeeding and failing at the first claim.
func TestOpenUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	conf := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://` + addr + `
    insecure-skip-tls-verify: true
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
users:
- name: u
  user: {token: t}
`
	if err := os.WriteFile(kc, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	raw := "kube://default?kubeconfig=" + url.QueryEscape(kc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := storeurl.Open(ctx, raw)
	if err == nil {
		s.Close()
		t.Fatalf("Open(%q) succeeded", raw)
	}
	if !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "connection refused") || !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("Open(%q) = %v; want the server, the refusal and ErrUnavailable", raw, err)
	}
}
