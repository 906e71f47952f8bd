package main

import (
	"errors"
	"strings"
	"testing"
)

// TestParseStore: --store URLs are checked before anything is opened; a
// command that only reads a store (holders, watch) refuses one that asks
// for create=true, so it never makes a store.
func TestParseStore(t *testing.T) {
	for _, tt := range []struct {
		raw         string
		existing    bool
		says        string // "" when accepted
		wantsCreate bool
	}{
		{"file:///var/lib/tenure", false, "", false},
		{"file:///var/lib/tenure", true, "", false},
		{"file:///var/lib/tenure?create=true", false, "", true},
		{"file:///var/lib/tenure?create=true", true, "never creates one", false},
		{"etcd://127.0.0.1:2379/tenure", true, "", false},
		{"kube://default", true, "", false},
		{"mem://", false, "a memory store lives in one process", false},
		{"mem::", false, "such as mem://", false},
		{"", false, "--store is required", false},
	} {
		parse := parseStore
		if tt.existing {
			parse = parseExistingStore
		}
		loc, err := parse(tt.raw)
		var ue usageError
		switch {
		case tt.says == "" && err != nil:
			t.Errorf("parse(%q) (existing %v) = %v, want it accepted", tt.raw, tt.existing, err)
		case tt.says == "":
			if loc.Create != tt.wantsCreate {
				t.Errorf("parse(%q).Create = %v, want %v", tt.raw, loc.Create, tt.wantsCreate)
			}
		case err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.says):
			t.Errorf("parse(%q) (existing %v) = %v, want a usage error saying %q", tt.raw, tt.existing, err, tt.says)
		}
	}
}
