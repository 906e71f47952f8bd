package shards

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/cenkalti/backoff/v4"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/wire"
)

// MaxCount bounds a group's shard count. A member keeps a few dozen bytes
// per shard of the group (its view of each shard's owner, the placement),
// reads every shard's entry in a full read of the group, and computes a
// placement in time proportional to the count times the members; each
// shard it campaigns for costs an elector. At MaxCount a full read returns
// 65,536 entries and a placement over 256 members takes tens of
// milliseconds (BenchmarkPlace).
const MaxCount = 65536

var (
	// ErrCountMismatch is returned when the group's shard count recorded in
	// the store differs from Config.Count. A group's count is fixed when its
	// first member starts; see the package documentation for changing it.
	ErrCountMismatch = errors.New("shards: stored shard count differs from the configured one")
	// ErrAlreadyStarted is returned when Start (or Run) is called on a Member
	// started, or stopped, before. A Member runs once; make a new one to run
	// again.
	ErrAlreadyStarted = errors.New("shards: already started")
)

// Config configures a Member.
type Config struct {
	// Group names the group: every store key of the group lies under
	// Group + "/". Required.
	Group string

	// Identity names this member in the group (a host name, an address
	// other members can reach). Required; any identity backends.NewHolder
	// accepts. Placement is computed over identities, so a member
	// restarted with the same Identity gets the same shards back.
	Identity string

	// Count is the group's shard count S, recorded in the store by the
	// first member to start; 1 ≤ Count ≤ MaxCount. A member configured
	// with another count than the recorded one fails to start with
	// ErrCountMismatch, except while a change of count (Resize) is in
	// flight, when either end of it is accepted. A running member follows
	// every change of the recorded count, whatever it was configured with.
	Count int

	// Elector is the template of every elector the member runs (one for
	// its membership, one for each shard it campaigns for): timings,
	// clock, logger and trace hooks, with the defaults package elector
	// documents. Key, Identity and the three callbacks must be left
	// empty: the member sets them.
	Elector elector.Config

	// OnAcquired is called when this member becomes the owner of shard,
	// with the shard's term (its Token is the fencing token every write
	// made for the shard must carry). ctx is the ownership: it is
	// cancelled when the term ends, before the local deadline, as the
	// elector's leadership context is. OnAcquired may return at once or
	// block until ctx is done, draining the shard's work: the shard's
	// claim is not released before it returns (up to the template's
	// DrainTimeout; then the claim is left to expire). May be nil.
	OnAcquired func(ctx context.Context, shard int, term elector.Term)

	// OnReleased is called exactly once after each OnAcquired, when that
	// term has ended and its claim was released or left to expire, with
	// the reason. May be nil.
	OnReleased func(shard int, term elector.Term, cause elector.Cause)

	// Logger receives the member's own logs (placement changes, watch and
	// list errors) with the keys group, member and shard. Default: nil,
	// which logs nothing. The electors log through Elector.Logger.
	Logger *slog.Logger
}

