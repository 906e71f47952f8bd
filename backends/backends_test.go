package backends_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"github.com/tenure-go/tenure/backends"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestClassify(t *testing.T) {
	conflict := &backends.ConflictError{Op: "cas", Key: "k", Expected: 3, Found: true, Current: backends.Entry{Revision: 4}}
	tests := []struct {
		name string
		err  error
		want backends.Class
	}{
		{"nil", nil, backends.ClassNone},
		{"conflict", conflict, backends.ClassLost},
		{"wrapped conflict", fmt.Errorf("renew: %w", conflict), backends.ClassLost},
		{"not found", fmt.Errorf("x: %w", backends.ErrNotFound), backends.ClassLost},
		{"held", &backends.HeldError{Key: "k"}, backends.ClassLost},
		{"not holder", backends.ErrNotHolder, backends.ClassLost},
		{"unavailable", fmt.Errorf("dial: %w", backends.ErrUnavailable), backends.ClassTransient},
		{"throttled", backends.ErrThrottled, backends.ClassTransient},
		{"deadline", context.DeadlineExceeded, backends.ClassTransient},
		{"unknown", errors.New("something odd"), backends.ClassTransient},
		{"permission", backends.ErrPermission, backends.ClassFatal},
		{"missing resource", backends.ErrMissingResource, backends.ClassFatal},
		{"corrupt", backends.ErrCorrupt, backends.ClassFatal},
		{"invalid", backends.ErrInvalid, backends.ClassFatal},
		{"closed", backends.ErrClosed, backends.ClassFatal},
		{"unsupported", backends.ErrUnsupported, backends.ClassFatal},
		{"stdlib unsupported", fmt.Errorf("watch: %w", errors.ErrUnsupported), backends.ClassFatal},
		{"stdlib permission", fmt.Errorf("open: %w", fs.ErrPermission), backends.ClassFatal},
		{"EACCES", &fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, backends.ClassFatal},
		{"EPERM", &fs.PathError{Op: "rename", Path: "/x", Err: syscall.EPERM}, backends.ClassFatal},
		{"malformed claim", fmt.Errorf("x: %w", mustDecodeErr(t)), backends.ClassFatal},
		{"bad ttl", fmt.Errorf("x: %w", backends.ErrInvalid), backends.ClassFatal},
		{"fatal wins over lost", fmt.Errorf("%w: %w", backends.ErrCorrupt, backends.ErrNotFound), backends.ClassFatal},
		{"lost wins over transient", fmt.Errorf("%w: %w", backends.ErrUnavailable, backends.ErrConflict), backends.ClassLost},
		{"explicit class", fmt.Errorf("x: %w", &backends.ClassError{Class: backends.ClassFatal, Err: backends.ErrUnavailable}), backends.ClassFatal},
	}
	for _, tt := range tests {
		if got := backends.Classify(tt.err); got != tt.want {
			t.Errorf("%s: Classify(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// mustDecodeErr is the error a Locker reports for a claim value it cannot
// parse.
func mustDecodeErr(t *testing.T) error {
	t.Helper()
	err := holdersOfValue(t, "not a claim")
	if err == nil {
		t.Fatal("the Locker accepted a malformed claim value")
	}
	return err
}

// valueStore holds one entry, with the given value, at every key.
type valueStore struct {
	stubStore
	value string
}

func (s valueStore) Get(_ context.Context, key string) (backends.Entry, error) {
	return backends.Entry{Key: key, Value: []byte(s.value), Revision: 1, CreateRevision: 1}, nil
}

// holdersOfValue is the error of a Locker's Holders on a key holding value.
func holdersOfValue(t *testing.T, value string) error {
	t.Helper()
	l, err := backends.NewLocker(valueStore{stubStore{caps: backends.Capabilities{Atomic: backends.CapClaims}}, value})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Holders(context.Background(), "k")
	return err
}

func TestConflictErrorReasons(t *testing.T) {
	exists := &backends.ConflictError{Op: "create", Key: "k", Found: true, Current: backends.Entry{Key: "k", Revision: 7}}
	absent := &backends.ConflictError{Op: "cas", Key: "k", Expected: 7}
	stale := &backends.ConflictError{Op: "cas", Key: "k", Expected: 7, Found: true, Current: backends.Entry{Key: "k", Revision: 9}}
	tests := []struct {
		err                       error
		conflict, exists, missing bool
	}{
		{exists, true, true, false},
		{absent, true, false, true},
		{stale, true, false, false},
	}
	for _, tt := range tests {
		if got := errors.Is(tt.err, backends.ErrConflict); got != tt.conflict {
			t.Errorf("Is(%v, ErrConflict) = %v", tt.err, got)
		}
		if got := errors.Is(tt.err, backends.ErrExists); got != tt.exists {
			t.Errorf("Is(%v, ErrExists) = %v", tt.err, got)
		}
		if got := errors.Is(tt.err, backends.ErrNotFound); got != tt.missing {
			t.Errorf("Is(%v, ErrNotFound) = %v", tt.err, got)
		}
	}
	var ce *backends.ConflictError
	if !errors.As(fmt.Errorf("op: %w", stale), &ce) || ce.Current.Revision != 9 {
		t.Errorf("errors.As did not recover the current entry: %+v", ce)
	}
}

func TestUnsupportedWrapsStdlib(t *testing.T) {
	if !errors.Is(backends.ErrUnsupported, errors.ErrUnsupported) {
		t.Fatal("ErrUnsupported does not wrap errors.ErrUnsupported")
	}
}

// stubStore declares whatever capabilities it is given and implements no
// optional interface: the shape of a wrapper that hides its inner store's
// Watch and Txn.
type stubStore struct {
	backends.Store
	caps backends.Capabilities
}

func (s stubStore) Capabilities() backends.Capabilities { return s.caps }

type watchingStub struct{ stubStore }

func (watchingStub) Watch(context.Context, string) (<-chan backends.Event, error) { return nil, nil }

func TestRequire(t *testing.T) {
	all := backends.CapCreateIfAbsent | backends.CapCompareAndSet | backends.CapCompareAndDelete | backends.CapKeepAlive | backends.CapWatch | backends.CapTxn
	tests := []struct {
		name  string
		store backends.Store
		need  backends.Capability
		ok    bool
	}{
		{"declared", stubStore{caps: backends.Capabilities{Atomic: backends.CapClaims}}, backends.CapClaims, true},
		{"undeclared", stubStore{caps: backends.Capabilities{Atomic: backends.CapCreateIfAbsent}}, backends.CapClaims, false},
		{"declares watch without Watch", stubStore{caps: backends.Capabilities{Atomic: all}}, backends.CapWatch, false},
		{"declares txn without Txn", watchingStub{stubStore{caps: backends.Capabilities{Atomic: all}}}, backends.CapTxn, false},
		{"watch with Watch", watchingStub{stubStore{caps: backends.Capabilities{Atomic: all}}}, backends.CapWatch, true},
		{"has Watch but does not declare it", watchingStub{stubStore{caps: backends.Capabilities{Atomic: backends.CapClaims}}}, backends.CapWatch, false},
		{"nil store", nil, backends.CapClaims, false},
	}
	for _, tt := range tests {
		err := backends.Require(tt.store, tt.need)
		if (err == nil) != tt.ok {
			t.Errorf("%s: Require(%s) = %v, want ok=%v", tt.name, tt.need, err, tt.ok)
		}
		if err != nil && tt.store != nil && !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s: error %v does not wrap errors.ErrUnsupported", tt.name, err)
		}
	}
	if _, err := backends.NewLocker(stubStore{caps: backends.Capabilities{Atomic: backends.CapCreateIfAbsent}}); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("NewLocker over a store without keep-alive: err = %v, want ErrUnsupported", err)
	}
}

// TestScopesOrdered checks that scopes order narrowest first, so that a
// caller can check a scope with >=, as Scope documents.
func TestScopesOrdered(t *testing.T) {
	if !(backends.ScopeProcess < backends.ScopeHost && backends.ScopeHost < backends.ScopeDistributed) {
		t.Errorf("scopes are not ordered narrowest first: %d %d %d", backends.ScopeProcess, backends.ScopeHost, backends.ScopeDistributed)
	}
}

// TestForeignClaimValueIsCorrupt checks that a claim key holding anything but
// a claim is corrupt, never free. (The codec's round trip is tested in
// internal/wire.)
func TestForeignClaimValueIsCorrupt(t *testing.T) {
	for _, bad := range []string{"", "null", "{}", `{"v":2,"id":"a"}`, `{"v":1,"id":""}`, "not json"} {
		if err := holdersOfValue(t, bad); !errors.Is(err, backends.ErrCorrupt) {
			t.Errorf("Holders of a key holding %q = %v, want ErrCorrupt", bad, err)
		}
	}
}

func TestNewHolder(t *testing.T) {
	a, err := backends.NewHolder("same")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := backends.NewHolder("same")
	if a == b || a.Nonce == "" {
		t.Errorf("two holders with one id are equal: %v %v", a, b)
	}
	for _, bad := range []string{"", "\xff", strings.Repeat("x", backends.MaxKeyBytes+1)} {
		_, err := backends.NewHolder(bad)
		if !errors.Is(err, backends.ErrInvalid) {
			t.Errorf("NewHolder(%q) = %v, want ErrInvalid", bad, err)
		}
		if err != nil && strings.Count(err.Error(), "backends:") != 1 {
			t.Errorf("NewHolder(%q) = %q: does not name the package exactly once", bad, err)
		}
	}
	if _, err := backends.NewHolder(strings.Repeat("x", backends.MaxKeyBytes)); err != nil {
		t.Errorf("NewHolder of an id of MaxKeyBytes bytes = %v, want it accepted", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		err  error
		ok   bool
	}{
		{"key", backends.ValidateKey("a b/ü"), true},
		{"empty key", backends.ValidateKey(""), false},
		{"nul key", backends.ValidateKey("a\x00b"), false},
		{"long key", backends.ValidateKey(strings.Repeat("k", backends.MaxKeyBytes+1)), false},
		{"bad utf8", backends.ValidateKey("\xff"), false},
		{"empty prefix", backends.ValidatePrefix(""), true},
		{"nul prefix", backends.ValidatePrefix("a\x00"), false},
	}
	for _, tt := range tests {
		if (tt.err == nil) != tt.ok {
			t.Errorf("%s: err = %v, want ok=%v", tt.name, tt.err, tt.ok)
		}
		if tt.err != nil && !errors.Is(tt.err, backends.ErrInvalid) {
			t.Errorf("%s: %v does not wrap ErrInvalid", tt.name, tt.err)
		}
		if tt.err != nil && strings.Count(tt.err.Error(), "backends:") != 1 {
			t.Errorf("%s: %q does not name the package exactly once", tt.name, tt.err)
		}
	}
	if got, want := backends.ValidateKey("").Error(), "backends: empty key: invalid argument"; got != want {
		t.Errorf("ValidateKey(\"\") = %q, want %q", got, want)
	}
}

// TestHolderLogValue checks that a holder logs as its id and nonce, so a JSON
// log shows an id with spaces or quotes as written, not quoted a second time.
func TestHolderLogValue(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "holder", backends.Holder{ID: `a "b" c`, Nonce: "n1"})
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("log line %q: %v", buf.String(), err)
	}
	want := map[string]any{"id": `a "b" c`, "nonce": "n1"}
	if fmt.Sprint(got["holder"]) != fmt.Sprint(want) {
		t.Errorf("logged holder = %v, want %v (line %q)", got["holder"], want, buf.String())
	}
}
