package kube

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/wire"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and annotations tenure keeps on the Lease objects it writes.
const (
	// LabelManaged marks every Lease this package writes; List and Watch
	// select on it.
	LabelManaged = "tenure.dev/managed"

	// AnnotationKey holds the original tenure key of a Lease.
	AnnotationKey = "tenure.dev/key"

	// LabelSession, on a claim written in session mode, names the session
	// Lease whose renewals keep the claim alive; a renewal batch lists its
	// claims by it. On a session Lease it is "self".
	LabelSession = "tenure.dev/session"

	// AnnotationEnded, on a session Lease, records the resourceVersion of
	// the version another process found expired and ended: the session is
	// never renewed again.
	AnnotationEnded = "tenure.dev/ended"

	annValue          = "tenure.dev/value"           // base64 of the entry's value
	annTTL            = "tenure.dev/ttl"             // the exact TTL, as a Go duration
	annHolder         = "tenure.dev/holder"          // the holderIdentity tenure wrote
	annRevision       = "tenure.dev/revision"        // absent: the object's resourceVersion
	annCreateRevision = "tenure.dev/create-revision" // absent: the Revision
	annBeat           = "tenure.dev/beat"            // renewals since the last write of the value
)

// namePrefix starts every hashed Lease name.
const namePrefix = "tenure-"

// sessionPrefix starts every session Lease name, which is otherwise random:
// "tenure-session-" and 128 random bits in hex. Hashed names are
// "tenure-" and 40 hex digits, so the two never meet.
const sessionPrefix = "tenure-session-"

// sessionSelf is the LabelSession value that marks a session Lease itself.
const sessionSelf = "self"

// sessionState is what a session Lease means to a judge of its claims.
type sessionState struct {
	alive bool  // a session its owner may still renew
	ended int64 // with !alive, the resourceVersion the session was ended at; 0 if unknown
}

// decodeSession interprets an object at a session's name. A Lease that is not a
// session (no LabelSession=self, or one of another name) is foreign: as
// dead as an absent one, for no owner renews it.
func decodeSession(l *coordinationv1.Lease) sessionState {
	if l.Labels[LabelSession] != sessionSelf || !strings.HasPrefix(l.Name, sessionPrefix) {
		return sessionState{}
	}
	if s, ok := l.Annotations[AnnotationEnded]; ok {
		rv, _ := parseRV(s) // unreadable: dead all the same, ended at an unknown version
		return sessionState{ended: rv}
	}
	return sessionState{alive: true}
}

// hashName is the Lease name a tenure key maps to (unless WithLeaseNames
// maps it): "tenure-" and the first 160 bits of the key's SHA-256 in hex.
// Names are valid DNS-1123 labels whatever the key holds.
func hashName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return namePrefix + hex.EncodeToString(sum[:20])
}

// state is what one Lease object means to the store.
type state struct {
	present bool
	entry   backends.Entry // Key, Value, TTL and revisions; Remaining unset
	rv      int64          // the object's resourceVersion
	session string         // the session Lease whose renewals keep it alive; "" if none
}

// parseRV reads a resourceVersion. The store needs resource versions to be
// the ordered integers the API server serves for built-in resources
// (k8s.io/apimachinery/pkg/util/resourceversion); anything else is refused.
func parseRV(s string) (int64, error) {
	rv, err := strconv.ParseInt(s, 10, 64)
	if err != nil || rv <= 0 {
		return 0, fmt.Errorf("resourceVersion %q is not a positive integer: the server's storage does not order versions, which fencing tokens need: %w", s, backends.ErrCorrupt)
	}
	return rv, nil
}

// decode interprets l as the entry of key. Objects tenure wrote carry the
// value, TTL and logical revisions in annotations. Any other Lease (written by
// client-go's leaderelection, or by tenure and then taken over by such a
// client, which keeps the annotations but changes holderIdentity) is foreign:
// its holder is holderIdentity, its TTL leaseDurationSeconds, and every write
// to it counts as a new revision.
func decode(key string, l *coordinationv1.Lease) (state, error) {
	rv, err := parseRV(l.ResourceVersion)
	if err != nil {
		return state{}, err
	}
	ann := l.Annotations
	if k, ok := ann[AnnotationKey]; ok && k != key {
		return state{}, fmt.Errorf("lease %s holds key %q, not %q: %w", l.Name, k, key, backends.ErrCorrupt)
	}
	st := state{rv: rv, entry: backends.Entry{Key: key}}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	if holder == "" {
		return st, nil // released or cleared: absent
	}
	st.present = true
	// The last write or keep-alive as its writer stamped it (the API
	// server keeps what the client sent): shown to people, never judged.
	if t := l.Spec.RenewTime; t != nil {
		st.entry.Recorded = t.Time
	} else if t := l.Spec.AcquireTime; t != nil {
		st.entry.Recorded = t.Time
	}

	enc, hasValue := ann[annValue]
	if !hasValue || ann[annHolder] != holder {
		st.entry.Value = wire.EncodeClaim(wire.Claim{ID: holder})
		if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
			st.entry.TTL = time.Duration(*d) * time.Second
		}
		st.entry.Revision, st.entry.CreateRevision = rv, rv
		return st, nil
	}

	if st.entry.Value, err = base64.StdEncoding.DecodeString(enc); err != nil {
		return state{}, fmt.Errorf("lease %s: value annotation: %w: %v", l.Name, backends.ErrCorrupt, err)
	}
	if s := ann[annTTL]; s != "" {
		if st.entry.TTL, err = time.ParseDuration(s); err != nil || st.entry.TTL < 0 {
			return state{}, fmt.Errorf("lease %s: ttl annotation %q: %w", l.Name, s, backends.ErrCorrupt)
		}
	}
	st.entry.Revision = rv
	if s, ok := ann[annRevision]; ok {
		if st.entry.Revision, err = parseRV(s); err != nil {
			return state{}, fmt.Errorf("lease %s: revision annotation: %w", l.Name, err)
		}
	}
	st.entry.CreateRevision = st.entry.Revision
	if s, ok := ann[annCreateRevision]; ok {
		if st.entry.CreateRevision, err = parseRV(s); err != nil {
			return state{}, fmt.Errorf("lease %s: create-revision annotation: %w", l.Name, err)
		}
	}
	if !(st.entry.CreateRevision <= st.entry.Revision && st.entry.Revision <= rv) {
		return state{}, fmt.Errorf("lease %s: revisions out of order (create %d, revision %d, resourceVersion %d): %w",
			l.Name, st.entry.CreateRevision, st.entry.Revision, rv, backends.ErrCorrupt)
	}
	if name := l.Labels[LabelSession]; name != "" && name != sessionSelf && st.entry.TTL > 0 {
		st.session = name
	}
	return st, nil
}

