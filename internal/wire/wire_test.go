package wire

import (
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClaimRoundTrip(t *testing.T) {
	for _, id := range []string{"a", "node 1", "日本/ノード", "x/y/z", strings.Repeat("é", 200), `quote " and \ backslash`} {
		for _, nonce := range []string{"", "0123456789abcdef"} {
			for _, adv := range []string{"", "10.0.0.7:8080", "https://indexer-2.example.org:8443/api"} {
				want := Claim{ID: id, Nonce: nonce, Advertised: adv}
				got, err := DecodeClaim(EncodeClaim(want))
				if err != nil || got != want {
					t.Errorf("DecodeClaim(EncodeClaim(%+v)) = %+v, %v", want, got, err)
				}
			}
		}
	}
	for _, bad := range []string{"", "null", "{}", `{"v":2,"id":"a"}`, `{"v":1,"id":""}`, "not json"} {
		if _, err := DecodeClaim([]byte(bad)); err == nil {
			t.Errorf("DecodeClaim(%q) accepted a foreign value", bad)
		}
	}
}

// TestClaimWithoutAdvertised checks that a claim an earlier version wrote,
// without the advertised field, still reads, advertising nothing, and that
// a claim with nothing advertised is written as that version wrote it, so
// the earlier version reads it too.
func TestClaimWithoutAdvertised(t *testing.T) {
	old := `{"v":1,"id":"node 1","nonce":"0123456789abcdef"}`
	got, err := DecodeClaim([]byte(old))
	if want := (Claim{ID: "node 1", Nonce: "0123456789abcdef"}); err != nil || got != want {
		t.Errorf("DecodeClaim(%s) = %+v, %v; want %+v", old, got, err, want)
	}
	if b := EncodeClaim(Claim{ID: "node 1", Nonce: "0123456789abcdef"}); string(b) != old {
		t.Errorf("EncodeClaim without a value = %s, want %s", b, old)
	}
}

func TestValidateAdvertised(t *testing.T) {
	for _, tt := range []struct {
		v  string
		ok bool
	}{
		{"", true}, {"127.0.0.1:9000", true}, {"[::1]:80", true}, {"http://日本.example/x y", true},
		{strings.Repeat("x", MaxAdvertisedBytes), true},
		{strings.Repeat("x", MaxAdvertisedBytes+1), false}, {"\xff", false},
		{"a\nb", false}, {"a\tb", false}, {"a\x00b", false}, {"a\u0085b", false}, {"a\x7fb", false},
	} {
		if err := ValidateAdvertised(tt.v); (err == nil) != tt.ok {
			t.Errorf("ValidateAdvertised(%q) = %v, want ok=%v", tt.v, err, tt.ok)
		}
	}
}

func TestValidateID(t *testing.T) {
	for _, tt := range []struct {
		id string
		ok bool
	}{
		{"a", true}, {"日本/ノード x", true}, {strings.Repeat("x", MaxIDBytes), true},
		{"", false}, {"\xff", false}, {strings.Repeat("x", MaxIDBytes+1), false},
	} {
		if err := ValidateID(tt.id); (err == nil) != tt.ok {
			t.Errorf("ValidateID(%q) = %v, want ok=%v", tt.id, err, tt.ok)
		}
	}
}

func TestSlotKeys(t *testing.T) {
	for _, tt := range []struct {
		storeKey string
		slot     int
		ok       bool
	}{
		{SlotKey("g", 0), 0, true},
		{SlotKey("g", 12), 12, true},
		{"g/slot-", 0, false},
		{"g/slot-01", 0, false},
		{"g/slot--1", 0, false},
		{"g/slot-1/slot-0", 0, false}, // a group nested under g
		{SizeKey("g"), 0, false},
		{"h/slot-1", 0, false},
	} {
		if i, ok := Slot("g", tt.storeKey); i != tt.slot || ok != tt.ok {
			t.Errorf("Slot(g, %q) = %d, %v; want %d, %v", tt.storeKey, i, ok, tt.slot, tt.ok)
		}
	}
	if !strings.HasPrefix(SlotKey("g", 3), SlotPrefix("g")) {
		t.Errorf("SlotKey(g, 3) = %q is not under SlotPrefix(g) = %q", SlotKey("g", 3), SlotPrefix("g"))
	}
}

func TestTransferRoundTrip(t *testing.T) {
	to, from, nonce, token, err := DecodeTransfer(EncodeTransfer("b 2", "a/1", "00ff", 7))
	if err != nil || to != "b 2" || from != "a/1" || nonce != "00ff" || token != 7 {
		t.Errorf("DecodeTransfer(EncodeTransfer(b 2, a/1, 00ff, 7)) = %q, %q, %q, %d, %v", to, from, nonce, token, err)
	}
	for _, bad := range []string{"", "{}", `{"v":2,"to":"b","from":"a"}`, `{"v":1,"to":"","from":"a"}`, string(EncodeClaim(Claim{ID: "a", Nonce: "n"}))} {
		if _, _, _, _, err := DecodeTransfer([]byte(bad)); err == nil {
			t.Errorf("DecodeTransfer(%q) accepted a foreign value", bad)
		}
	}
}

// TestDecodeClaimAsJSON checks that DecodeClaim, which reads the form
// EncodeClaim writes without encoding/json, answers as encoding/json does for
// values of every shape: canonical ones, ones with escapes, other key
// orders and cases, spaces, invalid UTF-8, broken ends.
func TestDecodeClaimAsJSON(t *testing.T) {
	values := []string{
		`{"v":1,"id":"a"}`, `{"v":1,"id":"a","nonce":"n"}`, `{"v":1,"id":"a","nonce":""}`,
		`{"v":1,"id":""}`, `{"v":1,"id":"","nonce":"n"}`, `{"v":2,"id":"a"}`, `{"v":1,"id":"a\"b"}`,
		`{"v":1,"id":"a\u00e9"}`, `{"v":1,"id":"a` + "\xff" + `"}`, `{"v":1,"id":"a` + "\x01" + `"}`,
		`{"v":1,"id":"a"`, `{"v":1,"id":"a"} `, `{"v":1,"id":"a"}}`, `{"v":1,"id":"a","nonce":"n"`,
		`{"v":1,"id":"a","nonce":"n",}`, `{"v":1,"id":"a","nonce":"n"}x`, `{"v":1,"id":"a","Nonce":"n"}`,
		`{"id":"a","v":1}`, `{ "v":1,"id":"a"}`, `{"v":1,"id":"a","id":"b"}`, `{"v":1,"id":"a","nonce":"n","x":1}`,
		`{"v":1,"id":"日本/ノード","nonce":"0123"}`, `{"v":1,"id":"a","nonce":"n\\"}`, `{"v":1,"id":"a\"`, ``, `null`,
		`{"v":1,"id":"a","adv":"x"}`, `{"v":1,"id":"a","nonce":"n","adv":"x"}`, `{"v":1,"id":"a","adv":"x","nonce":"n"}`,
		`{"v":1,"id":"a","nonce":"n","adv":"x","adv":"y"}`, `{"v":1,"id":"a","nonce":"n","nonce":"m"}`, `{"v":1,"id":"a","adv":""}`,
	}
	for _, id := range []string{"a", "node 1", "<&>", "\u2028", `q"b\`, "日本"} {
		for _, nonce := range []string{"", "0123456789abcdef"} {
			for _, adv := range []string{"", "10.0.0.7:8080", "<x>"} {
				values = append(values, string(EncodeClaim(Claim{ID: id, Nonce: nonce, Advertised: adv})))
			}
		}
	}
	for _, v := range values {
		got, gotErr := DecodeClaim([]byte(v))
		var c claim
		jerr := json.Unmarshal([]byte(v), &c)
		wantOK := jerr == nil && c.V == 1 && c.ID != ""
		if (gotErr == nil) != wantOK {
			t.Errorf("DecodeClaim(%q): err %v, want ok %v (json: %v, %+v)", v, gotErr, wantOK, jerr, c)
			continue
		}
		if want := (Claim{ID: c.ID, Nonce: c.Nonce, Advertised: c.Advertised}); wantOK && got != want {
			t.Errorf("DecodeClaim(%q) = %+v; encoding/json reads %+v", v, got, want)
		}
	}
}

func TestCandidacyRoundTrip(t *testing.T) {
	in := Claim{ID: "b 2", Nonce: "00ff", Advertised: "10.0.0.2:80"}
	got, prio, err := DecodeCandidacy(EncodeCandidacy(in, -7))
	if err != nil || got != in || prio != -7 {
		t.Errorf("DecodeCandidacy(EncodeCandidacy(%+v, -7)) = %+v, %d, %v", in, got, prio, err)
	}
	for _, bad := range []string{"", "{}", `{"v":1,"id":"a"}`, `{"v":2,"id":"a","nonce":"n"}`} {
		if _, _, err := DecodeCandidacy([]byte(bad)); err == nil {
			t.Errorf("DecodeCandidacy(%q) accepted a foreign value", bad)
		}
	}
	if k := CandidateKey("g", "ab"); !strings.HasPrefix(k, CandidatePrefix("g")) {
		t.Errorf("CandidateKey(g, ab) = %q is not under CandidatePrefix(g) = %q", k, CandidatePrefix("g"))
	}
}
