package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/check"
	"github.com/tenure-go/tenure/internal/closer"
)

// MinServerVersion is the oldest nats-server the store runs on: per-key
// TTLs recovered at a server's start expire only from v2.14.0.
const MinServerVersion = "2.14.0"

// DefaultGCGrace is how long after an entry's own TTL the server is asked
// to drop it (see WithGCGrace).
const DefaultGCGrace = time.Hour

// DefaultTimeout bounds a request whose ctx has no deadline.
const DefaultTimeout = 5 * time.Second

// createHistory is how many messages per key a bucket the store creates
// keeps: a watch that lags that many writes of one key behind still sees
// each (one that lags further ends, see Watch).
const createHistory = 8

// markerTTL is how long a bucket the store creates keeps the marker the
// server writes when it drops an entry.
const markerTTL = time.Hour

var _ backends.Store = (*Store)(nil)
var _ backends.Watcher = (*Store)(nil)

// Store is a backends.Store over one JetStream key-value bucket. It is safe
// for concurrent use; Close ends it and its watches.
type Store struct {
	nc        *nats.Conn
	ownConn   bool     // Close closes nc
	reconnect *connErr // nil unless the store made nc
	js        jetstream.JetStream
	bucket    string
	stream    string // "KV_" + bucket
	subj      string // "$KV.<bucket>."
	clk       clock.Clock
	grace     time.Duration
	timeout   time.Duration

	done    chan struct{} // closed by Close
	watches sync.WaitGroup

	mu      sync.Mutex
	closing closer.Once         // marked under mu
	seen    map[string]sighting // guarded by mu; by key
	// expiries queues the sightings in seen by when they expire, for the
	// hub's expiry timer; guarded by mu.
	expiries deadlines
	// known holds, by key, the last message this store saw committed
	// (written, watched or read: an entry with or without TTL, a delete),
	// for as long as a deposed stream leader could answer with an older
	// one, or with none; guarded by mu. See read.
	known   map[string]mark
	pruneAt int  // guarded by mu; the size of known that prunes it
	watch   *hub // guarded by mu; the shared consumer, nil before the first Watch

	// sighted wakes the hub's expiry timer when a key gets a sighting
	// whose expiry may come before the one it waits for.
	sighted chan struct{}

	// examined, set only by tests, runs under mu for each watcher a
	// delivery looks at (watcher true) and each queued sighting the
	// expiry timer looks at: what either costs grows with it.
	examined func(watcher bool)

	// expiryCollected, set only by tests, runs after the hub's expiry
	// timer has collected the entries it judges expired and before it
	// reports them: where a newer write can come in between.
	expiryCollected func()
}

// mark is a message of a key this store saw committed, and when (real
// time: it ages against the servers' behaviour, not against TTLs).
type mark struct {
	seq uint64
	at  time.Time
	// present: the message holds an entry, not a delete or a marker.
	present bool
}

// staleWindow is how long a server can still answer as the stream's
// leader after it lost its quorum without noticing: a NATS server steps
// down once it has not heard from a quorum for 10 s. known keeps a mark
// six times that.
const staleWindow = time.Minute

// sighting is when this process first saw a key's message seq.
type sighting struct {
	seq uint64
	at  time.Time // on clk, monotonic
	// own is the entry this store wrote at seq, if it did: a keep-alive
	// of it needs no read.
	own *backends.Entry
	// last is the key, revisions and TTL of the entry message seq holds:
	// what an expiry event reports. TTL 0: the entry does not expire.
	last backends.Entry
	// reported: the watch reported the entry expired at this sighting.
	reported bool
	// owed: the watch reported the entry expired at an earlier sighting,
	// which a read or a write of this store replaced with this one before
	// the watch reached its message; the watch owes an EventPut when it
	// does (see watched). Reporting this sighting expired cancels it.
	owed bool
}

// Option configures a Store. An option given a value New cannot use makes
// New fail with an error wrapping backends.ErrInvalid.
type Option func(*options)

type options struct {
	clk       clock.Clock
	grace     time.Duration
	timeout   time.Duration
	create    bool
	replicas  int
	reconnect *connErr // the connection's failed reconnects, when the store made it
}

// WithClock sets the clock expiry is judged on (default: the real clock).
// It must not be nil.
func WithClock(c clock.Clock) Option { return func(o *options) { o.clk = c } }

// WithGCGrace sets how long after an entry's TTL the server drops an entry
// nobody renewed (default DefaultGCGrace; at least 1s). The server judges
// that by its stream leader's wall clock: a step of that clock forward by
// more than the grace can drop a live claim. See the package doc.
func WithGCGrace(d time.Duration) Option { return func(o *options) { o.grace = d } }

// WithTimeout bounds each request whose ctx has no deadline (default
// DefaultTimeout; it must be positive).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithCreate makes New create the bucket, with the given number of
// replicas (1 to 5), if it does not exist. Without it a missing bucket is
// an error wrapping backends.ErrMissingResource.
func WithCreate(replicas int) Option {
	return func(o *options) { o.create, o.replicas = true, replicas }
}