// Validate reports what is wrong with c, joined under one "shards: config: "
// prefix; nil if c is usable.
func (c Config) Validate() error {
	var errs []error
	if c.Group == "" {
		errs = append(errs, errors.New("group is empty"))
	} else if err := backends.ValidateKey(countKey(c.Group)); err != nil {
		errs = append(errs, err)
	}
	if c.Count < 1 || c.Count > MaxCount {
		errs = append(errs, fmt.Errorf("count %d out of range [1, %d]", c.Count, MaxCount))
	}
	t := c.Elector
	if t.Key != "" || t.Identity != "" || t.OnElected != nil || t.OnDemoted != nil || t.OnNewLeader != nil {
		errs = append(errs, errors.New("the elector template sets Key, Identity or a callback; leave them empty"))
	}
	if c.Group != "" && c.Count >= 1 && c.Count <= MaxCount {
		// The longest keys the member uses: its membership and its last shard.
		for _, key := range []string{memberKey(c.Group, c.Identity), shardKey(c.Group, c.Count-1)} {
			t.Key, t.Identity = key, c.Identity
			if err := t.Validate(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("shards: config: %w: %w", errors.Join(errs...), backends.ErrInvalid)
}

// Owner is the holder of a shard's claim as a member last observed it.
type Owner struct {
	Holder backends.Holder // Holder.ID is the owning member's Identity
	Token  int64           // the fencing token of the owner's claim
}

// The store layout of group g.
func countKey(g string) string            { return g + "/count" }
func memberPrefix(g string) string        { return g + "/member/" }
func memberKey(g, id string) string       { return memberPrefix(g) + id }
func shardPrefix(g string) string         { return g + "/shard/" }
func shardKey(g string, shard int) string { return shardPrefix(g) + strconv.Itoa(shard) }

// Member is one member of a shard group: it announces itself, observes the
// other members and the shards' owners, and campaigns for the shards placed
// on it, one elector per shard.
//
// Lifecycle: New returns a Member that does nothing until Start (or Run).
// Start runs once; Stop, or cancelling the context given to Start, ends it for
// good: the member leaves the group, every shard it owns is drained and
// released, and Done is closed. The query methods are safe to call from any
// goroutine at any time, callbacks included.
type Member struct {
	store  backends.Store
	locker *claims // the store's claims, watched through hub
	hub    *hub
	cfg    Config
	clk    clock.Clock
	log    *slog.Logger
	ttl    time.Duration
	// The longest waits between two reads of the whole group, and between
	// two reads of its members alone (0: none but the whole group's).
	fullEvery, memberEvery time.Duration
	// memberWhole: the reads every memberEvery read the shards too.
	memberWhole bool

	kick      chan struct{} // wakes the loop: the group changed, a run ended
	watchDone chan struct{} // closed when the group watch's goroutine has exited
	stopCh    chan struct{} // closed by Stop
	done      chan struct{} // closed when the loop and every elector have finished

	stopOnce sync.Once

	mu       sync.Mutex
	started  bool            // guarded by mu
	view     *view           // the members and owners known; guarded by mu
	resync   bool            // the watch broke and could not be reopened at once: read the whole group; guarded by mu
	mended   bool            // the watch broke and was reopened at once; guarded by mu
	members  []string        // the live members the placement was computed from; guarded by mu
	runs     map[int]*run    // the elector of each shard of the current count campaigned or being stopped; guarded by mu
	retiring map[string]*run // by claim key, the electors of an earlier count still stopping; guarded by mu
	from     int             // the earlier count whose claims a shard is sealed from before its elector starts; 0: none; guarded by mu
	halted   map[int]bool    // shards whose elector ended with an error, not campaigned again before the next full read; guarded by mu
	placed   []string        // the last placement computed; guarded by mu
	mine     []int           // the shards placed here, in order; guarded by mu
	err      error           // the last error reading the group; guarded by mu
	listened chan struct{}   // closed and replaced after each reconcile (a test hook); guarded by mu
	member   *elector.Elector
}

// run is the elector of one shard.
type run struct {
	el       *elector.Elector
	key      string             // its claim key
	cancel   context.CancelFunc // ends the sealing that precedes its start
	stopping bool               // Stop has been asked; guarded by Member.mu
	done     chan struct{}      // closed once el is done and the run is forgotten
	// sealing: 1 while the sealing before its start waits on a timer, 2
	// while it waits otherwise (a test counts the armed timers).
	sealing atomic.Int32
}

// stop ends the run: the sealing its start waits for, if any, and its
// elector, which drains and releases.
func (r *run) stop() {
	r.cancel()
	_ = r.el.Stop(context.Background())
}

// New returns a Member of cfg.Group over store. It fails if cfg does not
// validate, or, with an error wrapping backends.ErrUnsupported, if the store
// cannot enforce claims (create-if-absent, compare-and-delete, keep-alive).
func New(store backends.Store, cfg Config) (*Member, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sl, err := backends.NewLocker(store)
	if err != nil {
		return nil, fmt.Errorf("shards: %w", err)
	}
	h := newHub(store)
	clk := cfg.Elector.Clock
	if clk == nil {
		clk = clock.New()
		cfg.Elector.Clock = clk
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("group", cfg.Group, "member", cfg.Identity)
	ttl := cfg.Elector.TTL
	if ttl == 0 {
		ttl = elector.DefaultTTL
	}
	m := &Member{
		store: store, locker: &claims{StoreLocker: sl, hub: h}, hub: h, cfg: cfg, clk: clk, log: log, ttl: ttl,
		watchDone: make(chan struct{}),
		kick:      make(chan struct{}, 1),
		stopCh:    make(chan struct{}),
		done:      make(chan struct{}),
		runs:      make(map[int]*run),
		retiring:  make(map[string]*run),
		halted:    make(map[int]bool),
		view:      newView(cfg.Group, layout{count: cfg.Count}),
		listened:  make(chan struct{}),
	}
	// Without expiry events, a member's departure by crash shows only when
	// the members are read again: read them often enough for a takeover
	// within a TTL and a sixth. The shards' claims need no such reads: a
	// claim that expires is taken by the member its shard is placed on,
	// whose acquisition the watch reports. With a watch, a read of the
	// whole group is only a backstop.
	switch {
	case !h.can: // everything shows through reads alone
		m.fullEvery = ttl / 6
	case !h.expiry:
		m.fullEvery, m.memberEvery = 10*ttl, ttl/6
		// Where expiry is judged by local observation, a claim expires
		// for this member's store a TTL after the store first saw its
		// last keep-alive, which a watch without expiry events does not
		// show either (PostgreSQL). Reading the shards with the members
		// keeps those sightings within TTL/6 of every keep-alive, so
		// that a crashed member's shard claims expire here with its
		// membership, and the new owners take them then rather than a
		// TTL after their first look.
		m.memberWhole = store.Capabilities().ObservedExpiry
	default:
		m.fullEvery = 10 * ttl
	}
	return m, nil
}

// ShardOf returns the shard of key in this group: ShardOf(key, m.Count()).
func (m *Member) ShardOf(key string) int { return ShardOf(key, m.Count()) }

// Count returns the shard count this member routes by: the group's
// recorded count once the member has started (Config.Count before), the
// new one as soon as the member has seen a change of count begin. Like
// Owner it is a hint: which keys a term covers is its Span's to say.
func (m *Member) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.view.count
}

// Span is the set of keys one shard claim covers: the shard of a count,
// in a generation of the group's counts (0 for the count the group began
// with, one more at each change of count).
type Span struct {
	Shard      int
	Count      int
	Generation int
}

// Has reports whether key lies in the span: ShardOf(key, s.Count) == s.Shard.
func (s Span) Has(key string) bool { return ShardOf(key, s.Count) == s.Shard }

// SpanOf returns the span of a term of this member's (OnAcquired's term,
// or Term's), and false for a term of a count this member no longer
// knows. A term's span never changes: across a change of count, terms of
// the old count end and terms of the new one begin, under other claim
// keys, so a term's work covers exactly the keys its span has.
func (m *Member) SpanOf(term elector.Term) (Span, bool) {
	m.mu.Lock()
	gen, count, from := m.view.gen, m.view.count, m.from
	m.mu.Unlock()
	if shard, ok := parseShardKey(m.cfg.Group, gen, count, term.Key); ok {
		return Span{Shard: shard, Count: count, Generation: gen}, true
	}
	if from != 0 && gen > 0 {
		if shard, ok := parseShardKey(m.cfg.Group, gen-1, from, term.Key); ok {
			return Span{Shard: shard, Count: from, Generation: gen - 1}, true
		}
	}
	return Span{}, false
}

// Members returns the identities of the group's live members as last read
// (sorted), this member's included once it has joined.
func (m *Member) Members() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

// Owner returns the owner of shard as last observed, through the store
// (watch or read) or by this member's own acquisition, and whether it had
// one. It is a hint for routing: the claim may have changed hands since,
// and only the owner's own Term says it may act.
func (m *Member) Owner(shard int) (Owner, bool) {
	m.mu.Lock()
	if shard < 0 || shard >= m.view.count {
		m.mu.Unlock()
		return Owner{}, false
	}
	o, r := m.view.owners[shard], m.runs[shard]
	m.mu.Unlock()
	// This member's own term is an observation too, and may be newer than
	// what the store reported.
	if r != nil {
		if t, ok := r.el.Term(); ok && t.Token > o.Token {
			o = Owner{Holder: t.Holder, Token: t.Token}
		}
	}
	return o, o.Token != 0
}

// Owned lists, in order, the shards this member owns now: those whose
// elector reports IsLeader at the call.
func (m *Member) Owned() []int {
	type run struct {
		shard int
		el    *elector.Elector
	}
	m.mu.Lock()
	runs := make([]run, 0, len(m.runs))
	for shard, r := range m.runs {
		runs = append(runs, run{shard, r.el})
	}
	m.mu.Unlock()
	var out []int
	for _, r := range runs {
		if r.el.IsLeader() {
			out = append(out, r.shard)
		}
	}
	slices.Sort(out)
	return out
}

// Term returns this member's current term on shard and true while it owns
// the shard (its elector's IsLeader would return true). Code acting for a
// shard outside OnAcquired checks it, and carries its Token, at each action.
func (m *Member) Term(shard int) (elector.Term, bool) {
	m.mu.Lock()
	r := m.runs[shard]
	m.mu.Unlock()
	if r == nil {
		return elector.Term{}, false
	}
	return r.el.Term()
}

// Err returns the last error met reading the group, or nil if the last read
// succeeded.
func (m *Member) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Done is closed when the Member has finished: it has left the group and
// every shard elector has finished, its callbacks included.
func (m *Member) Done() <-chan struct{} { return m.done }

// Start records the group's shard count if the group has none, or checks it
// against Config.Count (ErrCountMismatch), then starts the member in the
// background: it joins the group and campaigns for its shards. Cancelling
// ctx has the effect of Stop (without waiting).
func (m *Member) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return ErrAlreadyStarted
	}
	m.started = true
	m.mu.Unlock()
	lay, err := m.checkCount(ctx)
	if err != nil {
		close(m.done)
		return err
	}
	m.mu.Lock()
	m.view = newView(m.cfg.Group, lay)
	m.from = lay.from
	m.mu.Unlock()
	mcfg := m.cfg.Elector
	mcfg.Key, mcfg.Identity = memberKey(m.cfg.Group, m.cfg.Identity), m.cfg.Identity
	el, err := elector.New(m.locker, mcfg)
	if err != nil {
		close(m.done)
		return fmt.Errorf("shards: membership: %w", err)
	}
	m.mu.Lock()
	m.member = el
	m.mu.Unlock()
	// The group watch is opened before any elector starts, so that their
	// claim watches work from their first attempt.
	wctx, cancelWatch := context.WithCancel(context.Background())
	go m.watch(wctx, m.openWatch(wctx))
	if err := el.Start(context.Background()); err != nil {
		cancelWatch()
		<-m.watchDone
		close(m.done)
		return fmt.Errorf("shards: membership: %w", err)
	}
	go m.loop(ctx, cancelWatch)
	return nil
}

// Run starts the member and blocks until ctx is cancelled or Stop is called
// elsewhere, then stops it as Stop does. It returns nil after a clean stop.
func (m *Member) Run(ctx context.Context) error {
	if err := m.Start(ctx); err != nil {
		return err
	}
	<-m.done
	return nil
}

// Stop makes the member leave: it releases its membership, so the others
// place its shards elsewhere and start campaigning for them, and meanwhile
// ends the ownership of every shard it owns (each shard's OnAcquired context is
// cancelled, and its claim released once OnAcquired has returned) and waits
// for every elector to finish, at most until ctx is done. Stop may be called
// more than once, and before Start.
func (m *Member) Stop(ctx context.Context) error {
	m.stopOnce.Do(func() { close(m.stopCh) })
	m.mu.Lock()
	started := m.started
	m.started = true // a Member stopped before Start never starts
	m.mu.Unlock()
	if !started {
		close(m.done)
		return nil
	}
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("shards: stop %q: %w", m.cfg.Identity, context.Cause(ctx))
	}
}

