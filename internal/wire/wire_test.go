package wire

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClaimRoundTrip(t *testing.T) {
	for _, id := range []string{"a", "node 1", "日本/ノード", "x/y/z", strings.Repeat("é", 200), `quote " and \ backslash`} {
		for _, nonce := range []string{"", "0123456789abcdef"} {
			gotID, gotNonce, err := DecodeClaim(EncodeClaim(id, nonce))
			if err != nil || gotID != id || gotNonce != nonce {
				t.Errorf("DecodeClaim(EncodeClaim(%q, %q)) = %q, %q, %v", id, nonce, gotID, gotNonce, err)
			}
		}
	}
	for _, bad := range []string{"", "null", "{}", `{"v":2,"id":"a"}`, `{"v":1,"id":""}`, "not json"} {
		if _, _, err := DecodeClaim([]byte(bad)); err == nil {
			t.Errorf("DecodeClaim(%q) accepted a foreign value", bad)
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