// newOptions applies opts over the defaults and checks the result.
func newOptions(opts []Option) (options, error) {
	o := options{clk: clock.New(), grace: DefaultGCGrace, timeout: DefaultTimeout}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch {
	case o.clk == nil:
		return o, fmt.Errorf("nats: nil clock: %w", backends.ErrInvalid)
	case o.grace < time.Second:
		return o, fmt.Errorf("nats: gc grace %v below 1s: %w", o.grace, backends.ErrInvalid)
	case o.timeout <= 0:
		return o, fmt.Errorf("nats: timeout %v not positive: %w", o.timeout, backends.ErrInvalid)
	case o.create && (o.replicas < 1 || o.replicas > 5):
		return o, fmt.Errorf("nats: %d replicas, want 1 to 5: %w", o.replicas, backends.ErrInvalid)
	}
	return o, nil
}

// New returns a Store over the key-value bucket named bucket, reached
// through nc, which the caller keeps and closes after the Store. ctx bounds
// the checks New makes: the server is at least MinServerVersion, and the
// bucket keeps per-key TTLs (created with LimitMarkerTTL) and has no
// stream setting that can remove a live key's last message (MaxAge,
// Discard old with MaxMsgs or MaxBytes, a retention other than Limits,
// memory storage; see the package doc for the whole list). A server or a
// bucket that fails them is refused with an error wrapping
// backends.ErrUnsupported that names the setting, whether New found the
// bucket or created it.
//
// A cluster that answers that JetStream is temporarily unavailable (it has
// no meta leader, as when it has just started or lost a majority of its
// servers), or does not answer, is asked again until ctx ends; New then
// fails with an error wrapping backends.ErrUnavailable. Other answers
// (a missing bucket without WithCreate, a permission refused) fail at once.
func New(ctx context.Context, nc *nats.Conn, bucket string, opts ...Option) (*Store, error) {
	return newStore(ctx, nc, false, bucket, opts)
}

func newStore(ctx context.Context, nc *nats.Conn, own bool, bucket string, opts []Option) (*Store, error) {
	cf, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if nc == nil {
		return nil, fmt.Errorf("nats: nil connection: %w", backends.ErrInvalid)
	}
	if err := validBucket(bucket); err != nil {
		return nil, err
	}
	if err := serverVersion(nc.ConnectedServerVersion()); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(cf.timeout))
	if err != nil {
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	s := &Store{
		nc: nc, ownConn: own, js: js, bucket: bucket,
		stream: "KV_" + bucket, subj: "$KV." + bucket + ".",
		clk: cf.clk, grace: cf.grace, timeout: cf.timeout, reconnect: cf.reconnect,
		done: make(chan struct{}), seen: map[string]sighting{}, known: map[string]mark{}, sighted: make(chan struct{}, 1),
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var info *jetstream.StreamInfo
	readInfo := func(ctx context.Context) (err error) {
		info, err = s.info(ctx)
		return err
	}
	err = s.askAgain(ctx, readInfo)
	if errors.Is(err, backends.ErrMissingResource) && cf.create {
		cerr := s.askAgain(ctx, func(ctx context.Context) error {
			_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket:         bucket,
				Description:    "tenure claims",
				History:        createHistory,
				Storage:        jetstream.FileStorage,
				Replicas:       cf.replicas,
				LimitMarkerTTL: markerTTL,
			})
			if errors.Is(err, jetstream.ErrBucketExists) {
				return nil // an earlier request of ours, or a peer's, made it
			}
			return mapErr(err)
		})
		if cerr != nil {
			return nil, fmt.Errorf("nats: create bucket %q: %w", bucket, cerr)
		}
		err = s.askAgain(ctx, readInfo)
	}
	if err != nil {
		return nil, fmt.Errorf("nats: open bucket %q: %w", bucket, err)
	}
	if err := checkBucket(bucket, info.Config); err != nil {
		return nil, err
	}
	return s, nil
}

