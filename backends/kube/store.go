package kube

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/check"
	"github.com/tenure-go/tenure/internal/closer"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

var (
	_ backends.Store   = (*Store)(nil)
	_ backends.Watcher = (*Store)(nil)
)

// Option configures New.
type Option func(*options)

type options struct {
	namespace    string
	clock        clock.Clock
	log          *slog.Logger
	leaseNames   map[string]string
	watchTimeout time.Duration
	session      bool
	sessionBatch time.Duration
}

// WithNamespace puts the Lease objects in namespace ns. Default "default".
// It must exist: the first write into a missing namespace fails with an
// error wrapping backends.ErrMissingResource.
func WithNamespace(ns string) Option { return func(o *options) { o.namespace = ns } }

// WithClock makes c judge expiry: an entry expires once this clock has
// seen its object unchanged for the entry's TTL. Default: the real clock,
// whose Now carries the monotonic reading used for those intervals.
func WithClock(c clock.Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sends debug records about retried writes and broken watches
// to l. Default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithLeaseNames maps tenure keys to existing Lease names, for a fleet
// migrating from client-go's leaderelection: the key then reads and writes
// that Lease (holderIdentity shows as the holder) instead of the hashed
// name. Names must be valid DNS-1123 subdomains, distinct, and must not
// start with "tenure-". Default: none, every key is hashed.
func WithLeaseNames(names map[string]string) Option {
	return func(o *options) { o.leaseNames = names }
}

// WithWatchTimeout bounds the life of the API server watch that the
// store's Watch calls share: it is ended after a random time between d and
// twice d (as client-go's reflectors end theirs), which closes every Watch
// channel, so that their consumers read again and watch again. It bounds
// how long a consumer waits on a watch that has silently stopped
// delivering (a half-open connection), or for an expiry this store failed
// to report. Measured on the store's clock. Default 5 minutes; d must be
// positive.
func WithWatchTimeout(d time.Duration) Option { return func(o *options) { o.watchTimeout = d } }

// WithSession turns on session mode: the store keeps one session Lease of
// its own, writes every claim with a TTL into it, and answers KeepAlive
// calls on those claims in batches, each costing one List of the session's
// claims and one update of the session object, however many claims it
// renews. At most one batch runs per interval every (less for claims whose
// TTL is under four intervals, and within half of what a caller's context
// deadline leaves); every 0 starts each batch as soon as the one before it
// ended. See the package
// doc for the rules and for when to pick this mode. every must not be
// negative; WithLeaseNames cannot be combined with it.
func WithSession(every time.Duration) Option {
	return func(o *options) { o.session, o.sessionBatch = true, every }
}

// DefaultSessionBatch is a batch interval for WithSession: a process
// sends about two requests per interval for all its claims, and a renewal
// waits for its batch at most that long (less for short TTLs and tight
// deadlines, see WithSession).
const DefaultSessionBatch = time.Second

// defaultWatchTimeout is the watch timeout without WithWatchTimeout.
const defaultWatchTimeout = 5 * time.Minute

// Store keeps tenure entries in coordination.k8s.io/v1 Lease objects. It is
// safe for concurrent use. Close it when done: Close ends its watches and,
// in session mode, its batches, and deletes the sessions it created that no
// claim names any more; it deletes no claim and does not close the client.
type Store struct {
	leases    coordinationclient.LeaseInterface
	namespace string
	clock     clock.Clock
	log       *slog.Logger
	names     map[string]string // key -> adopted Lease name
	keys      map[string]string // adopted Lease name -> key
	selector  string            // label selector of List and Watch; "" with adopted names
	watchLife time.Duration     // WithWatchTimeout

	mu       sync.Mutex
	seen     map[string]*sighting        // by Lease name; guarded by mu
	sessions map[string]*sessionSighting // by session Lease name; guarded by mu
	closing  closer.Once                 // marked under mu

	hub *hub
	own *owner // session mode only
}

// sighting is the newest version of one object this process has seen, and
// since when, on s.clock, it has seen that version.
type sighting struct {
	lease *coordinationv1.Lease // owned by the store; copied before writes
	rv    int64
	since time.Time
}

// New returns a Store over client's Leases (in namespace "default" unless
// WithNamespace says otherwise). It does no I/O. An option given a value
// it cannot use is an error wrapping backends.ErrInvalid.
func New(client kubernetes.Interface, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("kube: nil client: %w", backends.ErrInvalid)
	}
	o := options{namespace: "default", watchTimeout: defaultWatchTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if errs := validation.IsDNS1123Label(o.namespace); len(errs) > 0 {
		return nil, fmt.Errorf("kube: namespace %q: %s: %w", o.namespace, strings.Join(errs, "; "), backends.ErrInvalid)
	}
	if o.clock == nil {
		o.clock = clock.New()
	}
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	if o.watchTimeout <= 0 {
		return nil, fmt.Errorf("kube: watch timeout %v is not positive: %w", o.watchTimeout, backends.ErrInvalid)
	}
	if o.session && o.sessionBatch < 0 {
		return nil, fmt.Errorf("kube: session batch interval %v is negative: %w", o.sessionBatch, backends.ErrInvalid)
	}
	if o.session && len(o.leaseNames) > 0 {
		// Adopted Leases are shared with client-go candidates, which judge
		// a Lease by its own renewals only.
		return nil, fmt.Errorf("kube: WithSession cannot be combined with WithLeaseNames: %w", backends.ErrInvalid)
	}
	s := &Store{
		leases:    client.CoordinationV1().Leases(o.namespace),
		namespace: o.namespace,
		clock:     o.clock,
		log:       o.log.With("backend", "kube", "namespace", o.namespace),
		names:     map[string]string{},
		keys:      map[string]string{},
		selector:  labels.Set{LabelManaged: "true"}.String(),
		watchLife: o.watchTimeout,
		seen:      map[string]*sighting{},
		sessions:  map[string]*sessionSighting{},
	}
	for key, name := range o.leaseNames {
		if err := backends.ValidateKey(key); err != nil {
			return nil, fmt.Errorf("kube: lease names: %w", err)
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, fmt.Errorf("kube: lease name %q for key %q: %s: %w", name, key, strings.Join(errs, "; "), backends.ErrInvalid)
		}
		if strings.HasPrefix(name, namePrefix) {
			return nil, fmt.Errorf("kube: lease name %q for key %q: the %q prefix is reserved for hashed names: %w", name, key, namePrefix, backends.ErrInvalid)
		}
		if other, dup := s.keys[name]; dup {
			return nil, fmt.Errorf("kube: lease name %q mapped from both %q and %q: %w", name, other, key, backends.ErrInvalid)
		}
		s.names[key], s.keys[name] = name, key
	}
	if len(s.keys) > 0 {
		// Adopted Leases carry no label until tenure writes them.
		s.selector = ""
	}
	s.hub = newHub(s)
	if o.session {
		s.own = newOwner(s, o.sessionBatch)
	}
	return s, nil
}

// Capabilities implements backends.Store.
func (s *Store) Capabilities() backends.Capabilities {
	return backends.Capabilities{
		Atomic: backends.CapCreateIfAbsent | backends.CapCompareAndSet |
			backends.CapCompareAndDelete | backends.CapKeepAlive | backends.CapWatch,
		Scope:          backends.ScopeDistributed,
		ExpiryJudge:    "local observation: the object unchanged (same resourceVersion) for the TTL on this process's monotonic clock",
		ObservedExpiry: true,
		ExpiryEvents:   true,
	}
}

// LeaseName is the name of the Lease object that holds key.
func (s *Store) LeaseName(key string) string {
	if n, ok := s.names[key]; ok {
		return n
	}
	return hashName(key)
}

// keyOf is the key a listed or watched object holds, and whether it is one
// of this store's objects at all.
func (s *Store) keyOf(l *coordinationv1.Lease) (string, bool) {
	if k, ok := s.keys[l.Name]; ok {
		return k, true
	}
	k, ok := l.Annotations[AnnotationKey]
	if !ok || l.Labels[LabelManaged] != "true" || s.LeaseName(k) != l.Name {
		return "", false
	}
	return k, true
}

func (s *Store) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Closed() {
		return backends.ErrClosed
	}
	return nil
}

