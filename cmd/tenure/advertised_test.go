package main

import (
	"testing"

	"github.com/tenure-go/tenure/backends"
)

// TestAdvertisedColumn checks the ADVERTISED column of holders: "-" for
// nothing, the value as it is when it is one field, and quoted when it has
// spaces or quotes, or characters tenure would not have written (a line
// break), so that the table stays one line per holder.
func TestAdvertisedColumn(t *testing.T) {
	for _, tt := range []struct{ v, want string }{
		{"", "-"},
		{"10.0.0.1:8080", "10.0.0.1:8080"},
		{"http://x.example/a b", `"http://x.example/a b"`},
		{`say "hi"`, `"say \"hi\""`},
		{"line\nbreak", `"line\nbreak"`},
		{"bell\a", `"bell\a"`},
	} {
		c := shownClaim{Claim: backends.Claim{Holder: backends.Holder{ID: "a", Advertised: tt.v}}}
		if got := c.advertised(); got != tt.want {
			t.Errorf("advertised(%q) = %s, want %s", tt.v, got, tt.want)
		}
	}
}
