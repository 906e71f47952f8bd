package filestore

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// One key's file, in full:
//
//	tenure-filestore v1\n
//	key "<the key, Go-quoted>"\n
//	state <rev> <crev> <ttl ns> <expiry ns> <boot id or -> <put|del> <value length>\n
//	state ...\n                  (its previous states, newest first)
//	data\n
//	<the current value><the values of the previous states, in order>
//	\ncrc32c=xxxxxxxx\n
//
// The checksum (CRC-32C, lowercase hex) covers every byte before the
// trailer. A file decodes only if it is exactly what encodeRecord writes for
// the record it decodes to: anything else is corrupt.
//
// The previous states are what a watcher that fell behind needs to report
// every revision in order. They are bounded by histMax states and
// histValueBytes of values.
const (
	magic         = "tenure-filestore v1\n"
	magicFamily   = "tenure-filestore v"
	trailerPrefix = "\ncrc32c="
	trailerLen    = len(trailerPrefix) + 8 + 1

	histMax        = 16
	histValueBytes = 8 << 10

	// maxFileBytes bounds what a read accepts. The largest file
	// encodeRecord writes (a MaxKeyBytes key quoted at 4 bytes per byte, a
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
	Expiry         int64  // monotonic nanoseconds (of BootID) at which the entry expires; 0 when TTL is 0
	Deleted        bool
	History        []record
}