// observe records a version of an object seen by this process and returns
// its sighting: since when this process has seen that version. A version
// older than one already seen (a watch event overtaken by a read, or the
// result of a write overtaken by a watch event) is returned as seen now and
// not recorded.
//
// A new version is also handed to the running watch, which times its expiry
// from this sighting even if the watch itself never delivers that version.
func (s *Store) observe(l *coordinationv1.Lease) (sighting, error) {
	sg, newer, err := s.sight(l)
	if newer {
		s.hub.sighted(l.Name)
	}
	return sg, err
}

// sight is observe without telling the watch; newer reports a version not
// seen before.
func (s *Store) sight(l *coordinationv1.Lease) (sg sighting, newer bool, err error) {
	rv, err := parseRV(l.ResourceVersion)
	if err != nil {
		return sighting{}, false, fmt.Errorf("lease %s: %w", l.Name, err)
	}
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.seen[l.Name]
	switch {
	case !ok || rv > cur.rv:
		cur = &sighting{lease: l, rv: rv, since: now}
		s.seen[l.Name] = cur
		newer = true
	case rv == cur.rv:
		cur.lease = l
	default:
		return sighting{lease: l, rv: rv, since: now}, false, nil
	}
	return *cur, newer, nil
}

// forget drops what was seen of name, after the object was found deleted
// at resourceVersion rv, unless a later version was seen since.
func (s *Store) forget(name string, rv int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.seen[name]; ok && cur.rv <= rv {
		delete(s.seen, name)
	}
}

