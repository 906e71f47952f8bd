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

	"k8s.io/client-go/tools/clientcmd"

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
		{"kube://ns?context=prod", urlConfig{namespace: "ns", context: "prod"}},
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

// writeKubeconfig writes a kubeconfig with contexts a and b, each with a
// server of its own, a the current one.
func writeKubeconfig(t *testing.T, path string) {
	t.Helper()
	const cfg = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: "t"}
contexts:
- name: a
  context: {cluster: a, user: u}
- name: b
  context: {cluster: b, user: u}
current-context: a
`
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestKubeconfigAsKubectl checks that without kubeconfig=, a kube URL finds
// its credentials as kubectl does, in $KUBECONFIG, else in ~/.kube/config,
// and context= picks a context; in-cluster configuration is only the last
// resort. (Before, without kubeconfig= only the pod's service account was
// tried, and outside a pod the open failed.)
func TestKubeconfigAsKubectl(t *testing.T) {
	home := filepath.Join(t.TempDir(), ".kube", "config")
	writeKubeconfig(t, home)
	other := filepath.Join(t.TempDir(), "other")
	writeKubeconfig(t, other)
	// ~/.kube/config as client-go computed it when it started.
	defer func(f string) { clientcmd.RecommendedHomeFile = f }(clientcmd.RecommendedHomeFile)
	clientcmd.RecommendedHomeFile = home
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, tt := range []struct {
		name, kubeconfigEnv, url, want string
	}{
		{"home", "", "kube://ns", "https://a.example:6443"},
		{"home, context", "", "kube://ns?context=b", "https://b.example:6443"},
		{"KUBECONFIG", other, "kube://ns?context=b", "https://b.example:6443"},
		{"explicit", "", "kube://ns?kubeconfig=" + url.QueryEscape(other), "https://a.example:6443"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tt.kubeconfigEnv)
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			c, err := parseURL(u)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := c.restConfig()
			if err != nil {
				t.Fatalf("%s: %v", tt.url, err)
			}
			if cfg.Host != tt.want {
				t.Errorf("%s: server %q, want %q", tt.url, cfg.Host, tt.want)
			}
		})
	}
	t.Run("no such context", func(t *testing.T) {
		t.Setenv("KUBECONFIG", "")
		c := urlConfig{namespace: "ns", context: "nope"}
		if _, err := c.restConfig(); err == nil || !strings.Contains(err.Error(), "nope") {
			t.Errorf("restConfig with context nope = %v, want an error naming it", err)
		}
	})
}
