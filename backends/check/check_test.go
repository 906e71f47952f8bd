package check_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/check"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		err  error
		ok   bool
	}{
		{"write", check.Write("a b/ü", 3, []byte("v"), time.Second), true},
		{"write empty key", check.Write("", 0, nil, 0), false},
		{"big value", check.Write("k", 0, make([]byte, backends.MaxValueBytes+1), 0), false},
		{"largest value", check.Write("k", 0, make([]byte, backends.MaxValueBytes), 0), true},
		{"nil value", check.Write("k", 0, nil, 0), true},
		{"write negative revision", check.Write("k", -1, nil, 0), false},
		{"write negative ttl", check.Write("k", 0, nil, -1), false},
		{"negative ttl", check.TTL(-time.Second), false},
		{"zero ttl", check.TTL(0), true},
		{"largest ttl", check.TTL(backends.MaxTTL), true},
		{"ttl above the maximum", check.TTL(backends.MaxTTL + 1), false},
		{"write ttl above the maximum", check.Write("k", 0, nil, backends.MaxTTL+time.Millisecond), false},
		{"txn ttl above the maximum", check.Txn(nil, []backends.Op{{Kind: backends.OpPut, Key: "a", TTL: 1<<63 - 1}}), false},
		{"keep-alive ttl", check.KeepAliveTTL(backends.MaxTTL), true},
		{"keep-alive ttl 0", check.KeepAliveTTL(0), false},
		{"keep-alive ttl above the maximum", check.KeepAliveTTL(backends.MaxTTL + 1), false},
		{"revision 0 where positive needed", check.Revision(0, true), false},
		{"revision 0", check.Revision(0, false), true},
		{"negative revision", check.Revision(-1, false), false},
		{"txn twice", check.Txn(nil, []backends.Op{{Kind: backends.OpPut, Key: "a"}, {Kind: backends.OpDelete, Key: "a"}}), false},
		{"txn unknown op", check.Txn(nil, []backends.Op{{Key: "a"}}), false},
		{"txn bad cond", check.Txn([]backends.Cond{{Key: "a", Revision: -1}}, nil), false},
		{"txn big value", check.Txn(nil, []backends.Op{{Kind: backends.OpPut, Key: "a", Value: make([]byte, backends.MaxValueBytes+1)}}), false},
		{"txn ok", check.Txn([]backends.Cond{{Key: "a"}}, []backends.Op{{Kind: backends.OpPut, Key: "a"}, {Kind: backends.OpDelete, Key: "b"}}), true},
	}
	for _, tt := range tests {
		if (tt.err == nil) != tt.ok {
			t.Errorf("%s: err = %v, want ok=%v", tt.name, tt.err, tt.ok)
		}
		if tt.err != nil && !errors.Is(tt.err, backends.ErrInvalid) {
			t.Errorf("%s: %v does not wrap ErrInvalid", tt.name, tt.err)
		}
		if tt.err != nil && strings.Count(tt.err.Error(), "check:")+strings.Count(tt.err.Error(), "backends:") != 1 {
			t.Errorf("%s: %q does not name a package exactly once", tt.name, tt.err)
		}
	}
}