// askAgain runs req, a request that may be repeated, giving each attempt
// the store's timeout, and asks again while ctx has not ended and an
// attempt goes unanswered or is answered "not now" (see notNow). A cluster
// drops JetStream API requests that arrive while its meta leader changes,
// and the client then waits for an answer that never comes: without asking
// again, opening a store waited out its whole ctx. A cluster that has been
// without a meta leader for a while answers instead that JetStream is
// temporarily unavailable: without asking again, a store could not be
// opened on a cluster still electing one. A meta leader just elected may
// not know its peers yet and answers that no servers can take the
// stream: that answer is asked again for placementGrace after the first
// one, and is the error after that (asking for more replicas than the
// cluster has servers never passes). Those answers are asked again paced;
// when ctx ends, the error is the last of them.
func (s *Store) askAgain(ctx context.Context, req func(context.Context) error) error {
	var p pacer
	var answer error       // the last "not now" answer
	var unplaced time.Time // when the first "no suitable peers" answer came
	for {
		actx, cancel := context.WithTimeout(ctx, s.timeout)
		err := req(actx)
		cancel()
		if noSuitablePeers(err) && unplaced.IsZero() {
			unplaced = time.Now()
		}
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			if answer != nil {
				return fmt.Errorf("%w (asked again until %v)", answer, ctx.Err())
			}
			return err
		case notNow(err) || noSuitablePeers(err) && time.Since(unplaced) < placementGrace:
			answer = err
			if p.wait(ctx) != nil {
				return fmt.Errorf("%w (asked again until %v)", answer, ctx.Err())
			}
		case !errors.Is(err, context.DeadlineExceeded):
			return err
		}
	}
}

// notNow reports whether err is the server's answer that JetStream is
// temporarily unavailable: its cluster has no meta leader, so no server
// can take the request yet. Other unavailable answers (JetStream not
// enabled, insufficient resources) do not pass with time.
func notNow(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && ae.ErrorCode == clusterNotAvailable
}

// placementGrace is how long askAgain asks again after a "no suitable
// peers for placement" answer: long enough for a meta leader elected a
// moment ago to hear from its peers.
var placementGrace = 10 * time.Second

// noSuitablePeers reports whether err is the server's answer that no set
// of servers can take the stream asked for.
func noSuitablePeers(err error) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && ae.ErrorCode == noPeers
}

// validBucket checks a bucket name as nats.go's KV layer does.
func validBucket(b string) error {
	if b == "" || len(b) > 255 {
		return fmt.Errorf("nats: bucket name %q: want 1 to 255 characters: %w", b, backends.ErrInvalid)
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("nats: bucket name %q: want only letters, digits, '-' and '_': %w", b, backends.ErrInvalid)
		}
	}
	return nil
}

// serverVersion refuses a server older than MinServerVersion.
func serverVersion(v string) error {
	if !versionAtLeast(v, MinServerVersion) {
		return fmt.Errorf("nats: server version %q: per-key TTLs need nats-server %s or later: %w", v, MinServerVersion, backends.ErrUnsupported)
	}
	return nil
}

// versionAtLeast compares dotted versions ("2.15.2", "v2.14.0-beta"); an
// unparsable one is too old.
func versionAtLeast(v, min string) bool {
	parse := func(s string) ([3]int, bool) {
		var out [3]int
		s = strings.TrimPrefix(s, "v")
		if i := strings.IndexAny(s, "-+"); i >= 0 {
			s = s[:i]
		}
		parts := strings.Split(s, ".")
		if len(parts) != 3 {
			return out, false
		}
		for i, p := range parts {
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 {
				return out, false
			}
			out[i] = n
		}
		return out, true
	}
	a, ok := parse(v)
	b, _ := parse(min)
	if !ok {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return true
}

// checkBucket refuses a bucket whose entries the server would drop by its
// own clock, that cannot keep per-key TTLs, or whose stream settings can
// remove a live key's last message or refuse its renewals. Each refusal
// names the stream setting. A key whose last message goes reads absent
// while its holder is inside its deadline, and a contender takes it: two
// holders. So every limit that makes room by dropping messages of other
// keys is refused; the per-key limit (MaxMsgsPerSubject, the bucket's
// history) is not, because it drops only a key's older messages, never
// its last one.
func checkBucket(bucket string, c jetstream.StreamConfig) error {
	bad := func(why string) error {
		return fmt.Errorf("nats: bucket %q %s: %w", bucket, why, backends.ErrUnsupported)
	}
	switch {
	case !c.AllowMsgTTL || c.SubjectDeleteMarkerTTL <= 0:
		return bad("has no per-key TTLs (AllowMsgTTL and SubjectDeleteMarkerTTL: create it with LimitMarkerTTL)")
	case c.MaxAge != 0:
		return bad(fmt.Sprintf("has MaxAge %v, a bucket-wide TTL the server judges by its wall clock", c.MaxAge))
	case c.Mirror != nil || len(c.Sources) > 0:
		return bad("is a mirror or has sources")
	case len(c.Subjects) != 1 || c.Subjects[0] != "$KV."+bucket+".>":
		return bad(fmt.Sprintf("has subjects %q, want [$KV.%s.>]", c.Subjects, bucket))
	case c.Retention != jetstream.LimitsPolicy:
		return bad(fmt.Sprintf("has Retention %v: the server removes messages once consumers have them, a live key's last message too; want Limits", c.Retention))
	case c.Discard == jetstream.DiscardOld && c.MaxMsgs > 0:
		return bad(fmt.Sprintf("has Discard old with MaxMsgs %d: writes of other keys push a live key's last message out; want Discard new", c.MaxMsgs))
	case c.Discard == jetstream.DiscardOld && c.MaxBytes > 0:
		return bad(fmt.Sprintf("has Discard old with MaxBytes %d: writes of other keys push a live key's last message out; want Discard new", c.MaxBytes))
	case c.DiscardNewPerSubject:
		return bad(fmt.Sprintf("has DiscardNewPerSubject with MaxMsgsPerSubject %d: the server refuses a key's writes once it holds that many messages, so a holder cannot renew", c.MaxMsgsPerSubject))
	case c.Storage != jetstream.FileStorage:
		return bad(fmt.Sprintf("has Storage %v: a restart loses every key's messages, and the stream's sequences, so tokens, start again; want File", c.Storage))
	case c.NoAck:
		return bad("has NoAck: the server acknowledges no write, so the store can never learn a write's outcome")
	}
	return nil
}

// Capabilities implements backends.Store: single-key operations and watch;
// no Txn, because a JetStream key-value bucket has no atomic write of
// several keys.
func (s *Store) Capabilities() backends.Capabilities {
	return backends.Capabilities{
		Atomic: backends.CapCreateIfAbsent | backends.CapCompareAndSet | backends.CapCompareAndDelete |
			backends.CapKeepAlive | backends.CapWatch,
		ExpiryEvents:   true, // reported by the watch's own timer: see Watch
		Scope:          backends.ScopeDistributed,
		ExpiryJudge:    "local observation: an entry seen unchanged for its TTL on this process's monotonic clock (the server's wall clock only drops entries a grace after that)",
		ObservedExpiry: true,
	}
}

// Bucket is the name of the bucket the store works on.
func (s *Store) Bucket() string { return s.bucket }

// Close ends the store's watches and, when the store opened its own
// connection (opened from a URL by storeurl.Open), closes it. It does not delete entries.
func (s *Store) Close() error {
	return s.closing.Close(&s.mu, func() error {
		close(s.done)
		s.watches.Wait()
		if s.ownConn {
			s.nc.Close()
		}
		return nil
	})
}

func (s *Store) checkOpen(op, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Closed() {
		return fmt.Errorf("nats: %s %q: %w", op, key, backends.ErrClosed)
	}
	return nil
}

// bound gives ctx the store's timeout if it has no deadline.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

func (s *Store) info(ctx context.Context) (*jetstream.StreamInfo, error) {
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return nil, mapErr(err)
	}
	return st.CachedInfo(), nil
}

