package kube

import (
	"net/url"
	"testing"
	"time"

	"github.com/tenure-go/tenure/storeurl"
)

// TestParseURL: what a kube URL asks for, as the registered scheme reads it.
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