// checkCount records the configured count if the group has none, or
// checks it against the stored one, and returns the group's record.
func (m *Member) checkCount(ctx context.Context) (layout, error) {
	key := countKey(m.cfg.Group)
	want := layout{count: m.cfg.Count}
	for {
		e, err := m.store.Get(ctx, key)
		if err == nil {
			l, ok := parseLayout(e.Value)
			if !ok || (l.count != m.cfg.Count && (!l.changing() || l.from != m.cfg.Count)) {
				return layout{}, fmt.Errorf("shards: group %q: stored count %q, configured %d: %w", m.cfg.Group, storedCount(e.Value), m.cfg.Count, ErrCountMismatch)
			}
			return l, nil
		}
		if !errors.Is(err, backends.ErrNotFound) {
			return layout{}, fmt.Errorf("shards: read count of %q: %w", m.cfg.Group, err)
		}
		_, err = m.store.CreateIfAbsent(ctx, key, []byte(want.String()), 0)
		if err == nil {
			return want, nil
		}
		if !errors.Is(err, backends.ErrExists) {
			return layout{}, fmt.Errorf("shards: record count of %q: %w", m.cfg.Group, err)
		}
		// Another member recorded it first: read theirs.
	}
}

// storedCount is a stored count as an error quotes it: a value that is
// not a count, written by anything else, is cut short.
func storedCount(v []byte) string {
	const most = 24
	if len(v) > most {
		return string(v[:most]) + "…"
	}
	return string(v)
}

