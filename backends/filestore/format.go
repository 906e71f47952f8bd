package filestore

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// One key's file, in full:
//
//	tenure-filestore v1\n
//	{"key":"...","rev":7,"crev":5,"ttl_ns":...,"boot":"...","exp_ns":...,"len":N,"hist":[{...},...]}\n
//	<N bytes of value><the values of the history entries, in order>
//	\ncrc32c=xxxxxxxx\n
//
// The checksum (CRC-32C, lowercase hex) covers every byte before the trailer.
// The header is the exact output of encoding/json for the header struct; a
// file whose header is not byte-for-byte canonical is rejected, so a file
// decodes only if it is exactly what encodeRecord would have written.
//
// hist lists the key's previous states, newest first, each with its own
// value: what a watcher that fell behind needs to report every revision in
// order. It is bounded by histMax entries and histValueBytes of values.
const (
	magic         = "tenure-filestore v1\n"
	magicFamily   = "tenure-filestore v"
	trailerPrefix = "\ncrc32c="
	trailerLen    = len(trailerPrefix) + 8 + 1

	histMax        = 16
	histValueBytes = 8 << 10

	// maxFileBytes bounds what a read accepts. The largest file
	// encodeRecord writes (a MaxKeyBytes key escaped at 6 bytes per byte, a
	// MaxValueBytes value, a full history, boot ids and numbers) is below it.
	maxFileBytes = 128 << 10
	maxBootID    = 64
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// record is the decoded content of one canonical file: the key's current
// state and, in History, its previous states (newest first; their own
// History is empty). A tombstone (Deleted) keeps the last Revision and
// CreateRevision of the key, so a later create continues above them.
type record struct {
	Key            string
	Value          []byte
	Revision       int64
	CreateRevision int64
	TTL            time.Duration
	BootID         string // the boot the expiry was computed in; "" when TTL is 0
	Expiry         int64  // boottime nanoseconds at which the entry expires; 0 when TTL is 0
	Deleted        bool
	History        []record
}

type version struct {
	Rev     int64  `json:"rev"`
	CRev    int64  `json:"crev"`
	TTL     int64  `json:"ttl_ns"`
	Boot    string `json:"boot,omitempty"`
	Exp     int64  `json:"exp_ns,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
	Len     int    `json:"len"`
}

type header struct {
	Key string `json:"key"`
	version
	Hist []version `json:"hist,omitempty"`
}

func versionOf(r record) version {
	return version{Rev: r.Revision, CRev: r.CreateRevision, TTL: int64(r.TTL), Boot: r.BootID,
		Exp: r.Expiry, Deleted: r.Deleted, Len: len(r.Value)}
}

func (v version) record(key string, value []byte) record {
	r := record{Key: key, Revision: v.Rev, CreateRevision: v.CRev, TTL: time.Duration(v.TTL),
		BootID: v.Boot, Expiry: v.Exp, Deleted: v.Deleted}
	if len(value) > 0 {
		r.Value = bytes.Clone(value)
	}
	return r
}

// encodeRecord returns the file content for r. r must be valid (see
// checkRecord); encodeRecord does not check it again.
func encodeRecord(r record) []byte {
	h := header{Key: r.Key, version: versionOf(r)}
	size := len(r.Value)
	for _, p := range r.History {
		h.Hist = append(h.Hist, versionOf(p))
		size += len(p.Value)
	}
	hb, _ := json.Marshal(h) // cannot fail: strings, integers and bools
	b := make([]byte, 0, len(magic)+len(hb)+1+size+trailerLen)
	b = append(b, magic...)
	b = append(b, hb...)
	b = append(b, '\n')
	b = append(b, r.Value...)
	for _, p := range r.History {
		b = append(b, p.Value...)
	}
	sum := crc32.Checksum(b, crcTable)
	b = append(b, trailerPrefix...)
	b = fmt.Appendf(b, "%08x\n", sum)
	return b
}

// corruptf returns an error wrapping backends.ErrCorrupt.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", backends.ErrCorrupt, fmt.Sprintf(format, args...))
}

// decodeRecord parses a file's content. Anything that encodeRecord did not
// write (truncated, corrupted, another format, another version) is an error
// wrapping backends.ErrCorrupt.
func decodeRecord(b []byte) (record, error) {
	if len(b) > maxFileBytes {
		return record{}, corruptf("file of %d bytes exceeds %d", len(b), maxFileBytes)
	}
	if !bytes.HasPrefix(b, []byte(magic)) {
		if bytes.HasPrefix(b, []byte(magicFamily)) {
			return record{}, corruptf("unsupported format version %q", firstLine(b))
		}
		if len(b) < len(magic) && bytes.HasPrefix([]byte(magic), b) {
			return record{}, corruptf("truncated at %d bytes", len(b))
		}
		return record{}, corruptf("not a filestore file (starts with %q)", firstLine(b))
	}
	if len(b) < len(magic)+trailerLen {
		return record{}, corruptf("truncated at %d bytes", len(b))
	}
	body, trailer := b[:len(b)-trailerLen], b[len(b)-trailerLen:]
	if !bytes.HasPrefix(trailer, []byte(trailerPrefix)) || trailer[trailerLen-1] != '\n' {
		return record{}, corruptf("missing checksum trailer (truncated or appended to)")
	}
	hexSum := trailer[len(trailerPrefix) : trailerLen-1]
	if !isLowerHex(hexSum) {
		return record{}, corruptf("malformed checksum %q", hexSum)
	}
	want, _ := strconv.ParseUint(string(hexSum), 16, 32) // 8 hex digits always parse
	if got := crc32.Checksum(body, crcTable); uint64(got) != want {
		return record{}, corruptf("checksum mismatch: content %08x, trailer %08x", got, want)
	}

	rest := body[len(magic):]
	nl := bytes.IndexByte(rest, '\n')
	if nl < 0 {
		return record{}, corruptf("header line not terminated")
	}
	line, values := rest[:nl], rest[nl+1:]
	var h header
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return record{}, corruptf("header: %v", err)
	}
	if canon, _ := json.Marshal(h); !bytes.Equal(canon, line) {
		return record{}, corruptf("header is not in canonical form")
	}
	if len(h.Hist) > histMax {
		return record{}, corruptf("history of %d entries exceeds %d", len(h.Hist), histMax)
	}
	total := h.Len
	for _, v := range h.Hist {
		if v.Len < 0 || v.Len > histValueBytes {
			return record{}, corruptf("history value length %d out of range", v.Len)
		}
		total += v.Len
	}
	if h.Len < 0 || total != len(values) {
		return record{}, corruptf("header says %d value bytes, file holds %d", total, len(values))
	}
	r := h.version.record(h.Key, values[:h.Len])
	values = values[h.Len:]
	for _, v := range h.Hist {
		r.History = append(r.History, v.record(h.Key, values[:v.Len]))
		values = values[v.Len:]
	}
	if err := checkRecord(r); err != nil {
		return record{}, err
	}
	return r, nil
}

// checkRecord enforces the invariants every stored record keeps.
func checkRecord(r record) error {
	if err := backends.ValidateKey(r.Key); err != nil {
		return corruptf("stored key: %v", err)
	}
	if err := checkState(r); err != nil {
		return err
	}
	if len(r.History) > histMax {
		return corruptf("history of %d entries exceeds %d", len(r.History), histMax)
	}
	next, n := r, 0
	for _, p := range r.History {
		if err := checkState(p); err != nil {
			return corruptf("history: %v", err)
		}
		if len(p.History) > 0 || p.Key != r.Key {
			return corruptf("history entry of another shape")
		}
		if !precedes(p, next) {
			return corruptf("history state rev %d (deleted %v) cannot precede rev %d (deleted %v)",
				p.Revision, p.Deleted, next.Revision, next.Deleted)
		}
		n += len(p.Value)
		next = p
	}
	if n > histValueBytes {
		return corruptf("history values of %d bytes exceed %d", n, histValueBytes)
	}
	return nil
}

// checkState enforces the invariants of one state of a key.
func checkState(r record) error {
	switch {
	case r.Revision < 1:
		return corruptf("revision %d below 1", r.Revision)
	case r.CreateRevision < 1 || r.CreateRevision > r.Revision:
		return corruptf("create revision %d outside [1, %d]", r.CreateRevision, r.Revision)
	case len(r.Value) > backends.MaxValueBytes:
		return corruptf("value of %d bytes exceeds %d", len(r.Value), backends.MaxValueBytes)
	case r.TTL < 0:
		return corruptf("negative ttl %d", r.TTL)
	case r.TTL == 0 && (r.BootID != "" || r.Expiry != 0):
		return corruptf("expiry without a ttl")
	case r.TTL > 0 && (r.BootID == "" || len(r.BootID) > maxBootID):
		return corruptf("ttl without a valid boot id")
	case r.Deleted && (len(r.Value) > 0 || r.TTL != 0):
		return corruptf("tombstone with a value or ttl")
	}
	return nil
}

// precedes reports whether state p can be the state just before s. A write
// either puts revision p+1 (a compare-and-set, or a create over a tombstone
// or an expired entry) or deletes, which keeps the revision; keep-alives
// make no new state.
func precedes(p, s record) bool {
	if s.Deleted {
		return !p.Deleted && p.Revision == s.Revision
	}
	return p.Revision == s.Revision-1
}

// history is the history a record written after cur carries: cur's state,
// then cur's own history, cut to the bounds.
func history(cur record) []record {
	prev := cur
	prev.History = nil
	out := make([]record, 0, min(histMax, 1+len(cur.History)))
	n := 0
	for _, p := range append([]record{prev}, cur.History...) {
		n += len(p.Value)
		if len(out) == histMax || n > histValueBytes {
			break
		}
		out = append(out, p)
	}
	return out
}

func isLowerHex(b []byte) bool {
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func firstLine(b []byte) string {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	if len(b) > 40 {
		b = b[:40]
	}
	return string(b)
}

// File names. Every name the store writes is one of:
//
//	k-<base32hex of the key>   canonical file of a key of up to maxInlineKey bytes
//	h-<sha256 hex of the key>  canonical file of a longer key
//	.tmp-<lock offset>-<rand>  a write in progress (or an orphan of a dead writer)
//	.lock                      the lock file (byte-range locks, one byte per key)
//
// base32hex (lowercase, unpadded) uses only [0-9a-v], so a key can never
// escape the directory, whatever bytes it holds, and names are stable on
// case-insensitive filesystems. The full key is stored inside the file and
// checked on every read.
const (
	inlinePrefix = "k-"
	hashPrefix   = "h-"
	tempPrefix   = ".tmp-"
	lockName     = ".lock"
	maxInlineKey = 150 // 240 name characters: under every filesystem's 255
)

var keyEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// fileName is the canonical file name of key.
func fileName(key string) string {
	if len(key) <= maxInlineKey {
		return inlinePrefix + keyEncoding.EncodeToString([]byte(key))
	}
	sum := sha256.Sum256([]byte(key))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// nameKind classifies a directory entry.
type nameKind int

const (
	nameOther nameKind = iota
	nameInline
	nameHashed
	nameTemp
)

// parseName classifies name; for an inline name it also returns the key. An
// inline or hashed name that is malformed is returned as an error wrapping
// backends.ErrCorrupt: it sits where a key's file would and must not be
// ignored.
func parseName(name string) (nameKind, string, error) {
	switch {
	case strings.HasPrefix(name, tempPrefix):
		return nameTemp, "", nil
	case strings.HasPrefix(name, inlinePrefix):
		raw, err := keyEncoding.DecodeString(name[len(inlinePrefix):])
		key := string(raw)
		if err != nil || len(raw) > maxInlineKey || backends.ValidateKey(key) != nil || fileName(key) != name {
			return nameInline, "", corruptf("malformed key file name")
		}
		return nameInline, key, nil
	case strings.HasPrefix(name, hashPrefix):
		h := name[len(hashPrefix):]
		if len(h) != 2*sha256.Size || !isLowerHex([]byte(h)) {
			return nameHashed, "", corruptf("malformed key file name")
		}
		return nameHashed, "", nil
	}
	return nameOther, "", nil
}

// lockOffset is the byte of the lock file that key's operation lock covers.
// Two keys that share an offset share a lock, which costs only concurrency.
func lockOffset(key string) int64 {
	sum := sha256.Sum256([]byte(key))
	return int64(binary.BigEndian.Uint64(sum[:8]) >> 2) // non-negative, with room for a 1-byte range
}

// tempName is a fresh temp file name for a write under the lock at off.
func tempName(off int64, nonce uint64) string {
	return fmt.Sprintf("%s%016x-%016x", tempPrefix, off, nonce)
}

// tempOffset parses the lock offset out of a temp file name.
func tempOffset(name string) (int64, error) {
	rest, ok := strings.CutPrefix(name, tempPrefix)
	if !ok || len(rest) != 33 || rest[16] != '-' {
		return 0, errors.New("not a temp file name")
	}
	off, err := strconv.ParseUint(rest[:16], 16, 63)
	if err != nil {
		return 0, err
	}
	return int64(off), nil
}
