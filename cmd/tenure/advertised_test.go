package main

import (
	"bytes"
	"testing"
	"time"

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

// TestWatchShowsAdvertised checks that watch prints the value a holder
// advertises, quoted, in its line and as advertised in --json, and
// nothing of it for a holder that advertises none.
func TestWatchShowsAdvertised(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := backends.Holder{ID: "a", Nonce: "n", Advertised: "10.0.0.1:8080"}
	for _, tt := range []struct {
		json bool
		h    backends.Holder
		want string
	}{
		{false, h, `2026-01-01T00:00:00Z held holder="a" slot=0 token=3 advertised="10.0.0.1:8080"` + "\n"},
		{false, backends.Holder{ID: "a"}, `2026-01-01T00:00:00Z held holder="a" slot=0 token=3` + "\n"},
		{true, h, `{"time":"2026-01-01T00:00:00Z","event":"held","key":"k","holder":"a","nonce":"n","slot":0,"token":3,"advertised":"10.0.0.1:8080"}` + "\n"},
	} {
		var out bytes.Buffer
		w := &watcher{o: &options{stdout: &out}, key: "k", json: tt.json}
		w.print(at, "held", seat{holder: tt.h, token: 3})
		if out.String() != tt.want {
			t.Errorf("watch (json %v) printed %q, want %q", tt.json, out.String(), tt.want)
		}
	}
}