func (s *Store) cached(name string) (sighting, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.seen[name]
	if !ok {
		return sighting{}, false
	}
	return *cur, true
}

// view is one object as the store judges it now.
type view struct {
	sighting
	st   state
	live bool // present and not expired by local observation
}

// judge decodes a sighting of key and decides whether it is live: present,
// and either without a TTL or seen unchanged for less than its TTL.
func (s *Store) judge(key string, sg sighting) (view, error) {
	st, err := decode(key, sg.lease)
	if err != nil {
		return view{}, err
	}
	v := view{sighting: sg, st: st, live: st.present}
	if st.present && st.entry.TTL > 0 {
		since := sg.since
		if st.session != "" {
			// A claim of a session lives while either has been seen
			// changed within its TTL: its own write, or its session's
			// renewal. A session this process knows nothing of counts
			// as seen now; reads look it up.
			ss, _, known := s.sessionSince(st.session)
			if !known {
				ss = s.clock.Now()
			}
			if ss.After(since) {
				since = ss
			}
		}
		seenFor := s.clock.Since(since)
		if seenFor >= st.entry.TTL {
			v.live = false
		} else {
			v.st.entry.Remaining = st.entry.TTL - seenFor
		}
	}
	return v, nil
}

// read gets key's object from the API server (a consistent read) and judges
// it. found is false when no object exists.
func (s *Store) read(ctx context.Context, op, key, name string) (v view, found bool, err error) {
	l, err := s.leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s.forget(name, math.MaxInt64)
		return view{}, false, nil
	}
	if err != nil {
		return view{}, false, s.classify(op, key, err)
	}
	sg, err := s.observe(l)
	if err != nil {
		return view{}, false, fmt.Errorf("kube: %s %q: %w", op, key, err)
	}
	v, err = s.judge(key, sg)
	if err != nil {
		return view{}, false, fmt.Errorf("kube: %s %q: %w", op, key, err)
	}
	if name := v.st.session; name != "" && v.st.present {
		// The claim's own object says little: its session's renewals keep
		// it alive. Read the session too when this process knows nothing
		// of it, or when what it knows would have the claim expired (the
		// watch may lag behind a renewal).
		if _, _, known := s.sessionSince(name); !known || !v.live {
			if _, err := s.readSession(ctx, op, key, name); err != nil {
				return view{}, false, err
			}
			if v, err = s.judge(key, sg); err != nil {
				return view{}, false, fmt.Errorf("kube: %s %q: %w", op, key, err)
			}
		}
	}
	return v, true, nil
}

