package filestore

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tenure-go/tenure/backends"
)

var sampleRecords = []record{
	{Key: "a", Value: []byte("v"), Revision: 1, CreateRevision: 1},
	{Key: "leader/claim", Value: []byte(`{"v":1,"id":"x"}`), Revision: 7, CreateRevision: 5,
		TTL: 3 * time.Second, BootID: "867ba638-726c-4655-838e-f3be27e93734", Expiry: 123456789},
	{Key: "gone", Revision: 9, CreateRevision: 4, Deleted: true},
	{Key: "empty value", Revision: 2, CreateRevision: 2},
	{Key: "ünïcödé / .. \n\t<&>", Value: []byte{0, 1, 2, 255, '\n'}, Revision: 3, CreateRevision: 3},
	{Key: "with history", Value: []byte("v3"), Revision: 3, CreateRevision: 3, TTL: time.Second, BootID: "b", Expiry: 9,
		History: []record{
			{Key: "with history", Revision: 2, CreateRevision: 1, Deleted: true},
			{Key: "with history", Value: []byte("v2"), Revision: 2, CreateRevision: 1},
			{Key: "with history", Value: []byte("v1"), Revision: 1, CreateRevision: 1, TTL: time.Second, BootID: "a", Expiry: 5},
		}},
	{Key: strings.Repeat("x", backends.MaxKeyBytes), Value: bytes.Repeat([]byte{0xab}, backends.MaxValueBytes), Revision: 1 << 60, CreateRevision: 1},
}

// TestBiggestFileFits builds the largest file the store can write: the
// longest key of the worst-escaped bytes, the largest value, long boot ids
// and a full history. A read must accept it.
func TestBiggestFileFits(t *testing.T) {
	key := strings.Repeat("\x01", backends.MaxKeyBytes)
	state := func(rev int64, n int) record {
		return record{Key: key, Value: make([]byte, n), Revision: rev, CreateRevision: 1,
			TTL: time.Hour, BootID: strings.Repeat("b", maxBootID), Expiry: 1 << 62}
	}
	r := state(1<<61, histValueBytes/histMax)
	for range histMax {
		next := state(r.Revision+1, histValueBytes/histMax)
		next.History = history(r)
		r = next
	}
	last := state(r.Revision+1, backends.MaxValueBytes)
	last.History = history(r)
	if len(last.History) != histMax {
		t.Fatalf("history of %d states, want %d", len(last.History), histMax)
	}
	b := encodeRecord(last)
	if len(b) > maxFileBytes {
		t.Fatalf("largest file is %d bytes, over the %d a read accepts", len(b), maxFileBytes)
	}
	if _, err := decodeRecord(b); err != nil {
		t.Fatalf("decode of the largest file: %v", err)
	}
	t.Logf("largest file: %d bytes", len(b))
}

