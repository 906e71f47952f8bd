package nats

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/tenure-go/tenure/backends"
)

// Headers of the messages the store writes. The value itself is the
// message body, untouched.
const (
	// hdrTTL is the entry's TTL in nanoseconds ("0": none). Every message
	// the store writes for a live entry carries it; a message without it
	// was not written by tenure and reads as corrupt.
	hdrTTL = "Tenure-TTL"
	// hdrRev is the logical revision a keep-alive keeps, or the one a
	// delete removed. A value write has none: its revision is its own
	// stream sequence.
	hdrRev = "Tenure-Revision"
	// hdrCreate is the create revision (the fencing token). A create has
	// none: its token is its own stream sequence.
	hdrCreate = "Tenure-Create-Revision"

	// What the server and the KV layer of nats.go write.
	hdrKVOp        = "KV-Operation"
	hdrMarker      = "Nats-Marker-Reason"
	kvOpDelete     = "DEL"
	kvOpPurge      = "PURGE"
	wrongLastSeq   = 10071 // JSStreamWrongLastSequenceErr
	wrongLastSeqR  = 10164 // the same, from a replicated stream
	noMessageFound = 10037
	streamNotFound = 10059
	badTTL         = 10165 // a message TTL the stream refuses
	storeFailed    = 10077 // the stream's store refused a message (a limit with Discard new)
	// JSClusterNotAvailErr, "JetStream system temporarily unavailable":
	// the cluster has had no meta leader for a while.
	clusterNotAvailable = 10008
	// JSClusterNoPeersErrF, "no suitable peers for placement": no set of
	// servers can take a stream of the replicas asked for.
	noPeers = 10005
)

// encodeKey maps a tenure key (any UTF-8 but NUL) onto one subject token:
// ASCII letters, digits, '-', '_' and '/' stand for themselves, every other
// byte is '=' and two upper-case hex digits. The map is a prefix-preserving
// bijection byte by byte, so a key prefix is a token prefix, and the token
// never holds '.', '*', '>' or a space.
func encodeKey(key string) string {
	var b strings.Builder
	b.Grow(len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "=%02X", c)
	}
	return b.String()
}

func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '/'
}

// decodeKey inverts encodeKey; ok is false for a token encodeKey never
// makes (a key written by another client).
func decodeKey(tok string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c != '=' {
			if !plain(c) {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+3 > len(tok) {
			return "", false
		}
		v, err := strconv.ParseUint(tok[i+1:i+3], 16, 8)
		if err != nil || plain(byte(v)) || tok[i+1:i+3] != fmt.Sprintf("%02X", v) {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), true
}

// record is what one stream message says about its key.
type record struct {
	seq     uint64
	present bool // false: a delete, a purge or an expiry marker
	// keepAlive: the message rewrote an entry without changing its value
	// or revisions.
	keepAlive bool
	entry     backends.Entry // Key, Value, Revision, CreateRevision, TTL
}

// decode reads a stream message of key. A delete carries the revisions it
// removed where tenure wrote it; a marker the server wrote carries none.
func decode(key string, seq uint64, h nats.Header, data []byte) (record, error) {
	r := record{seq: seq, entry: backends.Entry{Key: key}}
	if op := h.Get(hdrKVOp); op == kvOpDelete || op == kvOpPurge || h.Get(hdrMarker) != "" {
		rev, _ := strconv.ParseInt(h.Get(hdrRev), 10, 64)
		create, _ := strconv.ParseInt(h.Get(hdrCreate), 10, 64)
		r.entry.Revision, r.entry.CreateRevision = rev, create
		return r, nil
	}
	ttlText := h.Get(hdrTTL)
	if ttlText == "" {
		return r, fmt.Errorf("nats: key %q: message %d was not written by tenure (no %s header): %w", key, seq, hdrTTL, backends.ErrCorrupt)
	}
	ttl, err := strconv.ParseInt(ttlText, 10, 64)
	if err != nil || ttl < 0 {
		return r, fmt.Errorf("nats: key %q: message %d: bad %s %q: %w", key, seq, hdrTTL, ttlText, backends.ErrCorrupt)
	}
	rev, create := int64(seq), int64(seq)
	if v := h.Get(hdrRev); v != "" {
		r.keepAlive = true
		if rev, err = strconv.ParseInt(v, 10, 64); err != nil || rev <= 0 || rev >= int64(seq) {
			return r, fmt.Errorf("nats: key %q: message %d: bad %s %q: %w", key, seq, hdrRev, v, backends.ErrCorrupt)
		}
	}
	if v := h.Get(hdrCreate); v != "" {
		if create, err = strconv.ParseInt(v, 10, 64); err != nil || create <= 0 || create > rev {
			return r, fmt.Errorf("nats: key %q: message %d: bad %s %q: %w", key, seq, hdrCreate, v, backends.ErrCorrupt)
		}
	}
	r.present = true
	r.entry.Value = data
	r.entry.Revision = rev
	r.entry.CreateRevision = create
	r.entry.TTL = time.Duration(ttl)
	return r, nil
}

// header builds the headers of a write: ttl always, rev only for a
// keep-alive or a delete, create for everything but a create.
func header(ttl time.Duration, rev, create int64) nats.Header {
	h := nats.Header{}
	h.Set(hdrTTL, strconv.FormatInt(int64(ttl), 10))
	if rev > 0 {
		h.Set(hdrRev, strconv.FormatInt(rev, 10))
	}
	if create > 0 {
		h.Set(hdrCreate, strconv.FormatInt(create, 10))
	}
	return h
}
