// Package wire is how tenure lays its claims out in a store: the value a
// claim key holds, the rules for a holder's identity, and the store keys of
// a slot group. Package backends, the kube backend and package slots all
// read and write these formats; they are not promised to anyone else.
//
// It imports nothing of tenure's, so that package backends can use it.
// Its errors carry no package prefix and no sentinel: the caller wraps them
// with its own prefix and backends.ErrInvalid or backends.ErrCorrupt.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIDBytes bounds a holder's identity; it equals backends.MaxKeyBytes.
const MaxIDBytes = 512

// ValidateID checks a holder's identity: non-empty valid UTF-8 of at most
// MaxIDBytes. Any Unicode, spaces and slashes are allowed.
func ValidateID(id string) error {
	switch {
	case id == "":
		return errors.New("empty holder id")
	case !utf8.ValidString(id):
		return fmt.Errorf("holder id %q is not valid UTF-8", id)
	case len(id) > MaxIDBytes:
		return fmt.Errorf("holder id of %d bytes exceeds %d", len(id), MaxIDBytes)
	}
	return nil
}

// MaxAdvertisedBytes bounds the value a holder advertises with its claim;
// it equals backends.MaxAdvertisedBytes.
const MaxAdvertisedBytes = 256

// ValidateAdvertised checks the value a holder advertises: at most
// MaxAdvertisedBytes of valid UTF-8 with no control characters (no line
// breaks, tabs or NUL), so that it reads safely in a table, a log line or
// a metric label. The empty value (nothing advertised) is valid.
func ValidateAdvertised(v string) error {
	switch {
	case len(v) > MaxAdvertisedBytes:
		return fmt.Errorf("advertised value of %d bytes exceeds %d", len(v), MaxAdvertisedBytes)
	case !utf8.ValidString(v):
		return fmt.Errorf("advertised value %q is not valid UTF-8", v)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return fmt.Errorf("advertised value %q contains the control character %U", v, r)
		}
	}
	return nil
}

// claim is the value a claim key holds. Advertised was added after the
// first version without changing V: a claim written before it reads as
// advertising nothing, and a reader that predates it ignores the field.
type claim struct {
	V          int    `json:"v"`
	ID         string `json:"id"`
	Nonce      string `json:"nonce,omitempty"`
	Advertised string `json:"adv,omitempty"`
}

// Claim is a claim value decoded: the holder's identity, its nonce and
// the value it advertises.
type Claim struct {
	ID, Nonce, Advertised string
}

// EncodeClaim is the value stored for the holder c.
func EncodeClaim(c Claim) []byte {
	b, _ := json.Marshal(claim{V: 1, ID: c.ID, Nonce: c.Nonce, Advertised: c.Advertised}) // cannot fail for strings
	return b
}

// DecodeClaim parses a value written by EncodeClaim. Anything else is an
// error, which the caller reports as corrupt: a claim key holding a foreign
// value is never read as free.
func DecodeClaim(value []byte) (Claim, error) {
	if c, ok := decodeCanonical(value); ok {
		return c, nil
	}
	var c claim
	if err := json.Unmarshal(value, &c); err != nil {
		return Claim{}, fmt.Errorf("decode claim: %v", err)
	}
	if c.V != 1 || c.ID == "" {
		return Claim{}, fmt.Errorf("decode claim: version %d, id %q", c.V, c.ID)
	}
	return Claim{ID: c.ID, Nonce: c.Nonce, Advertised: c.Advertised}, nil
}

// decodeCanonical reads, without encoding/json, the form EncodeClaim gives
// a claim whose strings need no escape: a group member reads every claim
// of its group at each event and each full read. ok is false for any other
// form, which json.Unmarshal then reads, so the answers are those
// json.Unmarshal would give.
func decodeCanonical(v []byte) (c Claim, ok bool) {
	rest, found := strings.CutPrefix(string(v), `{"v":1,"id":"`)
	if !found {
		return Claim{}, false
	}
	i := plainString(rest)
	if i <= 0 { // no end, or an empty id: json.Unmarshal says what is wrong
		return Claim{}, false
	}
	c.ID, rest = rest[:i], rest[i+1:]
	// The optional fields, in the order EncodeClaim writes them.
	for _, f := range []struct {
		head string
		to   *string
	}{{`,"nonce":"`, &c.Nonce}, {`,"adv":"`, &c.Advertised}} {
		after, found := strings.CutPrefix(rest, f.head)
		if !found {
			continue
		}
		j := plainString(after)
		if j < 0 {
			return Claim{}, false
		}
		*f.to, rest = after[:j], after[j+1:]
	}
	if rest != "}" {
		return Claim{}, false
	}
	return c, true
}

// plainString returns the index of the quote that ends the JSON string s
// begins, if every byte before it stands for itself (valid UTF-8, no
// escape, no control character); -1 otherwise.
func plainString(s string) int {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			if !utf8.ValidString(s[:i]) {
				return -1
			}
			return i
		case c == '\\' || c < 0x20:
			return -1
		}
	}
	return -1
}

// A slot group on claim key K lives in the store keys K + "/size" (its N,
// written once and never deleted) and K + "/slot-<i>" (one claim per
// slot). A single claim on K reads the size key to tell that K is a group,
// and refuses it.
const (
	sizeSuffix = "/size"
	slotInfix  = "/slot-"
)