// write is one change to a Lease object.
type write struct {
	clear bool // release: the entry becomes absent
	value []byte
	ttl   time.Duration
	// revision and createRevision to record; 0 means "the resourceVersion of
	// this write", which is how a value write and a create are recorded.
	revision, createRevision int64
	// session is the session Lease the entry joins; "" writes it outside
	// any session (renewed by writes of its own).
	session string
}

// holderIdentity is what tenure writes to spec.holderIdentity for value:
// the holder of a claim, as "id#nonce" so that a client-go candidate never
// mistakes a tenure holder for itself; "tenure" for other values.
func holderIdentity(value []byte) string {
	c, err := wire.DecodeClaim(value)
	switch {
	case err != nil:
		return "tenure"
	case c.Nonce == "":
		return c.ID
	}
	return c.ID + "#" + c.Nonce
}

// leaseSeconds is the whole-second leaseDurationSeconds written for a TTL,
// rounded up, so that clients reading only the Lease spec wait at least as
// long as tenure does.
func leaseSeconds(ttl time.Duration) (*int32, error) {
	if ttl == 0 {
		return nil, nil
	}
	secs := (ttl + time.Second - 1) / time.Second
	if secs > math.MaxInt32 {
		return nil, fmt.Errorf("ttl %v exceeds the Lease's %d seconds: %w", ttl, math.MaxInt32, backends.ErrInvalid)
	}
	s := int32(secs)
	return &s, nil
}

// bumpBeat counts one more renewal of l in its beat annotation.
func bumpBeat(l *coordinationv1.Lease) {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	beat, _ := strconv.ParseUint(l.Annotations[annBeat], 10, 64)
	l.Annotations[annBeat] = strconv.FormatUint(beat+1, 10)
}

// apply writes w into l, a copy of the current object (or a new one) for key,
// following the Lease conventions of client-go's leaderelection so that its
// candidates read the result correctly.
func apply(l *coordinationv1.Lease, key string, w write, now time.Time) error {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Labels[LabelManaged] = "true"
	l.Annotations[AnnotationKey] = key
	t := metav1.NewMicroTime(now)
	old := ""
	if l.Spec.HolderIdentity != nil {
		old = *l.Spec.HolderIdentity
	}

	delete(l.Labels, LabelSession)
	if w.clear {
		for _, a := range []string{annValue, annTTL, annHolder, annRevision, annCreateRevision} {
			delete(l.Annotations, a)
		}
		l.Spec.HolderIdentity = nil
		l.Spec.RenewTime = &t
		return nil
	}

	secs, err := leaseSeconds(w.ttl)
	if err != nil {
		return err
	}
	holder := holderIdentity(w.value)
	l.Annotations[annValue] = base64.StdEncoding.EncodeToString(w.value)
	l.Annotations[annTTL] = w.ttl.String()
	l.Annotations[annHolder] = holder
	setRev := func(name string, v int64) {
		if v == 0 {
			delete(l.Annotations, name)
		} else {
			l.Annotations[name] = strconv.FormatInt(v, 10)
		}
	}
	if w.session != "" {
		l.Labels[LabelSession] = w.session
	}
	setRev(annRevision, w.revision)
	setRev(annCreateRevision, w.createRevision)
	if w.revision != 0 {
		// A keep-alive must change the object, or the API server answers
		// it without a new resourceVersion and no observer restarts its
		// count: renewTime alone may repeat (a wall clock set back).
		bumpBeat(l)
	} else {
		delete(l.Annotations, annBeat)
	}

	if holder != old {
		l.Spec.AcquireTime = &t
		if l.ResourceVersion != "" {
			n := int32(1)
			if l.Spec.LeaseTransitions != nil {
				n = *l.Spec.LeaseTransitions + 1
			}
			l.Spec.LeaseTransitions = &n
		}
	}
	if l.Spec.LeaseTransitions == nil {
		zero := int32(0)
		l.Spec.LeaseTransitions = &zero
	}
	l.Spec.HolderIdentity = &holder
	l.Spec.LeaseDurationSeconds = secs
	l.Spec.RenewTime = &t
	return nil
}
