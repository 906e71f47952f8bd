package backendtest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tenure-go/tenure/backends"
)

func keysOf(es []backends.Entry) []string {
	ks := make([]string, len(es))
	for i, e := range es {
		ks[i] = e.Key
	}
	return ks
}

func (s *suite) testListPrefixOrder(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	// Byte order: ' ' < '-' < '/' < 'a' < 0xC3 (é).
	all := []string{"list/b", "list/a/1", "list/é", "list/a", "list/ z", "list/", "list-x", "list", "lisu", "list/c", "other"}
	ents := map[string]backends.Entry{}
	for _, k := range all {
		ents[k] = mustCreate(t, st, k, []byte("v "+k), 0)
	}
	mustDelete(t, st, "list/c", ents["list/c"].Revision)
	delete(ents, "list/c")

	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"list/", []string{"list/", "list/ z", "list/a", "list/a/1", "list/b", "list/é"}},
		{"list/a", []string{"list/a", "list/a/1"}},
		{"list", []string{"list", "list-x", "list/", "list/ z", "list/a", "list/a/1", "list/b", "list/é"}},
		{"", []string{"list", "list-x", "list/", "list/ z", "list/a", "list/a/1", "list/b", "list/é", "lisu", "other"}},
		{"none/", nil},
		{"list/c", nil},
	} {
		got, err := st.List(ctx, tc.prefix)
		if err != nil {
			t.Errorf("List(%q): %v", tc.prefix, err)
			continue
		}
		if !slices.Equal(keysOf(got), tc.want) {
			t.Errorf("List(%q) = %q, want %q (live keys with the prefix, in byte order)", tc.prefix, keysOf(got), tc.want)
			continue
		}
		for i, e := range got {
			sameEntry(t, fmt.Sprintf("List(%q)[%d]", tc.prefix, i), e, ents[e.Key])
		}
	}
}

// oddKeys are keys every backend must store and return exactly, including
// ones a naive encoding to file names or object names would collide or
// escape with.
func oddKeys() []string {
	return []string{
		"with space", " leading space", "trailing space ", "tab\tand\nnewline",
		"ünïcødé/キー/🔑", "a/b/c", "A/B/C", "a_b_c", "a%2Fb%2Fc", "a-b-c", "a.b.c",
		"/leading", "trailing/", "//double//", "a//b", "..", ".", "../escape", "a/../b", "./x", "a/./b",
		".hidden", "back\\slash", `quote"and'apostrophe`, "*?<>|:", "~tilde", "#hash", "&amp;",
		strings.Repeat("k", backends.MaxKeyBytes),
		strings.Repeat("é", backends.MaxKeyBytes/2),
		strings.Repeat("a/", backends.MaxKeyBytes/2),
		strings.Repeat("/", backends.MaxKeyBytes),
	}
}

func (s *suite) testKeysRoundTrip(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	keys := oddKeys()
	ents := map[string]backends.Entry{}
	for _, k := range keys {
		if len(k) > backends.MaxKeyBytes {
			t.Fatalf("test key of %d bytes exceeds MaxKeyBytes", len(k))
		}
		e := mustCreate(t, st, k, []byte("value of "+k), 0)
		if e.Key != k {
			t.Errorf("CreateIfAbsent(%q) returned key %q", k, e.Key)
		}
		ents[k] = e
	}
	for _, k := range keys {
		got := mustGet(t, st, k)
		sameEntry(t, fmt.Sprintf("Get(%q)", k), got, ents[k])
	}
	got, err := st.List(ctx, "")
	if err != nil {
		t.Fatalf("List(\"\"): %v", err)
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	if !slices.Equal(keysOf(got), want) {
		t.Errorf("List(\"\") = %q, want %q", keysOf(got), want)
	}
	for _, k := range keys {
		u := mustCAS(t, st, k, ents[k].Revision, []byte("updated "+k), 0)
		mustDelete(t, st, k, u.Revision)
		wantAbsent(t, st, k)
	}
	if got, err := st.List(ctx, ""); err != nil || len(got) != 0 {
		t.Errorf("List(\"\") after deleting every key = (%q, %v), want empty", keysOf(got), err)
	}
}

func (s *suite) testValuesRoundTrip(t *testing.T) {
	st := s.store(t)
	binary := make([]byte, 256)
	for i := range binary {
		binary[i] = byte(i)
	}
	big := bytes.Repeat([]byte{0xff, 0x00, 'x', '\n'}, backends.MaxValueBytes/4)
	values := []struct {
		name  string
		value []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"binary", binary},
		{"NULs", []byte{0, 0, 0}},
		{"invalid UTF-8", []byte{0xc3, 0x28, 0xff}},
		{"JSON-looking", []byte(`{"v":1,"id":"x"}`)},
		{"MaxValueBytes", big},
	}
	for i, v := range values {
		key := fmt.Sprintf("values/%d", i)
		e := mustCreate(t, st, key, v.value, 0)
		if !bytes.Equal(e.Value, v.value) {
			t.Errorf("CreateIfAbsent(%q, %s value) returned %d bytes, want %d", key, v.name, len(e.Value), len(v.value))
		}
		if got := mustGet(t, st, key); !bytes.Equal(got.Value, v.value) {
			t.Errorf("Get(%q) of a %s value = %d bytes %q, want %d bytes", key, v.name, len(got.Value), trunc(got.Value), len(v.value))
		}
		// And over an existing value, in both directions.
		u := mustCAS(t, st, key, e.Revision, []byte("other"), 0)
		u = mustCAS(t, st, key, u.Revision, v.value, 0)
		if got := mustGet(t, st, key); !bytes.Equal(got.Value, v.value) {
			t.Errorf("Get(%q) after CompareAndSet to a %s value = %d bytes, want %d", key, v.name, len(got.Value), len(v.value))
		}
	}
}