// SizeKey is the store key holding the size of slot group key. Its presence
// marks key as a slot group.
func SizeKey(key string) string { return key + sizeSuffix }

// SlotKey is the store key of slot i of slot group key.
func SlotKey(key string, i int) string { return key + slotInfix + strconv.Itoa(i) }

// SlotPrefix is the prefix under which every slot key of group key lies
// (with the keys of groups nested under key).
func SlotPrefix(key string) string { return key + slotInfix }

// Slot parses storeKey back to a slot index of group key. It reports false
// for any other key, including those of groups nested under key.
func Slot(key, storeKey string) (int, bool) {
	rest, ok := strings.CutPrefix(storeKey, key+slotInfix)
	if !ok || rest == "" || (len(rest) > 1 && rest[0] == '0') {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || strconv.Itoa(i) != rest {
		return 0, false
	}
	return i, true
}

// A transfer of claim K to another candidate is the store key K +
// "/transfer", written by the leader as it gives K up and deleted by the
// target once it holds K (or left to expire). While it lives, only the
// candidate it names may take K.
const transferSuffix = "/transfer"

// TransferKey is the store key holding a transfer of claim key.
func TransferKey(key string) string { return key + transferSuffix }

// transfer is the value a transfer key holds.
type transfer struct {
	V         int    `json:"v"`
	To        string `json:"to"`
	From      string `json:"from"`
	FromNonce string `json:"from_nonce,omitempty"`
	Token     int64  `json:"token"`
}

// EncodeTransfer is the value stored for a transfer to the identity to,
// made by the holder from (id and nonce) of the claim with token.
func EncodeTransfer(to, from, fromNonce string, token int64) []byte {
	b, _ := json.Marshal(transfer{V: 1, To: to, From: from, FromNonce: fromNonce, Token: token}) // cannot fail for strings
	return b
}

// DecodeTransfer parses a value written by EncodeTransfer. Anything else is
// an error, which the caller reports as corrupt.
func DecodeTransfer(value []byte) (to, from, fromNonce string, token int64, err error) {
	var t transfer
	if err := json.Unmarshal(value, &t); err != nil {
		return "", "", "", 0, fmt.Errorf("decode transfer: %v", err)
	}
	if t.V != 1 || t.To == "" || t.From == "" {
		return "", "", "", 0, fmt.Errorf("decode transfer: version %d, to %q, from %q", t.V, t.To, t.From)
	}
	return t.To, t.From, t.FromNonce, t.Token, nil
}

// A candidacy for claim K is the store key K + "/candidate-" + the
// candidate's nonce: one per candidate instance, renewed like a claim.
const candidateInfix = "/candidate-"

// CandidateKey is the store key of the candidacy of the instance with
// nonce for claim key.
func CandidateKey(key, nonce string) string { return key + candidateInfix + nonce }

// CandidatePrefix is the prefix under which every candidacy of claim key
// lies.
func CandidatePrefix(key string) string { return key + candidateInfix }

// candidacy is the value a candidacy key holds.
type candidacy struct {
	V          int    `json:"v"`
	ID         string `json:"id"`
	Nonce      string `json:"nonce"`
	Advertised string `json:"adv,omitempty"`
	Priority   int64  `json:"prio"`
}

// EncodeCandidacy is the value stored for the candidate c with priority.
func EncodeCandidacy(c Claim, priority int64) []byte {
	b, _ := json.Marshal(candidacy{V: 1, ID: c.ID, Nonce: c.Nonce, Advertised: c.Advertised, Priority: priority}) // cannot fail for strings
	return b
}

// DecodeCandidacy parses a value written by EncodeCandidacy. Anything else
// is an error, which the caller reports as corrupt.
func DecodeCandidacy(value []byte) (Claim, int64, error) {
	var c candidacy
	if err := json.Unmarshal(value, &c); err != nil {
		return Claim{}, 0, fmt.Errorf("decode candidacy: %v", err)
	}
	if c.V != 1 || c.ID == "" || c.Nonce == "" {
		return Claim{}, 0, fmt.Errorf("decode candidacy: version %d, id %q, nonce %q", c.V, c.ID, c.Nonce)
	}
	return Claim{ID: c.ID, Nonce: c.Nonce, Advertised: c.Advertised}, c.Priority, nil
}

// requestName is the last part of the store key of a transfer request for
// claim K, K + "/candidate-request": it lies under the candidacies, so
// that the leader's one listing of them finds it, and no nonce is it.
const requestName = "request"

// TransferRequestKey is the store key of a request that the leader of
// claim key transfer it.
func TransferRequestKey(key string) string { return CandidatePrefix(key) + requestName }

// transferRequest is the value a transfer request key holds.
type transferRequest struct {
	V  int    `json:"v"`
	To string `json:"to,omitempty"`
}

// EncodeTransferRequest is the value stored for a request to transfer to
// the identity to (empty: to the best candidate).
func EncodeTransferRequest(to string) []byte {
	b, _ := json.Marshal(transferRequest{V: 1, To: to}) // cannot fail for strings
	return b
}

// DecodeTransferRequest parses a value written by EncodeTransferRequest.
func DecodeTransferRequest(value []byte) (to string, err error) {
	var r transferRequest
	if err := json.Unmarshal(value, &r); err != nil {
		return "", fmt.Errorf("decode transfer request: %v", err)
	}
	if r.V != 1 {
		return "", fmt.Errorf("decode transfer request: version %d", r.V)
	}
	return r.To, nil
}