// Get returns the live entry for key.
func (s *Store) Get(ctx context.Context, key string) (backends.Entry, error) {
	if err := backends.ValidateKey(key); err != nil {
		return backends.Entry{}, fmt.Errorf("nats: get: %w", err)
	}
	if err := s.checkOpen("get", key); err != nil {
		return backends.Entry{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	r, err := s.read(ctx, key)
	if err != nil {
		return backends.Entry{}, fmt.Errorf("nats: get %q: %w", key, err)
	}
	e, live := s.judge(r)
	if !live {
		return backends.Entry{}, fmt.Errorf("nats: get %q: %w", key, backends.ErrNotFound)
	}
	return e, nil
}

// List returns the live entries under prefix in key order. It costs one
// request for the bucket's subjects and one read per key under prefix
// (and per key this store saw held within the last minute that the
// subjects miss: see the package doc on a deposed stream leader).
func (s *Store) List(ctx context.Context, prefix string) ([]backends.Entry, error) {
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("nats: list: %w", err)
	}
	if err := s.checkOpen("list", prefix); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return nil, fmt.Errorf("nats: list %q: %w", prefix, mapErr(err))
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(s.subj+">"))
	if err != nil {
		return nil, fmt.Errorf("nats: list %q: %w", prefix, mapErr(err))
	}
	enc := s.subj + encodeKey(prefix)
	var keys []string
	for subj := range info.State.Subjects {
		if !strings.HasPrefix(subj, enc) {
			continue
		}
		if k, ok := decodeKey(strings.TrimPrefix(subj, s.subj)); ok {
			keys = append(keys, k)
		}
	}
	// A key this store saw hold an entry lately and that the answer does
	// not list is read too: a deposed leader without its messages lists
	// none of it, and the read does not believe that (see stale).
	keys = append(keys, s.recentlyHeld(prefix, keys)...)
	slices.Sort(keys)
	out := make([]backends.Entry, 0, len(keys))
	for _, k := range keys {
		r, err := s.read(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("nats: list %q: %w", prefix, err)
		}
		if e, live := s.judge(r); live {
			out = append(out, e)
		}
	}
	return out, nil
}