// loop campaigns for the shards placed here whenever the group changes
// (the watch wakes it) until the member is stopped; then it shuts down. It
// reads the whole group at start, after the watch broke and could not be
// reopened at once, and every fullEvery; on a store without expiry events
// it also reads the members every memberEvery (the whole group where
// memberWhole), to notice a member whose membership expired; after a
// break the watch mended at once, it reads the members at once and the
// whole group within a TTL. In between, the watch's events keep the view
// current.
func (m *Member) loop(startCtx context.Context, cancelWatch context.CancelFunc) {
	defer close(m.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The next reads are due at fixed times that the watch's events do not
	// push back: a steady flow of events must not delay the read that
	// notices an expiry the store's watch does not report. After a failed
	// read the next one waits out a backoff, which a reopened watch does
	// not cut short: a store that keeps failing is not read in a loop.
	fullDue := m.clk.Now()
	var memberDue time.Time // zero: no reads of the members alone
	var retry time.Time     // after a failed read: the backoff's end
	bo := m.newBackoff()
	failed := func(now time.Time) time.Time {
		retry = now.Add(bo.NextBackOff())
		return retry
	}
	for {
		now := m.clk.Now()
		switch {
		case !now.Before(fullDue):
			if m.read(ctx, true) {
				m.mu.Lock()
				clear(m.halted) // campaigned again, at most once per full read
				m.mu.Unlock()
				bo.Reset()
				retry = time.Time{}
				fullDue = now.Add(m.fullEvery)
				memberDue = time.Time{}
				if m.memberEvery > 0 {
					memberDue = now.Add(m.memberEvery)
				}
			} else {
				fullDue = failed(now)
				if !memberDue.IsZero() {
					memberDue = fullDue // the full read owed reads the members too
				}
			}
		case !memberDue.IsZero() && !now.Before(memberDue):
			if m.read(ctx, m.memberWhole) {
				bo.Reset()
				retry = time.Time{}
				memberDue = time.Time{}
				if m.memberEvery > 0 {
					memberDue = now.Add(m.memberEvery)
				}
			} else {
				memberDue = later(failed(now), now.Add(m.memberEvery))
			}
		}
		next := fullDue
		if !memberDue.IsZero() && memberDue.Before(next) {
			next = memberDue
		}
		m.reconcile()
		t := m.clk.Timer(next.Sub(m.clk.Now()))
		select {
		case <-m.stopCh:
		case <-startCtx.Done():
		case <-m.kick:
			m.mu.Lock()
			resync, mended := m.resync, m.mended
			m.resync, m.mended = false, false
			m.mu.Unlock()
			due := later(m.clk.Now(), retry)   // now, or at the backoff's end
			if resync && due.Before(fullDue) { // read the whole group
				fullDue = due
			}
			if mended {
				// The watch broke and was reopened at once: read the
				// members now, which placement depends on, and the owners,
				// which are hints, within a TTL. Whole reads after every
				// break would cost a list of every shard each time; in a
				// large group, where many members hand shards over at
				// once, a store ends watches that fall behind often, and
				// those lists slow every member (on memstore they hold the
				// store's lock).
				if memberDue.IsZero() || due.Before(memberDue) {
					memberDue = due
				}
				if owners := due.Add(m.ttl); owners.Before(fullDue) {
					fullDue = owners
				}
			}
		case <-t.C:
		}
		t.Stop()
		select {
		case <-m.stopCh:
		case <-startCtx.Done():
		default:
			continue
		}
		break
	}
	m.shutdown()
	cancelWatch()
	<-m.watchDone
}

// newBackoff returns the backoff of the member's reads after a failure: from
// TTL/6, doubling up to one TTL, jittered as the elector template's waits
// are, on the member's clock, and never giving up.
func (m *Member) newBackoff() *backoff.ExponentialBackOff {
	jitter := m.cfg.Elector.Jitter
	switch {
	case m.cfg.Elector.DisableJitter:
		jitter = 0
	case jitter == 0:
		jitter = readJitter
	}
	b := &backoff.ExponentialBackOff{
		InitialInterval:     m.ttl / 6,
		RandomizationFactor: jitter,
		Multiplier:          2,
		MaxInterval:         m.ttl,
		MaxElapsedTime:      0, // never stop reading
		Stop:                backoff.Stop,
		Clock:               m.clk,
	}
	b.Reset()
	return b
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// readJitter is the jitter of the read backoff when the elector template
// leaves Jitter at its default.
const readJitter = 0.15

// stream is one open group watch: its events, and what ends it.
type stream struct {
	events <-chan backends.Event
	cancel context.CancelFunc
}

// openWatch opens the group watch, or returns a stream without events if it
// cannot.
func (m *Member) openWatch(ctx context.Context) stream {
	if !m.hub.can {
		return stream{}
	}
	sctx, cancel := context.WithCancel(ctx)
	events, err := m.store.(backends.Watcher).Watch(sctx, m.cfg.Group+"/")
	if err != nil {
		cancel()
		if ctx.Err() == nil {
			m.log.Warn("shards: watch", "err", err)
		}
		return stream{}
	}
	m.hub.setUp(true)
	return stream{events: events, cancel: cancel}
}

// watch runs the group watch until ctx is done, following each stream (see
// follow), and when a stream ends it opens another at once, then after the
// read backoff's waits (from TTL/6 up to a TTL) until that works.
func (m *Member) watch(ctx context.Context, st stream) {
	defer close(m.watchDone)
	if !m.hub.can {
		return
	}
	bo := m.newBackoff()
	var mended time.Time // when a stream was last mended
	for {
		if st.events != nil {
			bo.Reset()
			m.follow(st)
			// A stream that ends is mended at once if the store lets it be:
			// the claim watches of the electors then stay open and are each
			// signalled, once the new stream is open, that their claim may
			// have changed meanwhile. Ending them would leave every
			// follower timing its next attempt to its holder's expiry (a
			// TTL away) until it watches again, and a store ends a watch
			// that fell behind when many members hand shards over at once.
			// Streams are mended at most every TTL/6, so that a store
			// whose streams keep ending is not watched, and its claims
			// tried, in a loop.
			if !mended.IsZero() {
				if wait := mended.Add(m.ttl / 6).Sub(m.clk.Now()); wait > 0 {
					t := m.clk.Timer(wait)
					select {
					case <-ctx.Done():
						t.Stop()
						m.hub.setUp(false)
						return
					case <-t.C:
					}
				}
			}
			mended = m.clk.Now()
			next := m.openWatch(ctx)
			m.mu.Lock()
			if next.events == nil {
				m.resync = true // changes may have been missed: read the group again
			} else {
				m.mended = true
			}
			m.mu.Unlock()
			if next.events == nil {
				m.hub.setUp(false)
			}
			m.wake()
			if st = next; st.events != nil {
				m.hub.notifyAll()
				continue
			}
		}
		t := m.clk.Timer(bo.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if st = m.openWatch(ctx); st.events != nil {
			// What changed while the watch was down shows in a read made
			// now that it runs again, not in one made before.
			m.mu.Lock()
			m.resync = true
			m.mu.Unlock()
			m.wake()
		}
	}
}

// maxBacklog bounds the events a member holds received but not yet
// applied; past it the member ends the stream and reads the group again,
// as when the store ends a watch that fell behind.
const maxBacklog = 1 << 16

// follow applies the events of st until it ends: each batch of events
// received meanwhile updates the view under one lock, then signals the
// claim watches of their keys and wakes the loop. A goroutine of its own
// receives them, so that the store's channel is emptied as events come,
// whatever holds the member's lock or the CPU meanwhile: a store ends a
// watch whose consumer falls its buffer behind (256 events on memstore
// and PostgreSQL), and in a group of many members and shards a single
// join moves that many, and each end costs a read of the whole group.
func (m *Member) follow(st stream) {
	defer st.cancel()
	var (
		mu       sync.Mutex
		backlog  []backends.Event // guarded by mu
		overflow bool             // guarded by mu
	)
	ready := make(chan struct{}, 1)
	signal := func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	}
	received := make(chan struct{}) // closed once the stream has ended and nothing more is added
	go func() {
		for ev := range st.events {
			mu.Lock()
			switch {
			case len(backlog) < maxBacklog && !overflow:
				backlog = append(backlog, ev)
			case !overflow:
				overflow = true // what follows is skipped: end the stream
				st.cancel()
				m.log.Warn("shards: the group watch fell behind; reading the group again", "events", len(backlog))
			}
			mu.Unlock()
			signal()
		}
		close(received)
		signal()
	}()
	var batch []backends.Event
	for {
		<-ready
		done := false
		select {
		case <-received:
			done = true // so the batch taken below is the last
		default:
		}
		mu.Lock()
		batch, backlog = backlog, batch[:0]
		mu.Unlock()
		if len(batch) > 0 {
			m.mu.Lock()
			for _, ev := range batch {
				m.view.apply(ev)
			}
			m.mu.Unlock()
			for _, ev := range batch {
				m.hub.notify(ev.Entry.Key)
			}
			m.wake()
		}
		clear(batch)
		if done {
			return
		}
	}
}

// read reads the group into the view, the whole group or its members
// alone, and reports whether it could.
func (m *Member) read(ctx context.Context, whole bool) bool {
	m.mu.Lock()
	start, gen, count := m.view.seq, m.view.gen, m.view.count
	m.mu.Unlock()
	members, owners, lay, err := m.list(ctx, whole, gen, count)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.err = err
	if err != nil {
		m.log.Warn("shards: read group", "err", err)
		return false
	}
	if whole {
		m.view.noteLayout(start, lay)
	}
	if m.view.gen != gen {
		owners = nil // read under another count
	}
	m.view.applyRead(start, members, owners)
	return true
}

// reconcile campaigns for the shards the view places here and stops the
// electors of the others. When the members changed it computes the new
// placement first, without holding m.mu: Place takes milliseconds for
// thousands of shards over dozens of members, and Owner, Owned, Members
// and the watch must not wait for it. Only the loop calls reconcile, so the
// placement cannot change meanwhile; if the view does, its watch event
// wakes the loop, which reconciles again.
func (m *Member) reconcile() {
	m.mu.Lock()
	if m.view.lay.gen > m.view.gen {
		m.reshardLocked()
	}
	members := m.view.memberList()
	count := m.view.count
	replace := m.placed == nil || !slices.Equal(members, m.members)
	m.mu.Unlock()
	var placed []string
	if replace {
		if h := placing.Load(); h != nil {
			(*h)(members)
		}
		placed = placements.place(count, members)
	}
	m.mu.Lock()
	if replace {
		m.members, m.placed = members, placed
		m.mine = m.mine[:0]
		for shard, id := range m.placed {
			if id == m.cfg.Identity {
				m.mine = append(m.mine, shard)
			}
		}
		m.log.Debug("shards: members", "members", members)
	}
	var start []int
	for _, shard := range m.mine {
		if m.runs[shard] == nil && !m.halted[shard] {
			start = append(start, shard)
		}
	}
	for shard, r := range m.runs {
		if m.placed[shard] != m.cfg.Identity && !r.stopping {
			r.stopping = true
			go r.stop()
		}
	}
	m.mu.Unlock()
	// The electors are made and started without m.mu held: a change of
	// membership in a large group starts hundreds, and the group watch
	// applies its events under m.mu.
	for _, shard := range start {
		m.campaign(shard)
	}
	m.mu.Lock()
	close(m.listened)
	m.listened = make(chan struct{})
	m.mu.Unlock()
}

// reshardLocked moves the member to the count the group's record names:
// it stops every elector of the old count (each drains and releases, as
// at any handover; they finish as retiring runs), and forgets the old
// count's owners and placement, so that reconcile campaigns for the new
// count's shards placed here. Their electors start once the old count's
// claims they draw keys from are sealed (campaign).
func (m *Member) reshardLocked() {
	lay := m.view.lay
	m.log.Info("shards: the shard count changes", "from", m.view.count, "to", lay.count, "generation", lay.gen)
	for _, r := range m.runs {
		m.retiring[r.key] = r
		if !r.stopping {
			r.stopping = true
			go r.stop()
		}
	}
	m.runs = make(map[int]*run)
	clear(m.halted)
	m.from = lay.from
	if lay.gen > m.view.gen+1 {
		// Generations passed unseen: the one before lay's was sealed
		// whole before lay's began, and this member holds none of its
		// claims (a change ends only once every claim of its old count
		// has), so its new shards wait for nothing.
		m.from = 0
	}
	m.view.reshard(lay)
	m.placed, m.mine = nil, nil
}

// list lists the group's live members (with their entries' tokens) and, if
// whole, the group's record and the owners of its shards of generation gen,
// which has count shards (else owners is nil).
func (m *Member) list(ctx context.Context, whole bool, gen, count int) (map[string]int64, []Owner, layout, error) {
	var lay layout
	if whole {
		e, err := m.store.Get(ctx, countKey(m.cfg.Group))
		if err != nil {
			return nil, nil, lay, fmt.Errorf("shards: read the count of %q: %w", m.cfg.Group, err)
		}
		var ok bool
		if lay, ok = parseLayout(e.Value); !ok {
			return nil, nil, lay, fmt.Errorf("shards: group %q: stored count %q: %w", m.cfg.Group, storedCount(e.Value), ErrCountMismatch)
		}
	}
	entries, err := m.store.List(ctx, memberPrefix(m.cfg.Group))
	if err != nil {
		return nil, nil, lay, fmt.Errorf("shards: list members of %q: %w", m.cfg.Group, err)
	}
	members := map[string]int64{}
	for _, e := range entries {
		c, err := wire.DecodeClaim(e.Value)
		id := c.ID
		if err != nil || memberKey(m.cfg.Group, id) != e.Key {
			m.log.Warn("shards: ignoring a foreign entry among the members", "key", e.Key)
			continue
		}
		members[id] = e.CreateRevision
	}
	if !whole {
		return members, nil, lay, nil
	}
	entries, err = m.store.List(ctx, genShardPrefix(m.cfg.Group, gen))
	if err != nil {
		return nil, nil, lay, fmt.Errorf("shards: list shards of %q: %w", m.cfg.Group, err)
	}
	owners := make([]Owner, count)
	for _, e := range entries {
		shard, ok := parseShardKey(m.cfg.Group, gen, count, e.Key)
		if !ok || isSeal(e.Value, 0) {
			continue // a sealed shard of a count this member has not seen replaced: no owner
		}
		c, err := wire.DecodeClaim(e.Value)
		if err != nil {
			return nil, nil, lay, fmt.Errorf("shards: shard %d of %q: %v: %w", shard, m.cfg.Group, err, backends.ErrCorrupt)
		}
		owners[shard] = Owner{Holder: backends.Holder{ID: c.ID, Nonce: c.Nonce, Advertised: c.Advertised}, Token: e.CreateRevision}
	}
	return members, owners, lay, nil
}

// campaign starts the elector of shard, registered in m.runs before it
// starts, so that Term and Owner see it from its first term on. Only the
// loop calls it, so no other run of shard can be registered meanwhile.
// While a change of count is in flight, the elector starts only once
// every claim of the old count that the shard draws keys from has ended
// and is sealed (seal).
func (m *Member) campaign(shard int) {
	m.mu.Lock()
	gen, count, from := m.view.gen, m.view.count, m.from
	m.mu.Unlock()
	cfg := m.cfg.Elector
	cfg.Key, cfg.Identity = genShardKey(m.cfg.Group, gen, shard), m.cfg.Identity
	onAcquired := m.cfg.OnAcquired
	if onAcquired != nil {
		cfg.OnElected = func(ctx context.Context, term elector.Term) { onAcquired(ctx, shard, term) }
	}
	if f := m.cfg.OnReleased; f != nil {
		cfg.OnDemoted = func(term elector.Term, cause elector.Cause) { f(shard, term, cause) }
	}
	el, err := elector.New(m.locker, cfg)
	if err != nil { // a key of a later count the template refuses
		m.log.Error("shards: start shard elector", "shard", shard, "err", err)
		m.mu.Lock()
		m.halted[shard] = true
		m.mu.Unlock()
		return
	}
	sctx, cancel := context.WithCancel(context.Background())
	r := &run{el: el, key: cfg.Key, cancel: cancel, done: make(chan struct{})}
	if from != 0 {
		r.sealing.Store(2)
	}
	m.mu.Lock()
	m.runs[shard] = r
	m.mu.Unlock()
	start := func() {
		defer cancel()
		if from != 0 && !m.seal(sctx, r, gen, from, count, shard) {
			return // stopped while it waited: r.stop stops el too
		}
		r.sealing.Store(0)
		if err := el.Start(context.Background()); err != nil {
			m.mu.Lock()
			stopping := r.stopping
			m.mu.Unlock()
			if !stopping { // not expected
				m.log.Error("shards: start shard elector", "shard", shard, "err", err)
				_ = el.Stop(context.Background())
			}
		}
	}
	if from == 0 {
		start()
	} else {
		go start()
	}
	go func() {
		<-el.Done()
		err := el.Err()
		if err != nil {
			m.log.Error("shards: shard elector ended", "shard", shard, "err", err)
		}
		m.mu.Lock()
		if m.runs[shard] == r {
			delete(m.runs, shard)
			if err != nil && !r.stopping {
				// Not campaigned again before the next full read, which
				// also shows a change of count this member missed (whose
				// sealed claims end an elector of the old count so).
				m.halted[shard] = true
			}
		}
		if m.retiring[r.key] == r {
			delete(m.retiring, r.key)
		}
		m.mu.Unlock()
		close(r.done)
		m.wake()
	}()
}

// seal waits until every claim of generation gen-1 (from shards) that
// shard of generation gen (count shards) draws keys from has ended, and
// seals each, so that no elector of the old count takes it again. A run
// of this member's own on such a claim finishes first, its callbacks
// included, so that callbacks of one shard number never overlap here.
// It returns false if ctx ended first.
func (m *Member) seal(ctx context.Context, run *run, gen, from, count, shard int) bool {
	for _, s := range sources(from, count, shard) {
		key := genShardKey(m.cfg.Group, gen-1, s)
		m.mu.Lock()
		r := m.retiring[key]
		m.mu.Unlock()
		if r != nil {
			select {
			case <-r.done:
			case <-ctx.Done():
				return false
			}
		}
		if !m.sealKey(ctx, run, key, gen) {
			return false
		}
	}
	return true
}

// sealKey writes the seal of generation gen at key once the claim there,
// if any, has ended, as the store judges it: a create that succeeds only
// where the key is absent, as an elector takes a claim. It waits for the
// claim's end on the group watch where the store has one, and reads the
// claim again every TTL/6 (which, where expiry is judged by local
// observation, keeps this store's sighting of its last keep-alive
// recent), backing off from TTL/6 to a TTL while the store fails.
func (m *Member) sealKey(ctx context.Context, run *run, key string, gen int) bool {
	seal := sealValue(gen)
	bo := m.newBackoff()
	for {
		wctx, cancel := context.WithCancel(ctx)
		changed, _ := m.hub.subscribe(wctx, key) // nil while the group watch is down
		var wait time.Duration
		_, err := m.store.CreateIfAbsent(ctx, key, seal, 0)
		var ce *backends.ConflictError
		switch {
		case err == nil:
			cancel()
			return true
		case errors.As(err, &ce) && ce.Found && isSeal(ce.Current.Value, gen):
			cancel()
			return true // sealed by another member, or by Resize
		case errors.Is(err, backends.ErrExists) && (ce == nil || !ce.Found):
			// The store did not say what is there: read it.
			if e, gerr := m.store.Get(ctx, key); gerr == nil && isSeal(e.Value, gen) {
				cancel()
				return true
			}
			wait = m.ttl / 6
		case errors.Is(err, backends.ErrExists):
			bo.Reset()
			wait = m.ttl / 6 // a claim of the old count: wait for its end
		default:
			if ctx.Err() != nil {
				cancel()
				return false
			}
			m.log.Warn("shards: seal a claim of the earlier count", "key", key, "err", err)
			wait = bo.NextBackOff()
		}
		run.sealing.Store(1)
		t := m.clk.Timer(wait)
		select {
		case <-ctx.Done():
		case <-changed:
		case <-t.C:
		}
		t.Stop()
		run.sealing.Store(2)
		cancel()
		if ctx.Err() != nil {
			return false
		}
	}
}

// placing, when a test sets it, is called by reconcile with the members it
// is about to compute a placement for, without m.mu held.
var placing atomic.Pointer[func(members []string)]

// wake makes the loop read the group again.
func (m *Member) wake() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// shutdown leaves the group and, at the same time, stops every shard
// elector, then waits for them all. The membership's release does not wait
// for the drains, so the other members place this member's shards elsewhere
// and follow their claims while they drain; and the drains do not wait for
// the membership's release, so each shard is released as soon as its work
// has stopped. Each elector still releases its shard only once OnAcquired
// has returned.
func (m *Member) shutdown() {
	m.mu.Lock()
	member := m.member
	var runs []*run
	for _, r := range m.runs {
		runs = append(runs, r)
		if !r.stopping {
			r.stopping = true
			go r.stop()
		}
	}
	for _, r := range m.retiring {
		runs = append(runs, r) // stopping already
	}
	m.mu.Unlock()
	if err := member.Stop(context.Background()); err != nil {
		m.log.Warn("shards: leave", "err", err)
	}
	<-member.Done()
	for _, r := range runs {
		<-r.done
	}
}