func trunc(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

func (s *suite) testValuesCopied(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	const key = "copied"
	in := []byte("original")
	e := mustCreate(t, st, key, in, 0)
	in[0] = 'X'
	e.Value[0] = 'Y'
	got := mustGet(t, st, key)
	if string(got.Value) != "original" {
		t.Fatalf("Get(%q) = %q after the caller changed the slices it passed and got back, want %q", key, got.Value, "original")
	}
	got.Value[0] = 'Z'
	_, err := st.CreateIfAbsent(ctx, key, []byte("x"), 0)
	var ce *backends.ConflictError
	if errors.As(err, &ce) && len(ce.Current.Value) > 0 {
		ce.Current.Value[0] = 'W'
	}
	if got := mustGet(t, st, key); string(got.Value) != "original" {
		t.Errorf("Get(%q) = %q after the caller changed values it read, want %q", key, got.Value, "original")
	}
}

// badCase is one call that must fail with an error wrapping ErrInvalid.
type badCase struct {
	name string
	do   func() error
}

// testBadInput covers what every backend rejects. Keys longer than
// MaxKeyBytes are left out: the contract lets a backend accept more.
func (s *suite) testBadInput(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	huge := make([]byte, backends.MaxValueBytes+1)
	v := []byte("v")
	cases := []badCase{
		{"Get empty key", func() error { _, err := st.Get(ctx, ""); return err }},
		{"Get invalid UTF-8 key", func() error { _, err := st.Get(ctx, "bad\xff"); return err }},
		{"Get key with NUL", func() error { _, err := st.Get(ctx, "a\x00b"); return err }},
		{"List invalid UTF-8 prefix", func() error { _, err := st.List(ctx, "bad\xff"); return err }},
		{"CreateIfAbsent empty key", func() error { _, err := st.CreateIfAbsent(ctx, "", v, 0); return err }},
		{"CreateIfAbsent invalid UTF-8 key", func() error { _, err := st.CreateIfAbsent(ctx, "bad\xff", v, 0); return err }},
		{"CreateIfAbsent negative TTL", func() error { _, err := st.CreateIfAbsent(ctx, "bad/k", v, -s.ttl); return err }},
		{"CreateIfAbsent oversized value", func() error { _, err := st.CreateIfAbsent(ctx, "bad/k", huge, 0); return err }},
		{"CompareAndSet empty key", func() error { _, err := st.CompareAndSet(ctx, "", 0, v, 0); return err }},
		{"CompareAndSet negative revision", func() error { _, err := st.CompareAndSet(ctx, "bad/k", -1, v, 0); return err }},
		{"CompareAndSet negative TTL", func() error { _, err := st.CompareAndSet(ctx, "bad/k", 0, v, -1); return err }},
		{"CompareAndSet oversized value", func() error { _, err := st.CompareAndSet(ctx, "bad/k", 0, huge, 0); return err }},
		{"CompareAndDelete empty key", func() error { return st.CompareAndDelete(ctx, "", 1) }},
		{"CompareAndDelete revision 0", func() error { return st.CompareAndDelete(ctx, "bad/k", 0) }},
		{"CompareAndDelete negative revision", func() error { return st.CompareAndDelete(ctx, "bad/k", -1) }},
		{"KeepAlive empty key", func() error { _, err := st.KeepAlive(ctx, "", 1, s.ttl); return err }},
		{"KeepAlive revision 0", func() error { _, err := st.KeepAlive(ctx, "bad/k", 0, s.ttl); return err }},
		{"KeepAlive negative revision", func() error { _, err := st.KeepAlive(ctx, "bad/k", -1, s.ttl); return err }},
		{"KeepAlive TTL 0", func() error { _, err := st.KeepAlive(ctx, "bad/k", 1, 0); return err }},
		{"KeepAlive negative TTL", func() error { _, err := st.KeepAlive(ctx, "bad/k", 1, -s.ttl); return err }},
	}
	caps := st.Capabilities()
	if w, ok := st.(backends.Watcher); ok && caps.Has(backends.CapWatch) {
		cases = append(cases, badCase{"Watch invalid UTF-8 prefix", func() error {
			ch, err := w.Watch(ctx, "bad\xff")
			if err == nil && ch == nil {
				return errors.New("nil channel and nil error")
			}
			return err
		}})
	}
	if tx, ok := st.(backends.Txner); ok && caps.Has(backends.CapTxn) {
		put := func(k string) backends.Op { return backends.Op{Kind: backends.OpPut, Key: k, Value: v} }
		txn := func(conds []backends.Cond, ops ...backends.Op) func() error {
			return func() error { _, err := tx.Txn(ctx, conds, ops); return err }
		}
		cases = append(cases,
			badCase{"Txn op key written twice", txn(nil, put("bad/t"), put("bad/t"))},
			badCase{"Txn op unknown kind", txn(nil, backends.Op{Kind: 99, Key: "bad/t"})},
			badCase{"Txn op empty key", txn(nil, put(""))},
			badCase{"Txn op negative TTL", txn(nil, backends.Op{Kind: backends.OpPut, Key: "bad/t", TTL: -1})},
			badCase{"Txn op oversized value", txn(nil, backends.Op{Kind: backends.OpPut, Key: "bad/t", Value: huge})},
			badCase{"Txn cond empty key", txn([]backends.Cond{{Key: "", Revision: 0}}, put("bad/t"))},
			badCase{"Txn cond negative revision", txn([]backends.Cond{{Key: "bad/t", Revision: -1}}, put("bad/t"))},
		)
	}
	for _, c := range cases {
		err := call(t, c.name, c.do)
		if errors.Is(err, errPanicked) {
			continue
		}
		wantErrIs(t, c.name, err, backends.ErrInvalid)
	}
	if got, err := st.List(ctx, ""); err != nil || len(got) != 0 {
		t.Errorf("List(\"\") after only bad calls = (%q, %v), want empty", keysOf(got), err)
	}
}

func (s *suite) testClosed(t *testing.T) {
	st := s.store(t)
	ctx := t.Context()
	e := mustCreate(t, st, "closed/k", []byte("v"), s.ttl)
	caps := st.Capabilities()
	var events <-chan backends.Event
	if w, ok := st.(backends.Watcher); ok && caps.Has(backends.CapWatch) {
		var err error
		if events, err = w.Watch(ctx, "closed/"); err != nil {
			t.Fatalf("Watch(%q): %v", "closed/", err)
		}
	}
	if err := call(t, "Close", st.Close); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := call(t, "second Close", st.Close); err != nil {
		t.Errorf("second Close = %v, want nil (idempotent)", err)
	}
	if events != nil {
		if err := drainClosed(t, events); err != nil {
			t.Errorf("watch channel after Close: %v", err)
		}
	}
	cases := []badCase{
		{"Get", func() error { _, err := st.Get(ctx, e.Key); return err }},
		{"List", func() error { _, err := st.List(ctx, ""); return err }},
		{"CreateIfAbsent", func() error { _, err := st.CreateIfAbsent(ctx, "closed/new", nil, 0); return err }},
		{"CompareAndSet", func() error { _, err := st.CompareAndSet(ctx, e.Key, e.Revision, nil, 0); return err }},
		{"CompareAndDelete", func() error { return st.CompareAndDelete(ctx, e.Key, e.Revision) }},
		{"KeepAlive", func() error { _, err := st.KeepAlive(ctx, e.Key, e.Revision, s.ttl); return err }},
	}
	if w, ok := st.(backends.Watcher); ok && caps.Has(backends.CapWatch) {
		cases = append(cases, badCase{"Watch", func() error { _, err := w.Watch(ctx, ""); return err }})
	}
	if tx, ok := st.(backends.Txner); ok && caps.Has(backends.CapTxn) {
		cases = append(cases, badCase{"Txn", func() error {
			_, err := tx.Txn(ctx, nil, []backends.Op{{Kind: backends.OpPut, Key: "closed/t"}})
			return err
		}})
	}
	if caps.Has(backends.CapClaims) {
		cases = append(cases, badCase{"Locker.TryAcquire", func() error {
			l, err := backends.NewLocker(st)
			if err != nil {
				return err
			}
			h, err := backends.NewHolder("closed holder")
			if err != nil {
				return err
			}
			_, err = l.TryAcquire(ctx, "closed/claim", h, s.ttl)
			return err
		}})
	}
	for _, c := range cases {
		err := call(t, c.name+" after Close", c.do)
		if errors.Is(err, errPanicked) {
			continue
		}
		wantErrIs(t, c.name+" after Close", err, backends.ErrClosed)
	}
}

func (s *suite) testPeer(t *testing.T) {
	if s.h.Peer == nil {
		t.Skip("Harness.Peer is nil: one store value is the whole scope")
	}
	st := s.store(t)
	p := s.peer(t, st)
	e := mustCreate(t, st, "peer/k", []byte("from store"), 0)
	sameEntry(t, "peer Get of the store's write", mustGet(t, p, e.Key), e)
	u := mustCAS(t, p, e.Key, e.Revision, []byte("from peer"), 0)
	sameEntry(t, "store Get of the peer's write", mustGet(t, st, e.Key), u)
	_, err := st.CompareAndSet(t.Context(), e.Key, e.Revision, []byte("stale"), 0)
	if ce := conflictOf(t, "store CompareAndSet with the revision the peer replaced", err, e.Key, e.Revision, true); ce != nil {
		sameEntry(t, "ConflictError.Current", ce.Current, u)
	}
}