// recentlyHeld returns the keys under prefix, not in listed, of which
// this store saw a message holding an entry within staleWindow.
func (s *Store) recentlyHeld(prefix string, listed []string) []string {
	in := make(map[string]bool, len(listed))
	for _, k := range listed {
		in[k] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, m := range s.known {
		if m.present && !in[k] && strings.HasPrefix(k, prefix) && time.Since(m.at) <= staleWindow {
			out = append(out, k)
		}
	}
	return out
}

// CreateIfAbsent writes key if no live entry holds it. The write is
// conditioned on the sequence of the key's last message, so it lands only
// over exactly the state judged absent.
func (s *Store) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	if err := check.Write(key, 0, value, ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("nats: create: %w", err)
	}
	if err := s.checkOpen("create", key); err != nil {
		return backends.Entry{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.create(ctx, "create", key, value, ttl)
}

func (s *Store) create(ctx context.Context, op, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	var p pacer
	for {
		r, err := s.read(ctx, key)
		if err != nil {
			return backends.Entry{}, fmt.Errorf("nats: %s %q: %w", op, key, err)
		}
		if cur, live := s.judge(r); live {
			return backends.Entry{}, fmt.Errorf("nats: %w", &backends.ConflictError{Op: op, Key: key, Current: cur, Found: true})
		}
		seq, err := s.publish(ctx, key, header(ttl, 0, 0), value, r.seq, ttl, &backends.Entry{Value: value})
		if errors.Is(err, errWrongSeq) {
			if err := p.again(ctx); err != nil {
				return backends.Entry{}, refused(op, key, err)
			}
			continue // the key moved since the read: judge again
		}
		if err != nil {
			return backends.Entry{}, fmt.Errorf("nats: %s %q: %w", op, key, err)
		}
		return written(key, value, int64(seq), int64(seq), ttl), nil
	}
}

// CompareAndSet writes key if its live entry's Revision is rev (rev 0:
// create-only). A keep-alive that moved the key's stream sequence since
// the read does not fail it: the store reads again and retries.
func (s *Store) CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (backends.Entry, error) {
	if err := check.Write(key, rev, value, ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("nats: cas: %w", err)
	}
	if err := s.checkOpen("cas", key); err != nil {
		return backends.Entry{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if rev == 0 {
		return s.create(ctx, "cas", key, value, ttl)
	}
	var p pacer
	for {
		r, cur, err := s.current(ctx, "cas", key, rev)
		if err != nil {
			return backends.Entry{}, err
		}
		seq, err := s.publish(ctx, key, header(ttl, 0, cur.CreateRevision), value, r.seq, ttl, &backends.Entry{Value: value, CreateRevision: cur.CreateRevision})
		if errors.Is(err, errWrongSeq) {
			if err := p.again(ctx); err != nil {
				return backends.Entry{}, refused("cas", key, err)
			}
			continue
		}
		if err != nil {
			return backends.Entry{}, fmt.Errorf("nats: cas %q: %w", key, err)
		}
		return written(key, value, int64(seq), cur.CreateRevision, ttl), nil
	}
}

// CompareAndDelete deletes key if its live entry's Revision is rev. The
// delete is a marker message carrying the revisions it removed, so
// sequences, and so tokens, keep increasing.
func (s *Store) CompareAndDelete(ctx context.Context, key string, rev int64) error {
	if err := backends.ValidateKey(key); err != nil {
		return fmt.Errorf("nats: delete: %w", err)
	}
	if err := check.Revision(rev, true); err != nil {
		return fmt.Errorf("nats: delete %q: %w", key, err)
	}
	if err := s.checkOpen("delete", key); err != nil {
		return err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var p pacer
	for {
		r, cur, err := s.current(ctx, "delete", key, rev)
		if err != nil {
			return err
		}
		h := header(0, cur.Revision, cur.CreateRevision)
		h.Del(hdrTTL)
		h.Set(hdrKVOp, kvOpDelete)
		_, err = s.publish(ctx, key, h, nil, r.seq, 0, nil)
		if errors.Is(err, errWrongSeq) {
			if err := p.again(ctx); err != nil {
				return refused("delete", key, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("nats: delete %q: %w", key, err)
		}
		return nil
	}
}

// KeepAlive rewrites key's live entry at rev with the same value and
// revisions and a new TTL. It is a new message (the server has no other
// way to renew), conditioned on the sequence read: observers see the
// sequence move and count the TTL again, watchers see no event.
func (s *Store) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (backends.Entry, error) {
	if err := backends.ValidateKey(key); err != nil {
		return backends.Entry{}, fmt.Errorf("nats: keepalive: %w", err)
	}
	if err := check.Revision(rev, true); err != nil {
		return backends.Entry{}, fmt.Errorf("nats: keepalive %q: %w", key, err)
	}
	if err := check.KeepAliveTTL(ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("nats: keepalive %q: %w", key, err)
	}
	if err := s.checkOpen("keepalive", key); err != nil {
		return backends.Entry{}, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	// Fast path: this store wrote the key's last message as far as it
	// knows, and judges it live. The write is conditioned on that message's
	// sequence, so if anything else landed since, it fails and the slow
	// path reads.
	if seq, cur, ok := s.ownLive(key, rev); ok {
		_, err := s.publish(ctx, key, header(ttl, cur.Revision, cur.CreateRevision), cur.Value, seq, ttl, &cur)
		switch {
		case err == nil:
			return written(key, cur.Value, cur.Revision, cur.CreateRevision, ttl), nil
		case !errors.Is(err, errWrongSeq):
			return backends.Entry{}, fmt.Errorf("nats: keepalive %q: %w", key, err)
		}
	}
	var p pacer
	for {
		r, cur, err := s.current(ctx, "keepalive", key, rev)
		if err != nil {
			return backends.Entry{}, err
		}
		_, err = s.publish(ctx, key, header(ttl, cur.Revision, cur.CreateRevision), cur.Value, r.seq, ttl, &cur)
		if errors.Is(err, errWrongSeq) {
			if err := p.again(ctx); err != nil {
				return backends.Entry{}, refused("keepalive", key, err)
			}
			continue
		}
		if err != nil {
			return backends.Entry{}, fmt.Errorf("nats: keepalive %q: %w", key, err)
		}
		return written(key, cur.Value, cur.Revision, cur.CreateRevision, ttl), nil
	}
}

// current reads key and checks that its live entry is at rev.
func (s *Store) current(ctx context.Context, op, key string, rev int64) (record, backends.Entry, error) {
	r, err := s.read(ctx, key)
	if err != nil {
		return r, backends.Entry{}, fmt.Errorf("nats: %s %q: %w", op, key, err)
	}
	cur, live := s.judge(r)
	if !live {
		return r, cur, fmt.Errorf("nats: %w", &backends.ConflictError{Op: op, Key: key, Expected: rev})
	}
	if cur.Revision != rev {
		return r, cur, fmt.Errorf("nats: %w", &backends.ConflictError{Op: op, Key: key, Expected: rev, Current: cur, Found: true})
	}
	return r, cur, nil
}

func written(key string, value []byte, rev, create int64, ttl time.Duration) backends.Entry {
	return backends.Entry{Key: key, Value: clone(value), Revision: rev, CreateRevision: create, TTL: ttl, Remaining: ttl}
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// judge decides whether r is a live entry for this process: one with a
// TTL is live until this process has seen the same message for the TTL.
func (s *Store) judge(r record) (backends.Entry, bool) {
	e := r.entry
	e.Value = clone(e.Value)
	key := e.Key
	if !r.present || e.TTL == 0 {
		s.forget(key, r.seq, r.present)
		return e, r.present
	}
	now := s.clk.Now()
	s.mu.Lock()
	s.noteLocked(key, r.seq, true)
	sg, ok := s.seen[key]
	if !ok || sg.seq < r.seq {
		if !ok || sg.reported || e.TTL < sg.last.TTL {
			s.sight() // an expiry the timer may not wait for
		}
		sg = sighting{seq: r.seq, at: now, last: lastOf(e), owed: ok && (sg.reported || sg.owed)}
		s.setSightingLocked(key, sg)
	}
	s.mu.Unlock()
	if sg.seq > r.seq {
		// An older message than one already seen: the key has moved on,
		// and this read says nothing about how long it stood still.
		e.Remaining = e.TTL
		return e, true
	}
	left := e.TTL - now.Sub(sg.at)
	if left <= 0 {
		return e, false
	}
	e.Remaining = left
	return e, true
}

// saw records that this store wrote message seq of key, which holds last
// (its key, revisions and TTL, above 0); own is the entry it wrote,
// remembered so that a keep-alive of it needs no read (nil: none).
func (s *Store) saw(key string, seq uint64, last backends.Entry, own *backends.Entry) {
	s.sawMessage(key, seq, last, own, false)
}

// watched records that the watch reached message seq of key, which holds
// last (TTL above 0). It reports whether the watch owes an EventPut of
// the entry: it reported the entry expired before it reached this
// message, a renewal, whether that sighting was still the latest or a
// read or a write of this store had replaced it since.
func (s *Store) watched(key string, seq uint64, last backends.Entry) (put bool) {
	return s.sawMessage(key, seq, last, nil, true)
}

func (s *Store) sawMessage(key string, seq uint64, last backends.Entry, own *backends.Entry, watch bool) (put bool) {
	now := s.clk.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noteLocked(key, seq, true)
	sg, ok := s.seen[key]
	if !ok || sg.seq < seq {
		if !ok || sg.reported || last.TTL < sg.last.TTL {
			s.sight() // an expiry the timer may not wait for
		}
		owed := ok && (sg.reported || sg.owed)
		s.setSightingLocked(key, sighting{seq: seq, at: now, own: own, last: lastOf(last), owed: owed && !watch})
		return owed && watch
	}
	if sg.seq == seq && sg.own == nil && own != nil {
		// The watch delivered this store's write before its ack came
		// back: keep that earlier sighting, and what was written.
		sg.own = own
		s.seen[key] = sg
	}
	if watch && sg.owed {
		// A read or a write of this store saw this message, or a later
		// one, before the watch reached it: the put is owed now.
		sg.owed = false
		s.seen[key] = sg
		return true
	}
	return false
}

// forget records that message seq of key, which holds no entry with a
// TTL (a delete or a marker; present: an entry without TTL), was seen
// committed. An older sighting goes with it, so no expiry is judged or
// reported of an entry that no longer has a TTL.
func (s *Store) forget(key string, seq uint64, present bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sg, ok := s.seen[key]; ok && sg.seq <= seq {
		delete(s.seen, key)
	}
	s.noteLocked(key, seq, present)
}

// noteLocked records seq as a committed message of key in known;
// present: it holds an entry. s.mu is held. A mark keeps the time its
// message was first seen: what bounds how long a deposed leader can still
// answer without it (see stale).
func (s *Store) noteLocked(key string, seq uint64, present bool) {
	if seq == 0 || seq <= s.known[key].seq {
		return
	}
	now := time.Now()
	s.known[key] = mark{seq: seq, at: now, present: present}
	if len(s.known) < s.pruneAt {
		return
	}
	for k, m := range s.known {
		if now.Sub(m.at) > staleWindow {
			delete(s.known, k)
		}
	}
	s.pruneAt = 2*len(s.known) + 64
}

// sight wakes the hub's expiry timer, if it runs. s.mu is held.
func (s *Store) sight() {
	select {
	case s.sighted <- struct{}{}:
	default:
	}
}

// lastOf is e without its value: what a sighting keeps of an entry.
func lastOf(e backends.Entry) backends.Entry {
	return backends.Entry{Key: e.Key, Revision: e.Revision, CreateRevision: e.CreateRevision, TTL: e.TTL}
}

// ownLive returns the sequence and entry of key's last message if this
// store wrote it, at revision rev, and judges it live.
func (s *Store) ownLive(key string, rev int64) (uint64, backends.Entry, bool) {
	now := s.clk.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	sg, ok := s.seen[key]
	if !ok || sg.own == nil || sg.own.Revision != rev || now.Sub(sg.at) >= sg.own.TTL {
		return 0, backends.Entry{}, false
	}
	return sg.seq, *sg.own, true
}

// errWrongSeq: a conditional write found another last sequence.
var errWrongSeq = errors.New("wrong last sequence")

// publish writes one message on key's subject, conditioned on the key's
// last sequence being expect (0: no message), with a server TTL of the
// entry's TTL plus the grace (none for ttl 0). It returns the new
// sequence and records the sighting.
//
// own is what the message writes (Revision 0: the new sequence;
// CreateRevision 0: the same), remembered so that a keep-alive of it needs
// no read.
func (s *Store) publish(ctx context.Context, key string, h nats.Header, value []byte, expect uint64, ttl time.Duration, own *backends.Entry) (uint64, error) {
	m := nats.NewMsg(s.subj + encodeKey(key))
	m.Header = h
	m.Data = value
	opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(expect), jetstream.WithExpectStream(s.stream)}
	if ttl > 0 {
		opts = append(opts, jetstream.WithMsgTTL(s.gcTTL(ttl)))
	}
	ack, err := s.js.PublishMsg(ctx, m, opts...)
	if err != nil {
		var ae *jetstream.APIError
		if errors.As(err, &ae) && (ae.ErrorCode == wrongLastSeq || ae.ErrorCode == wrongLastSeqR) {
			return 0, errWrongSeq
		}
		return 0, s.mapErr(err, "the write (its outcome is unknown)")
	}
	if ttl == 0 {
		s.forget(key, ack.Sequence, h.Get(hdrKVOp) == "")
	} else {
		e := backends.Entry{Key: key, Value: clone(value), TTL: ttl}
		if own != nil {
			e.Revision, e.CreateRevision = own.Revision, own.CreateRevision
		}
		if e.Revision == 0 {
			e.Revision = int64(ack.Sequence)
		}
		if e.CreateRevision == 0 {
			e.CreateRevision = int64(ack.Sequence)
		}
		if own == nil {
			s.saw(key, ack.Sequence, e, nil)
		} else {
			s.saw(key, ack.Sequence, e, &e)
		}
	}
	return ack.Sequence, nil
}

// gcTTL is the TTL the server keeps a message for: the entry's TTL rounded
// up to whole seconds (the server's unit) plus the grace.
func (s *Store) gcTTL(ttl time.Duration) time.Duration {
	return (ttl+time.Second-1)/time.Second*time.Second + s.grace
}

// msgGetResponse is the JetStream API's answer to a message get.
type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject  string    `json:"subject"`
		Sequence uint64    `json:"seq"`
		Time     time.Time `json:"time"` // when the server stored the message, by its clock
		Header   []byte    `json:"hdrs,omitempty"`
		Data     []byte    `json:"data,omitempty"`
	} `json:"message,omitempty"`
}

// read gets key's last message from the stream leader (the JetStream API's
// message get, never a direct get, which a follower may answer from a
// stale copy). A key with no message reads as a record absent at 0.
//
// An answer older than a message of key this store already knows to be
// committed (one it wrote, watched or read), or with no message of a key
// it saw hold an entry within staleWindow, can only come from a server
// that lost the stream's leadership and has not noticed yet: read asks
// again, paced, until a current leader answers or ctx ends, and then
// fails as unavailable. So one Store never reads a key going back, and
// never decides on such an answer.
func (s *Store) read(ctx context.Context, key string) (record, error) {
	var p pacer
	for {
		r, err := s.readOnce(ctx, key)
		if err != nil {
			return r, err
		}
		known, old := s.stale(key, r)
		if !old {
			return r, nil
		}
		if err := p.wait(ctx); err != nil {
			if r.seq == 0 {
				return record{}, fmt.Errorf("key %q: the stream leader answers with no message of the key, though this store saw message %d hold an entry (%v): %w", key, known, err, backends.ErrUnavailable)
			}
			return record{}, fmt.Errorf("key %q: the stream leader answers with message %d, older than message %d this store saw (%v): %w", key, r.seq, known, err, backends.ErrUnavailable)
		}
	}
}

// stale reports whether r, a read of key, is older than the last message
// of key this store has seen committed, and that message's sequence. A
// message older than one this store saw of an entry with TTL is stale
// whenever it comes; older than any other message seen (a delete, an
// entry without TTL), within staleWindow of its sighting.
//
// An answer with no message of the key at all is stale when this store
// saw the key hold an entry within staleWindow: a deposed leader that
// has no message of a key created after it was cut off answers so, and
// reads as absent a claim the current leader lists. Once the window has
// passed it is believed: the server drops a key's last message only after
// its TTL and the grace, leaving a marker (SubjectDeleteMarkerTTL, which
// New requires), and no message at all only once that marker has gone
// too; nothing else the store allows removes one (see checkBucket). A
// delete seen last is no floor for an empty answer, which says absent as
// the delete does.
func (s *Store) stale(key string, r record) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.known[key]
	fresh := ok && time.Since(m.at) <= staleWindow
	if r.seq == 0 {
		return m.seq, fresh && m.present
	}
	known := s.seen[key].seq
	if fresh && m.seq > known {
		known = m.seq
	}
	return known, r.seq < known
}

// pacer spaces out the requests of one operation that keeps getting
// answers it cannot use: 5 ms, doubling up to 200 ms. It waits on real
// time, not the store's clock: it paces requests and judges nothing.
type pacer struct {
	d       time.Duration
	retried bool
}

// again lets an operation's first retry go at once and paces the later
// ones. A write refused on the sequence just read is retried after a new
// read; refused again and again, it may be talking to a deposed leader
// (see read) while a current one answers its reads.
func (p *pacer) again(ctx context.Context) error {
	if !p.retried {
		p.retried = true
		return nil
	}
	return p.wait(ctx)
}

// wait pauses for the next interval, or until ctx ends.
func (p *pacer) wait(ctx context.Context) error {
	p.d = min(max(2*p.d, 5*time.Millisecond), 200*time.Millisecond)
	t := time.NewTimer(p.d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// refused is the error of an operation whose writes were refused until
// its ctx ended (err): its outcome is not known to be a conflict.
func refused(op, key string, err error) error {
	return fmt.Errorf("nats: %s %q: refused on the sequence just read until %v: %w", op, key, err, backends.ErrUnavailable)
}

// readOnce is one message get of key's last message.
func (s *Store) readOnce(ctx context.Context, key string) (record, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": s.subj + encodeKey(key)})
	msg, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+s.stream, req)
	if err != nil {
		return record{}, s.mapErr(err, "the read of the key's last message")
	}
	var resp msgGetResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return record{}, fmt.Errorf("decode message get response: %v: %w", err, backends.ErrUnavailable)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == noMessageFound {
			return record{entry: backends.Entry{Key: key}}, nil
		}
		return record{}, mapErr(resp.Error)
	}
	if resp.Message == nil {
		return record{}, fmt.Errorf("message get: empty response: %w", backends.ErrUnavailable)
	}
	var h nats.Header
	if len(resp.Message.Header) > 0 {
		if h, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return record{}, fmt.Errorf("key %q: message %d: headers: %v: %w", key, resp.Message.Sequence, err, backends.ErrCorrupt)
		}
	}
	r, err := decode(key, resp.Message.Sequence, h, resp.Message.Data)
	if err == nil && r.present {
		// The last write or keep-alive, as the stream leader stamped it:
		// shown to people, never judged.
		r.entry.Recorded = resp.Message.Time
	}
	return r, err
}