// Get implements backends.Store. It always reads from the API server.
func (s *Store) Get(ctx context.Context, key string) (backends.Entry, error) {
	if err := backends.ValidateKey(key); err != nil {
		return backends.Entry{}, fmt.Errorf("kube: get: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return backends.Entry{}, fmt.Errorf("kube: get %q: %w", key, err)
	}
	v, found, err := s.read(ctx, "get", key, s.LeaseName(key))
	if err != nil {
		return backends.Entry{}, err
	}
	if !found || !v.live {
		return backends.Entry{}, fmt.Errorf("kube: get %q: %w", key, backends.ErrNotFound)
	}
	return v.st.entry, nil
}

// listPageSize bounds one List response; continue tokens page through the
// rest of one consistent snapshot.
const listPageSize = 500

// list lists this store's objects, consistently, and returns them with the
// snapshot's resourceVersion.
func (s *Store) list(ctx context.Context, limit int64) ([]*coordinationv1.Lease, string, error) {
	opts := metav1.ListOptions{LabelSelector: s.selector, Limit: limit}
	var out []*coordinationv1.Lease
	var sessions []*coordinationv1.Lease
	for {
		page, err := s.leases.List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		for i := range page.Items {
			l := &page.Items[i]
			if _, ok := s.keyOf(l); ok {
				out = append(out, l)
			} else if l.Labels[LabelSession] == sessionSelf {
				sessions = append(sessions, l)
			}
		}
		if limit < listPageSize {
			return out, page.ResourceVersion, nil
		}
		if page.Continue == "" {
			s.sessionsListed(out, sessions, page.ResourceVersion)
			return out, page.ResourceVersion, nil
		}
		opts.Continue = page.Continue
	}
}

// sessionsListed records the sessions of a complete, consistent list at
// resourceVersion rv, and the absence at rv of every session a listed claim
// names but the list does not hold.
func (s *Store) sessionsListed(claims, sessions []*coordinationv1.Lease, rv string) {
	at, err := parseRV(rv)
	if err != nil {
		return
	}
	present := make(map[string]bool, len(sessions))
	for _, l := range sessions {
		present[l.Name] = true
		s.observeSession(l.Name, l, 0)
	}
	for _, l := range claims {
		if name := l.Labels[LabelSession]; name != "" && name != sessionSelf && !present[name] {
			present[name] = true
			s.observeSession(name, nil, at)
		}
	}
}

// List implements backends.Store. It reads every object of the store from
// the API server (a label selection, paged) and filters by prefix here.
func (s *Store) List(ctx context.Context, prefix string) ([]backends.Entry, error) {
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("kube: list: %w", err)
	}
	if err := s.checkOpen(); err != nil {
		return nil, fmt.Errorf("kube: list %q: %w", prefix, err)
	}
	items, _, err := s.list(ctx, listPageSize)
	if err != nil {
		return nil, s.classify("list", prefix, err)
	}
	var out []backends.Entry
	for _, l := range items {
		key, _ := s.keyOf(l)
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		sg, err := s.observe(l)
		if err != nil {
			return nil, fmt.Errorf("kube: list %q: %w", prefix, err)
		}
		v, err := s.judge(key, sg)
		if err != nil {
			return nil, fmt.Errorf("kube: list %q: %w", prefix, err)
		}
		if v.live {
			out = append(out, v.st.entry)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// maxAttempts bounds the read-modify-write loop of one operation. Each
// retry follows a 409 from a write that raced another writer; the next read
// normally settles the outcome.
const maxAttempts = 8

// mutation decides, from the current view of a key, what to write; or
// returns a final result without writing (a conflict).
type mutation func(v view, found bool) (w write, err error)

// mutate runs the read-modify-write loop of every conditional write: judge
// the current object, decide, and write it back under a resourceVersion
// precondition (an update), or create it if there is none. A 409 or a
// vanished object sends it round again with a fresh read.
//
// The first round may decide from the newest version this process has seen
// instead of reading: the precondition makes that safe, and a leader's
// keep-alive then costs one request. Only a fresh read may end the loop
// with a conflict.
func (s *Store) mutate(ctx context.Context, op, key string, decide mutation) (backends.Entry, error) {
	if err := s.checkOpen(); err != nil {
		return backends.Entry{}, fmt.Errorf("kube: %s %q: %w", op, key, err)
	}
	name := s.LeaseName(key)
	for attempt := 0; attempt < maxAttempts; attempt++ {
		var (
			v      view
			found  bool
			err    error
			cached bool
		)
		if sg, ok := s.cached(name); ok && attempt == 0 {
			if v, err = s.judge(key, sg); err == nil {
				found, cached = true, true
			}
		}
		if !cached {
			if v, found, err = s.read(ctx, op, key, name); err != nil {
				return backends.Entry{}, err
			}
		}
		w, err := decide(v, found)
		if err != nil {
			if cached {
				continue // confirm with a fresh read before reporting
			}
			return backends.Entry{}, fmt.Errorf("kube: %w", err)
		}
		e, retry, err := s.put(ctx, op, key, name, v, found, w)
		if err != nil || !retry {
			return e, err
		}
		s.log.Debug("kube: write raced another writer; reading again", "op", op, "key", key, "attempt", attempt+1)
	}
	return backends.Entry{}, fmt.Errorf("kube: %s %q: %d attempts raced other writers: %w", op, key, maxAttempts, backends.ErrUnavailable)
}

// put writes w over the object of v (an update with v's resourceVersion as
// precondition) or, when there is none, creates it. retry reports a lost
// race: the object changed, appeared or vanished since it was read.
func (s *Store) put(ctx context.Context, op, key, name string, v view, found bool, w write) (e backends.Entry, retry bool, err error) {
	if found && v.st.present && !v.live && v.st.session != "" {
		// Taking over a claim of a session: the session must never be
		// renewed again first.
		if retry, err := s.endSession(ctx, op, key, v); err != nil || retry {
			return backends.Entry{}, retry, err
		}
	}
	start := s.clock.Now()
	if s.own != nil && !w.clear && w.ttl > 0 {
		if w.session, err = s.own.session(ctx, op, key, w.ttl); err != nil {
			return backends.Entry{}, false, err
		}
		s.own.bound(name, start.Add(w.ttl))
	}
	var l *coordinationv1.Lease
	if found {
		l = v.lease.DeepCopy()
	} else {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.namespace}}
	}
	if err := apply(l, key, w, start); err != nil {
		return backends.Entry{}, false, fmt.Errorf("kube: %s %q: %w", op, key, err)
	}
	var out *coordinationv1.Lease
	if found {
		out, err = s.leases.Update(ctx, l, metav1.UpdateOptions{})
	} else {
		out, err = s.leases.Create(ctx, l, metav1.CreateOptions{})
	}
	switch {
	case found && (apierrors.IsConflict(err) || apierrors.IsNotFound(err)),
		!found && apierrors.IsAlreadyExists(err):
		return backends.Entry{}, true, nil
	case err != nil:
		return backends.Entry{}, false, s.classify(op, key, err)
	}
	if s.own != nil && w.session == "" {
		s.own.unbound(name) // released (or written without a TTL): no longer in a session
	}
	sg, err := s.observe(out)
	if err != nil {
		return backends.Entry{}, false, fmt.Errorf("kube: %s %q: %w", op, key, err)
	}
	nv, err := s.judge(key, sg)
	if err != nil {
		return backends.Entry{}, false, fmt.Errorf("kube: %s %q: %w", op, key, err)
	}
	return nv.st.entry, false, nil
}

// CreateIfAbsent implements backends.Store. An object that is absent,
// cleared by a delete, or expired by local observation is written over.
func (s *Store) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	if err := check.Write(key, 0, value, ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("kube: create: %w", err)
	}
	return s.create(ctx, "create", key, value, ttl)
}

