package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"time"

	"github.com/tenure-go/tenure/backends"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sessionSighting is what this process has seen of one session Lease (one
// named by a claim, or its own): its newest version, or its absence, and
// since when the session has stood as it is now, for the expiry of its
// claims.
type sessionSighting struct {
	rv    int64 // newest version seen; for an absence, the version it was seen at (MaxInt64: a read)
	alive bool  // present, a session, and not ended
	// since is when this process first saw the session as it stands: the
	// sighting of its newest renewal while alive. Once dead (ended, deleted
	// or replaced by a foreign object) it never lives again, so since stays
	// at the moment it was first seen dead, or, for an end written over a
	// version this process saw, at the sighting of that version: the end
	// proves the session stood at it from then until the end.
	since time.Time
}

// observeSession records a version of the object at session name, or its
// absence (l nil) as of resourceVersion rv, and tells the watch so that the
// session's claims are judged again.
func (s *Store) observeSession(name string, l *coordinationv1.Lease, rv int64) {
	if s.sightSession(name, l, rv) {
		s.hub.sighted(name)
	}
}

// sightSession is observeSession without telling the watch; it reports
// whether the sighting was news.
func (s *Store) sightSession(name string, l *coordinationv1.Lease, rv int64) bool {
	st := sessionState{}
	if l != nil {
		var err error
		if rv, err = parseRV(l.ResourceVersion); err != nil {
			return false
		}
		st = decodeSession(l)
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.sessions[name]
	if ok && cur.rv >= rv {
		return false
	}
	next := &sessionSighting{rv: rv, alive: st.alive, since: now}
	switch {
	case ok && !cur.alive:
		// Dead for good, since it first was: no owner renews a session
		// after its end or deletion (the owner's renewals are conditioned
		// on the version it knows), so a live-looking object at the name
		// later is no renewal of it.
		next.alive, next.since = false, cur.since
	case !ok || st.alive:
	case st.ended == cur.rv:
		next.since = cur.since // ended over the version seen since then
	}
	s.sessions[name] = next
	return true
}

// sessionSince is when the session name was last seen renewed, or first
// seen dead, as sightSession keeps it; known is false if this process knows
// nothing of it.
func (s *Store) sessionSince(name string) (since time.Time, rv int64, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.sessions[name]
	if !ok {
		return time.Time{}, 0, false
	}
	return cur.since, cur.rv, true
}

// sessionDead reports whether this process has seen session name dead.
func (s *Store) sessionDead(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.sessions[name]
	return ok && !cur.alive
}

// sessionUsable reports whether session name is alive by what this
// process saw, and was seen renewed (or created) less than ttl ago.
func (s *Store) sessionUsable(name string, ttl time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.sessions[name]
	return ok && cur.alive && s.clock.Since(cur.since) < ttl
}

// readSession reads session name from the API server (a consistent read) and
// records what it found.
func (s *Store) readSession(ctx context.Context, op, key, name string) (*coordinationv1.Lease, error) {
	l, err := s.leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s.observeSession(name, nil, math.MaxInt64)
		return nil, nil
	}
	if err != nil {
		return nil, s.classify(op, key, err)
	}
	s.observeSession(name, l, 0)
	return l, nil
}

// endSession makes sure the session of v, a claim this process judged
// expired and is about to write over, can never be renewed again: it reads
// the session and, if it still lives, writes it ended, conditioned on the
// version read. A renewal by its owner is an update conditioned on the
// version the owner knows, so exactly one of the two lands: if the end
// lands, every later renewal of the session fails and its owner's claims
// are lost; if the renewal lands first, the end fails and the claim, judged
// again, is live. retry reports that the claim must be judged again from a
// fresh read: the session changed, or the end raced another write.
func (s *Store) endSession(ctx context.Context, op, key string, v view) (retry bool, err error) {
	name := v.st.session
	l, err := s.readSession(ctx, op, key, name)
	if err != nil {
		return false, err
	}
	nv, err := s.judge(key, v.sighting)
	if err != nil {
		return false, fmt.Errorf("kube: %s %q: %w", op, key, err)
	}
	if nv.live {
		return true, nil // renewed (or found dead only now): not expired after all
	}
	if l == nil || !decodeSession(l).alive {
		return false, nil
	}
	ended := l.DeepCopy()
	if ended.Annotations == nil {
		ended.Annotations = map[string]string{}
	}
	ended.Annotations[AnnotationEnded] = l.ResourceVersion
	ended.Spec.HolderIdentity = nil
	t := metav1.NewMicroTime(s.clock.Now())
	ended.Spec.RenewTime = &t
	out, err := s.leases.Update(ctx, ended, metav1.UpdateOptions{})
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, s.classify(op, key, err)
	}
	s.observeSession(name, out, 0)
	s.log.Debug("kube: ended an expired session to take over its claim", "key", key, "session", name)
	return false, nil
}

// newSessionName is a fresh random session Lease name.
func newSessionName() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("kube: session name: %w", err)
	}
	return sessionPrefix + hex.EncodeToString(b[:]), nil
}

// sessionLease is a new session object named name.
func (s *Store) sessionLease(name string) *coordinationv1.Lease {
	t := metav1.NewMicroTime(s.clock.Now())
	holder := name
	zero := int32(0)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: s.namespace,
			Labels:    map[string]string{LabelManaged: "true", LabelSession: sessionSelf},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:   &holder,
			AcquireTime:      &t,
			RenewTime:        &t,
			LeaseTransitions: &zero,
		},
	}
}

// errSessionEnded is why a claim of an ended session is lost.
var errSessionEnded = fmt.Errorf("its session was ended or deleted: %w", backends.ErrConflict)