func TestHistoryBounds(t *testing.T) {
	small := func(rev int64, n int) record {
		return record{Key: "k", Value: make([]byte, n), Revision: rev, CreateRevision: 1}
	}
	// A chain of 40 writes of small values keeps histMax states.
	r := small(1, 10)
	for rev := int64(2); rev <= 40; rev++ {
		next := small(rev, 10)
		next.History = history(r)
		r = next
	}
	if len(r.History) != histMax || r.History[0].Revision != 39 || r.History[histMax-1].Revision != 40-histMax {
		t.Errorf("history after 40 writes: %d states from rev %d; want %d from rev 39", len(r.History), r.History[0].Revision, histMax)
	}
	if err := checkRecord(r); err != nil {
		t.Errorf("checkRecord: %v", err)
	}
	// Values count against histValueBytes; one too large ends the history.
	big := small(5, histValueBytes/2+1)
	big.History = []record{small(4, histValueBytes/2)}
	next := small(6, 1)
	next.History = history(big)
	if len(next.History) != 1 || next.History[0].Revision != 5 {
		t.Errorf("history over %d value bytes kept %d states, want 1", histValueBytes, len(next.History))
	}
	huge := small(7, histValueBytes+1)
	after := small(8, 1)
	if after.History = history(huge); len(after.History) != 0 {
		t.Errorf("history of a value over %d bytes kept %d states, want 0", histValueBytes, len(after.History))
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, want := range sampleRecords {
		b := encodeRecord(want)
		got, err := decodeRecord(b)
		if err != nil {
			t.Fatalf("decode(encode(%.40q)): %v", want.Key, err)
		}
		if !sameRecord(got, want) {
			t.Errorf("round trip of %.40q: got %+v, want %+v", want.Key, got, want)
		}
		if again := encodeRecord(got); !bytes.Equal(again, b) {
			t.Errorf("re-encoding %.40q changed the bytes", want.Key)
		}
	}
}

// TestDecodedValuesAreIndependent checks that the values of a decoded record
// and of its history share one copy of the file's data, each capped at its
// own length, so appending to one leaves the others and the file's bytes as
// they were.
func TestDecodedValuesAreIndependent(t *testing.T) {
	want := record{Key: "k", Value: []byte("new"), Revision: 2, CreateRevision: 1, History: []record{
		{Key: "k", Value: []byte("old"), Revision: 1, CreateRevision: 1},
	}}
	b := encodeRecord(want)
	orig := bytes.Clone(b)
	got, err := decodeRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	got.Value = append(got.Value, "er"...)
	got.History[0].Value[0] = 'O'
	if string(got.Value) != "newer" {
		t.Errorf("value after append = %q", got.Value)
	}
	if string(got.History[0].Value) != "Old" {
		t.Errorf("history value = %q, want the one written through it", got.History[0].Value)
	}
	if !bytes.Equal(b, orig) {
		t.Errorf("changing decoded values changed the file's bytes")
	}
	again, err := decodeRecord(orig)
	if err != nil || string(again.History[0].Value) != "old" {
		t.Errorf("decoding again = %q, %v; want the history value %q", again.History[0].Value, err, "old")
	}
}

func sameRecord(a, b record) bool {
	if a.Key != b.Key || !bytes.Equal(a.Value, b.Value) || a.Revision != b.Revision ||
		a.CreateRevision != b.CreateRevision || a.TTL != b.TTL || a.BootID != b.BootID ||
		a.Expiry != b.Expiry || a.Deleted != b.Deleted || len(a.History) != len(b.History) {
		return false
	}
	for i := range a.History {
		if !sameRecord(a.History[i], b.History[i]) {
			return false
		}
	}
	return true
}

// TestDecodeRejectsEveryTruncation cuts a file at every length: none decodes.
func TestDecodeRejectsEveryTruncation(t *testing.T) {
	for _, r := range sampleRecords[:6] {
		b := encodeRecord(r)
		for n := 0; n < len(b); n++ {
			if _, err := decodeRecord(b[:n]); !errors.Is(err, backends.ErrCorrupt) {
				t.Fatalf("decode of %.20q cut to %d/%d bytes: err %v, want ErrCorrupt", r.Key, n, len(b), err)
			}
		}
	}
}

// TestDecodeRejectsEveryBitFlip flips each bit of a file: none decodes.
func TestDecodeRejectsEveryBitFlip(t *testing.T) {
	for _, r := range sampleRecords[:6] {
		b := encodeRecord(r)
		for i := range b {
			for bit := range 8 {
				c := bytes.Clone(b)
				c[i] ^= 1 << bit
				if _, err := decodeRecord(c); !errors.Is(err, backends.ErrCorrupt) {
					t.Fatalf("decode of %.20q with bit %d of byte %d flipped: err %v, want ErrCorrupt", r.Key, bit, i, err)
				}
			}
		}
	}
}

// withCRC appends a correct trailer, so a test reaches the checks behind it.
func withCRC(body string) []byte {
	b := []byte(body)
	return fmt.Appendf(b, "%s%08x\n", trailerPrefix, crc32.Checksum(b, crcTable))
}

// badCRC returns valid with its checksum's last digit changed.
func badCRC(valid []byte) []byte {
	c := bytes.Clone(valid)
	i := len(c) - 2
	if c[i] == '0' {
		c[i] = '1'
	} else {
		c[i] = '0'
	}
	return c
}

func TestDecodeRejects(t *testing.T) {
	valid := encodeRecord(record{Key: "k", Value: []byte("v"), Revision: 2, CreateRevision: 1})
	tests := []struct {
		name string
		in   []byte
		want string // a fragment of the error
	}{
		{"empty", nil, "truncated"},
		{"foreign", []byte("hello world\n"), "not a filestore file"},
		{"json", []byte(`{"key":"k"}`), "not a filestore file"},
		{"future version", []byte("tenure-filestore v2\n{}\n"), "unsupported format version"},
		{"appended", append(bytes.Clone(valid), 'x'), "trailer"},
		{"bad crc", badCRC(valid), "checksum mismatch"},
		{"upper case", bytes.ToUpper(bytes.Clone(valid)), "not a filestore file"},
		{"no key line", withCRC(magic + "state 1 1 0 0 - put 0\ndata\n"), "missing key line"},
		{"unquoted key", withCRC(magic + "key k\nstate 1 1 0 0 - put 0\ndata\n"), "key line"},
		{"not terminated", withCRC(magic + `key "k"` + "\nstate 1 1 0 0 - put 0"), "not terminated"},
		{"no state", withCRC(magic + `key "k"` + "\ndata\n"), "no state line"},
		{"short state", withCRC(magic + `key "k"` + "\nstate 1 1 0 0 - put\ndata\n"), "malformed state line"},
		{"double space", withCRC(magic + `key "k"` + "\nstate 1  1 0 0 - put 0\ndata\n"), "malformed state line"},
		{"not a number", withCRC(magic + `key "k"` + "\nstate 1 x 0 0 - put 0\ndata\n"), "invalid syntax"},
		{"plus sign", withCRC(magic + `key "k"` + "\nstate +1 1 0 0 - put 0\ndata\n"), "canonical"},
		{"leading zero", withCRC(magic + `key "k"` + "\nstate 01 1 0 0 - put 0\ndata\n"), "canonical"},
		{"escaped key", withCRC(magic + `key "\x6b"` + "\nstate 1 1 0 0 - put 0\ndata\n"), "canonical"},
		{"bad kind", withCRC(magic + `key "k"` + "\nstate 1 1 0 0 - set 0\ndata\n"), "kind"},
		{"bad boot id", withCRC(magic + `key "k"` + "\nstate 1 1 5 9 b/c put 0\ndata\n"), "boot id"},
		{"len mismatch", withCRC(magic + `key "k"` + "\nstate 1 1 0 0 - put 3\ndata\nab"), "value bytes"},
		{"negative len", withCRC(magic + `key "k"` + "\nstate 1 1 0 0 - put -1\ndata\n"), "out of range"},
		{"empty key", withCRC(magic + `key ""` + "\nstate 1 1 0 0 - put 0\ndata\n"), "stored key"},
		{"zero rev", withCRC(magic + `key "k"` + "\nstate 0 0 0 0 - put 0\ndata\n"), "revision 0"},
		{"crev above rev", withCRC(magic + `key "k"` + "\nstate 1 2 0 0 - put 0\ndata\n"), "create revision"},
		{"negative ttl", withCRC(magic + `key "k"` + "\nstate 1 1 -1 0 - put 0\ndata\n"), "negative ttl"},
		{"ttl without boot", withCRC(magic + `key "k"` + "\nstate 1 1 5 9 - put 0\ndata\n"), "boot id"},
		{"expiry without ttl", withCRC(magic + `key "k"` + "\nstate 1 1 0 0 b put 0\ndata\n"), "without a ttl"},
		{"tombstone with value", withCRC(magic + `key "k"` + "\nstate 1 1 0 0 - del 1\ndata\nx"), "tombstone"},
		{"oversized", bytes.Repeat([]byte("x"), maxFileBytes+1), "exceeds"},
		{"history gap", withCRC(magic + `key "k"` + "\nstate 3 1 0 0 - put 0\nstate 1 1 0 0 - put 0\ndata\n"), "cannot precede"},
		{"history of a tombstone", withCRC(magic + `key "k"` + "\nstate 2 1 0 0 - del 0\nstate 1 1 0 0 - put 0\ndata\n"), "cannot precede"},
		{"two tombstones", withCRC(magic + `key "k"` + "\nstate 2 2 0 0 - put 0\nstate 1 1 0 0 - del 0\nstate 1 1 0 0 - del 0\ndata\n"), "cannot precede"},
		{"bad history state", withCRC(magic + `key "k"` + "\nstate 2 1 0 0 - put 0\nstate 1 1 -1 0 - put 0\ndata\n"), "history: "},
		{"history too long", withCRC(magic + `key "k"` + "\n" + strings.Repeat("state 1 1 0 0 - put 0\n", histMax+2) + "data\n"), "previous states"},
	}
	for _, tt := range tests {
		_, err := decodeRecord(tt.in)
		if !errors.Is(err, backends.ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: decode(%.60q) = %v, want ErrCorrupt mentioning %q", tt.name, tt.in, err, tt.want)
		}
	}
}

func TestFileNames(t *testing.T) {
	keys := []string{
		"a", "/", "..", "../../etc/passwd", ".lock", ".tmp-0000000000000000-0000000000000000",
		"with space", "ünïcödé", "日本語/キー", "UPPER", "upper", "a\nb",
		strings.Repeat("k", maxInlineKey), strings.Repeat("k", maxInlineKey+1), strings.Repeat("é", 256),
	}
	seen := map[string]string{}
	for _, key := range keys {
		name := fileName(key)
		if strings.ContainsAny(name, "/\x00") || name == "." || name == ".." || len(name) > 255 {
			t.Errorf("fileName(%.40q) = %q: not a safe file name", key, name)
		}
		if prev, dup := seen[strings.ToLower(name)]; dup {
			t.Errorf("fileName(%.40q) = %q collides (case-insensitively) with that of %.40q", key, name, prev)
		}
		seen[strings.ToLower(name)] = key
		kind, got, err := parseName(name)
		if err != nil {
			t.Errorf("parseName(fileName(%.40q)): %v", key, err)
		}
		wantKind := nameInline
		if len(key) > maxInlineKey {
			wantKind = nameHashed
		}
		if kind != wantKind {
			t.Errorf("parseName(fileName(%.40q)) kind = %d, want %d", key, kind, wantKind)
		}
		if kind == nameInline && got != key {
			t.Errorf("parseName(fileName(%.40q)) key = %q", key, got)
		}
	}
}

func TestParseName(t *testing.T) {
	tests := []struct {
		name    string
		kind    nameKind
		corrupt bool
	}{
		{".lock", nameOther, false},
		{"notes.txt", nameOther, false},
		{tempName(42, 7), nameTemp, false},
		{".tmp-garbage", nameTemp, false},
		{"k-", nameInline, true},
		{"k-zz", nameInline, true},  // outside the alphabet
		{"k-C5", nameInline, true},  // upper case is not canonical
		{"k-c5", nameInline, true},  // non-canonical trailing bits
		{"k-0", nameInline, true},   // impossible length
		{"h-abc", nameHashed, true}, // short
		{"h-" + strings.Repeat("A", 64), nameHashed, true},
		{"h-" + strings.Repeat("a", 64), nameHashed, false},
	}
	for _, tt := range tests {
		kind, _, err := parseName(tt.name)
		if kind != tt.kind || (err != nil) != tt.corrupt {
			t.Errorf("parseName(%q) = kind %d, err %v; want kind %d, corrupt %v", tt.name, kind, err, tt.kind, tt.corrupt)
		}
		if err != nil && !errors.Is(err, backends.ErrCorrupt) {
			t.Errorf("parseName(%q) error %v does not wrap ErrCorrupt", tt.name, err)
		}
	}
}

func TestTempNames(t *testing.T) {
	for _, off := range []int64{0, 1, lockOffset("a"), 1<<62 - 1} {
		name := tempName(off, 0xdeadbeef)
		got, err := tempOffset(name)
		if err != nil || got != off {
			t.Errorf("tempOffset(%q) = %d, %v; want %d", name, got, err, off)
		}
	}
	for _, name := range []string{".tmp-", ".tmp-x", "k-00", ".tmp-zzzzzzzzzzzzzzzz-0000000000000000"} {
		if _, err := tempOffset(name); err == nil {
			t.Errorf("tempOffset(%q) accepted a malformed name", name)
		}
	}
}

// FuzzDecode checks that decoding never panics, that whatever decodes is a
// valid record, and that only the exact bytes encodeRecord writes for a
// record decode. Each input is tried as is and with a correct checksum
// appended, so the fuzzer also reaches the header checks behind the CRC.
func FuzzDecode(f *testing.F) {
	for _, r := range sampleRecords[:6] {
		b := encodeRecord(r)
		f.Add(b)
		f.Add(b[:len(b)-trailerLen])
	}
	f.Add([]byte(magic))
	f.Add([]byte(magic + `key "k"` + "\nstate 2 1 5 9 b put 1\nstate 1 1 0 0 - del 0\ndata\nv"))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, b)
		checkDecode(t, withCRC(string(b)))
	})
}

func checkDecode(t *testing.T, b []byte) {
	r, err := decodeRecord(b)
	if err != nil {
		if !errors.Is(err, backends.ErrCorrupt) {
			t.Fatalf("decode error %v does not wrap ErrCorrupt", err)
		}
		return
	}
	if err := checkRecord(r); err != nil {
		t.Fatalf("decoded an invalid record %+v: %v", r, err)
	}
	if !utf8.ValidString(r.Key) {
		t.Fatalf("decoded a key that is not UTF-8: %q", r.Key)
	}
	if again := encodeRecord(r); !bytes.Equal(again, b) {
		t.Fatalf("decoded %q, which encodes differently: %q", b, again)
	}
}