func (s *Store) create(ctx context.Context, op, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	return s.mutate(ctx, op, key, func(v view, found bool) (write, error) {
		if v.live {
			return write{}, &backends.ConflictError{Op: op, Key: key, Current: v.st.entry, Found: true}
		}
		return write{value: value, ttl: ttl}, nil
	})
}

// CompareAndSet implements backends.Store. The entry keeps its
// CreateRevision; its Revision becomes the resourceVersion of this write.
func (s *Store) CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	if err := check.Write(key, rev, value, ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("kube: cas: %w", err)
	}
	if rev == 0 {
		return s.create(ctx, "cas", key, value, ttl)
	}
	return s.mutate(ctx, "cas", key, func(v view, found bool) (write, error) {
		if err := expect(v, "cas", key, rev); err != nil {
			return write{}, err
		}
		return write{value: value, ttl: ttl, createRevision: v.st.entry.CreateRevision}, nil
	})
}

// CompareAndDelete implements backends.Store. The object is not deleted: its
// holder and value are cleared, so that it reads as absent and the next
// create still gets a higher revision than every one the key had.
func (s *Store) CompareAndDelete(ctx context.Context, key string, rev int64) error {
	if err := backends.ValidateKey(key); err != nil {
		return fmt.Errorf("kube: delete: %w", err)
	}
	if err := check.Revision(rev, true); err != nil {
		return fmt.Errorf("kube: delete %q: %w", key, err)
	}
	_, err := s.mutate(ctx, "delete", key, func(v view, found bool) (write, error) {
		if err := expect(v, "delete", key, rev); err != nil {
			return write{}, err
		}
		return write{clear: true}, nil
	})
	return err
}