// validBootID reports whether id can be stored: 1 to maxBootID bytes of
// [A-Za-z0-9._-], and not "-" (which stands for no boot id).
func validBootID(id string) bool {
	if id == "" || id == "-" || len(id) > maxBootID {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func appendState(b []byte, r record) []byte {
	b = append(b, "state "...)
	b = strconv.AppendInt(b, r.Revision, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.CreateRevision, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(r.TTL), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.Expiry, 10)
	b = append(b, ' ')
	if r.BootID == "" {
		b = append(b, '-')
	} else {
		b = append(b, r.BootID...)
	}
	if r.Deleted {
		b = append(b, " del "...)
	} else {
		b = append(b, " put "...)
	}
	b = strconv.AppendInt(b, int64(len(r.Value)), 10)
	return append(b, '\n')
}

// encodeRecord returns the file content for r. r must be valid (see
// checkRecord); encodeRecord does not check it again.
func encodeRecord(r record) []byte {
	size := len(magic) + 8 + len(r.Key) + 64*(1+len(r.History)) + len(r.Value) + trailerLen
	for _, p := range r.History {
		size += len(p.Value)
	}
	return appendRecord(make([]byte, 0, size), r)
}

// appendRecord appends the file content for r to b.
func appendRecord(b []byte, r record) []byte {
	start := len(b)
	b = append(b, magic...)
	b = append(b, "key "...)
	b = strconv.AppendQuote(b, r.Key)
	b = append(b, '\n')
	b = appendState(b, r)
	for _, p := range r.History {
		b = appendState(b, p)
	}
	b = append(b, "data\n"...)
	b = append(b, r.Value...)
	for _, p := range r.History {
		b = append(b, p.Value...)
	}
	sum := crc32.Checksum(b[start:], crcTable)
	b = append(b, trailerPrefix...)
	const digits = "0123456789abcdef"
	for shift := 28; shift >= 0; shift -= 4 {
		b = append(b, digits[sum>>shift&0xf])
	}
	return append(b, '\n')
}

// encodeBuf holds buffers for decodeRecord's check of the canonical form.
var encodeBuf = sync.Pool{New: func() any { return new([]byte) }}

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
	line, rest, ok := bytes.Cut(rest, []byte("\n"))
	quoted, isKey := bytes.CutPrefix(line, []byte("key "))
	if !ok || !isKey {
		return record{}, corruptf("missing key line")
	}
	key, err := strconv.Unquote(string(quoted))
	if err != nil {
		return record{}, corruptf("key line: %v", err)
	}
	// One array holds every state (its tail is the History), and one copy
	// of the data region holds every value.
	states := make([]record, 0, histMax+1)
	var lens [histMax + 1]int
	boot := "" // the last boot id parsed, whose string the next equal one shares
	for {
		end := bytes.IndexByte(rest, '\n')
		if end < 0 {
			return record{}, corruptf("header not terminated")
		}
		line, rest = rest[:end], rest[end+1:]
		if string(line) == "data" {
			break
		}
		if len(states) > histMax {
			return record{}, corruptf("more than %d previous states", histMax)
		}
		st, n, err := parseState(key, line, boot)
		if err != nil {
			return record{}, err
		}
		if st.BootID != "" {
			boot = st.BootID
		}
		lens[len(states)] = n
		states = append(states, st)
	}
	if len(states) == 0 {
		return record{}, corruptf("no state line")
	}
	total := 0
	for _, n := range lens[:len(states)] {
		total += n
	}
	if total != len(rest) {
		return record{}, corruptf("state lines give %d value bytes, file holds %d", total, len(rest))
	}
	data := bytes.Clone(rest)
	for i := range states {
		if n := lens[i]; n > 0 {
			states[i].Value = data[:n:n]
			data = data[n:]
		}
	}
	r := states[0]
	if len(states) > 1 {
		r.History = states[1:]
	}
	if err := checkRecord(r); err != nil {
		return record{}, err
	}
	buf := encodeBuf.Get().(*[]byte)
	*buf = appendRecord((*buf)[:0], r)
	canonical := bytes.Equal(*buf, b)
	encodeBuf.Put(buf)
	if !canonical {
		return record{}, corruptf("not in canonical form")
	}
	return r, nil
}

// parseState parses one state line (see encodeRecord) and returns the state
// without its value and the value's length. A boot id equal to boot (one
// parsed before) shares its string.
func parseState(key string, line []byte, boot string) (record, int, error) {
	var f [8][]byte
	rest := line
	for i := range f {
		end := bytes.IndexByte(rest, ' ')
		if end == 0 || (end < 0) != (i == len(f)-1) || len(rest) == 0 {
			return record{}, 0, corruptf("malformed state line %q", line)
		}
		if end < 0 {
			f[i] = rest
			break
		}
		f[i], rest = rest[:end], rest[end+1:]
	}
	if string(f[0]) != "state" {
		return record{}, 0, corruptf("malformed state line %q", line)
	}
	var n [5]int64
	for i, j := range [...]int{1, 2, 3, 4, 7} {
		v, ok := decimal(f[j])
		if !ok {
			var err error
			if v, err = strconv.ParseInt(string(f[j]), 10, 64); err != nil {
				return record{}, 0, corruptf("state line %q: %v", line, err)
			}
		}
		n[i] = v
	}
	r := record{Key: key, Revision: n[0], CreateRevision: n[1], TTL: time.Duration(n[2]), Expiry: n[3]}
	switch id := f[5]; {
	case string(id) == "-":
	case boot != "" && string(id) == boot:
		r.BootID = boot
	default:
		if r.BootID = string(id); !validBootID(r.BootID) {
			return record{}, 0, corruptf("state line %q: malformed boot id", line)
		}
	}
	switch string(f[6]) {
	case "put":
	case "del":
		r.Deleted = true
	default:
		return record{}, 0, corruptf("state line %q: kind %q", line, f[6])
	}
	if n[4] < 0 || n[4] > backends.MaxValueBytes {
		return record{}, 0, corruptf("state line %q: value length out of range", line)
	}
	return r, int(n[4]), nil
}

// decimal parses b if it is an optional minus sign and 1 to 18 decimal
// digits: every number a store writes, until an expiry in monotonic
// nanoseconds passes 31 years of uptime. Anything else is left to
// strconv.ParseInt, which parses the rest and words the error a corrupt
// file reports; the canonical-form check then refuses what encodeRecord
// would not have written ("+1", "01", "-0").
func decimal(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
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
	case r.TTL > 0 && !validBootID(r.BootID):
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
