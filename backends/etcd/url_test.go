package etcd

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/backends"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		url       string
		endpoints []string
		prefix    string
	}{
		{"etcd://127.0.0.1:2379/indexer", []string{"http://127.0.0.1:2379"}, "indexer/"},
		{"etcd://h1:1,h2:2/a/b/", []string{"http://h1:1", "http://h2:2"}, "a/b/"},
		{"etcd://h1/p", []string{"http://h1:2379"}, "p/"},
		{"etcd://[::1]:2380/p", []string{"http://[::1]:2380"}, "p/"},
		{"etcd://[::1]/p", []string{"http://[::1]:2379"}, "p/"},
		{"etcd://user:secret@h1:1/p", []string{"http://h1:1"}, "p/"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatalf("url.Parse(%q): %v", tt.url, err)
		}
		eps, prefix, err := parseURL(u)
		if err != nil || fmt.Sprint(eps) != fmt.Sprint(tt.endpoints) || prefix != tt.prefix {
			t.Errorf("parseURL(%q) = %v, %q, %v; want %v, %q", tt.url, eps, prefix, err, tt.endpoints, tt.prefix)
		}
	}

	bad := []string{
		"http://h1:2379/p",   // scheme
		"etcd://h1:2379",     // no prefix
		"etcd://h1:2379/",    // no prefix
		"etcd:///p",          // no host
		"etcd://h1,,h2/p",    // empty host
		"etcd://h1:1/p?x=1",  // query
		"etcd://h1:1/p#frag", // fragment
		"etcd:h1",            // opaque
		"etcd://h1:1/p\x00q", // NUL in prefix (refused by url.Parse or by us)
	}
	for _, s := range bad {
		u, err := url.Parse(s)
		if err != nil {
			continue
		}
		if _, _, err := parseURL(u); !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("parseURL(%q) = %v, want ErrInvalid", s, err)
		}
	}
	u, _ := url.Parse("http://user:secret@h1/p")
	if _, _, err := parseURL(u); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("parseURL error %v must not show the password", err)
	}
}