// KeepAlive implements backends.Store. It writes renewTime and the TTL,
// which changes the object's resourceVersion (so every observer restarts its
// expiry clock) but records the entry's Revision in an annotation, so the
// logical Revision does not change and watchers see no event.
func (s *Store) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	if err := backends.ValidateKey(key); err != nil {
		return backends.Entry{}, fmt.Errorf("kube: keepalive: %w", err)
	}
	if err := check.Revision(rev, true); err != nil {
		return backends.Entry{}, fmt.Errorf("kube: keepalive %q: %w", key, err)
	}
	if err := check.KeepAliveTTL(ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("kube: keepalive %q: %w", key, err)
	}
	if s.own != nil {
		if err := s.checkOpen(); err != nil {
			return backends.Entry{}, fmt.Errorf("kube: keepalive %q: %w", key, err)
		}
		e, ok, err := s.own.keepAlive(ctx, key, s.LeaseName(key), rev, ttl, s.clock.Now())
		if ok {
			if err == nil {
				e.Key = key
			}
			return e, err
		}
	}
	return s.mutate(ctx, "keepalive", key, func(v view, found bool) (write, error) {
		if err := expect(v, "keepalive", key, rev); err != nil {
			return write{}, err
		}
		e := v.st.entry
		return write{value: e.Value, ttl: ttl, revision: e.Revision, createRevision: e.CreateRevision}, nil
	})
}

// expect returns a *ConflictError unless v is live at revision rev.
func expect(v view, op, key string, rev int64) error {
	switch {
	case !v.live:
		return &backends.ConflictError{Op: op, Key: key, Expected: rev}
	case v.st.entry.Revision != rev:
		return &backends.ConflictError{Op: op, Key: key, Expected: rev, Current: v.st.entry, Found: true}
	}
	return nil
}

// Close implements backends.Store. It ends every watch and waits for their
// goroutines. In session mode it also ends the batches, failing the calls
// that wait for one, and deletes the sessions it created that no claim
// names (one List each, and a conditional delete; at most a few seconds).
// It deletes no claim and does not close the client.
func (s *Store) Close() error {
	return s.closing.Close(&s.mu, func() error {
		if s.own != nil {
			s.own.close()
		}
		s.hub.close()
		return nil
	})
}
