package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/check"
	"github.com/tenure-go/tenure/internal/closer"
)

var (
	_ backends.Store   = (*Store)(nil)
	_ backends.Watcher = (*Store)(nil)
	_ backends.Txner   = (*Store)(nil)
)

// ExpiryJudge is what Capabilities reports as the store's expiry judge.
const ExpiryJudge = "local observation: an entry expires once this store has seen its revision and keep-alive beat unchanged for its TTL on this process's monotonic clock; no server or wall clock is read"

// createTries bounds how often a create re-reads a key that changed
// between its read and its write.
const createTries = 16

// Option configures a Store. An option given a value the store cannot
// use makes New, Open, Setup and SetupSQL fail with an error wrapping
// backends.ErrInvalid.
type Option func(*options)

type options struct {
	schema, table string
	clk           clock.Clock
	setup         bool
	batched       bool          // WithBatchedKeepAlive
	batch         time.Duration // 0: each keep-alive is its own statement
	asyncStandbys bool          // WithAsyncStandbys
	readOnly      bool          // WithReadOnly
	pooler        Pooler
	listenSet     bool   // WithListen
	listen        string // the watch's connection string, or "": the pool's
}

// Pooler says what stands between the store and the server.
type Pooler string

const (
	// PoolerNone is a direct connection to the server, or a pooler in
	// session mode (PgBouncer's pool_mode = session), where a client keeps
	// its server connection: the store may keep session state, and its
	// watch listens through the pool's server.
	PoolerNone Pooler = "none"
	// PoolerTransaction is a pooler in transaction mode (PgBouncer's
	// pool_mode = transaction; its statement mode, which refuses
	// transactions of several statements, cannot carry Txn): each
	// transaction may run on another server connection, so nothing the
	// store sends may rely on the session. The store then sends every
	// statement unprepared (pgx's QueryExecModeExec: no statement cache,
	// which PgBouncer before 1.21 cannot carry between server
	// connections), keeps no session state (its advisory locks are
	// transaction-scoped in any mode), and watches only over a direct
	// connection given with WithListen: without one it declares no watch.
	PoolerTransaction Pooler = "transaction"
)

// WithPooler says what stands between the store and the server (default
// PoolerNone). Open configures its pool for it; New refuses a pool that
// caches prepared statements with PoolerTransaction.
func WithPooler(p Pooler) Option {
	return func(o *options) {
		if p == "" {
			p = PoolerNone
		}
		o.pooler = p
	}
}

// WithListen gives the connection string (a libpq URL or key=value
// string) of the one connection a Store's watches LISTEN on, when the
// pool's connections cannot keep a LISTEN: behind a transaction-mode
// pooler, the server itself or a session-mode pool in front of it. The
// pool still carries every other statement, the watch's start markers
// included (a NOTIFY is sent at commit, and needs no session). Without
// WithListen, watches listen on a connection made like the pool's.
func WithListen(connString string) Option {
	return func(o *options) { o.listenSet, o.listen = true, connString }
}

// DefaultBatchWindow is the window WithBatchedKeepAlive(0) uses.
const DefaultBatchWindow = 50 * time.Millisecond

// WithBatchedKeepAlive makes keep-alives share statements: a KeepAlive
// waits up to window (0: DefaultBatchWindow) for others, and one UPDATE
// renews them all. A process holding many claims then renews them with
// at most one statement per window, however many there are: with
// renewals every 500 ms and the default window, about ten statements a
// period for 100 claims instead of 100 (tests/storebench). Each
// renewal is answered up to window later; the holder's deadline counts
// from before it asked, so the wait shortens its lease and never extends
// it: keep window well under the renew period and the TTL's safety
// margin. window must not be negative.
func WithBatchedKeepAlive(window time.Duration) Option {
	return func(o *options) { o.batched, o.batch = true, window }
}

// WithTable names the schema and table the store keeps its entries in
// (default DefaultSchema, DefaultTable). Both must be lower-case SQL
// identifiers of at most 48 bytes; the store adds TABLE$rev (its sequence,
// owned by the table; TABLE_rev for a table made by an earlier version)
// and TABLE_notify (its trigger and trigger function) beside the table.
// Stores on different tables share nothing.
func WithTable(schema, table string) Option {
	return func(o *options) { o.schema, o.table = schema, table }
}

// WithClock sets the clock the store judges expiry on (default: the real
// clock, whose readings are monotonic). It must not be nil.
func WithClock(clk clock.Clock) Option { return func(o *options) { o.clk = clk } }

// WithReadOnly opens the store for a program that only reads it (lists
// holders, watches): New runs no Setup, as with WithoutSetup, neither
// checks nor moves the revision sequence, so a role that may only SELECT
// from the table opens it, and does not check the server's replication, since a store that writes nothing can
// give no claim a second holder: it opens on a primary with asynchronous
// standbys, and on one that waits at every commit for a synchronous
// standby that is not streaming. It still refuses a standby. The store's
// reads and watches work as usual; its writes (CreateIfAbsent,
// CompareAndSet, CompareAndDelete, KeepAlive, a Txn with operations) fail
// with an error wrapping backends.ErrPermission (fatal) and reach no
// server.
func WithReadOnly() Option { return func(o *options) { o.readOnly = true } }

// WithoutSetup makes New skip Setup: the objects must already exist, and
// New fails with an error wrapping backends.ErrMissingResource if they do
// not.
func WithoutSetup() Option { return func(o *options) { o.setup = false } }

// newOptions applies opts over the defaults and checks the result.
func newOptions(opts []Option) (options, error) {
	o := options{schema: DefaultSchema, table: DefaultTable, clk: clock.New(), setup: true, pooler: PoolerNone}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := checkIdent("schema", o.schema); err != nil {
		return o, err
	}
	if err := checkIdent("table", o.table); err != nil {
		return o, err
	}
	switch {
	case o.clk == nil:
		return o, fmt.Errorf("postgres: nil clock: %w", backends.ErrInvalid)
	case o.pooler != PoolerNone && o.pooler != PoolerTransaction:
		return o, fmt.Errorf("postgres: pooler %q: want %q or %q: %w", o.pooler, PoolerNone, PoolerTransaction, backends.ErrInvalid)
	case o.listenSet && o.listen == "":
		return o, fmt.Errorf("postgres: empty listen connection string: %w", backends.ErrInvalid)
	case o.batched && o.batch < 0:
		return o, fmt.Errorf("postgres: negative batch window %v: %w", o.batch, backends.ErrInvalid)
	case o.batched && o.batch == 0:
		o.batch = DefaultBatchWindow
	}
	return o, nil
}

// Store is a backends.Store over one PostgreSQL table. It is safe for
// concurrent use. Close it when done; it closes the pool only if it opened
// it (Open).
type Store struct {
	pool     *pgxpool.Pool
	ownsPool bool
	n        names
	clk      clock.Clock

	// sq are the statements, built once from the table's names.
	sq statements

	batch time.Duration // 0: no batching

	readOnly bool // WithReadOnly: writes are refused

	// pooler is what stands between the store and the server; listenCfg
	// is the watch's connection, nil if it cannot have one (behind a
	// transaction-mode pooler without WithListen).
	pooler    Pooler
	listenCfg *pgx.ConnConfig

	// high is the highest revision this store has seen in a row or
	// written: every revision the sequence hands out later must be above
	// it, which each write statement checks.
	high atomic.Int64

	mu      sync.Mutex
	seen    map[string]seen // guarded by mu: what this store last observed of each key
	gen     int64           // guarded by mu: counts the sightings recorded
	closing closer.Once     // marked under mu
	pending []*kaReq        // guarded by mu: keep-alives waiting for the next batch
	armed   bool            // guarded by mu: a batch is scheduled
	bg      sync.WaitGroup  // the batch goroutines and the synchronous standby checks

	// What the last check for a missing synchronous standby found (see
	// withSyncHint).
	hint        string    // guarded by mu: "" if none is missing
	hintAt      time.Time // guarded by mu: when the last check ended
	hintRunning bool      // guarded by mu: a check is under way

	// hub feeds every watch from one listening connection; nonce tells
	// this store's watch markers from other stores'.
	hub   hub
	nonce string

	// stop ends every watch at Close; watches joins their goroutines.
	stop    context.CancelFunc
	stopCtx context.Context
	watches sync.WaitGroup
}

// seen is one observation of a key: its revision and keep-alive beat, and
// when this store first saw that pair.
type seen struct {
	rev, beat int64
	ttl       time.Duration
	at        time.Time
	gen       int64 // the store's generation when it was recorded
}

// row is a table row.
type row struct {
	key       string
	value     []byte
	rev       int64
	createRev int64
	ttlMS     int64
	beat      int64
	// recorded is the server's time of the row's last write or
	// keep-alive by a store that records it; not Valid where none did.
	recorded pgtype.Timestamptz
}

// cols are the columns every table has; a statement returns them, and
// the recorded column after them (see newStatements).
const cols = `key, value, rev, create_rev, ttl_ms, beat`

type statements struct {
	// sel is what a statement reads of a row, for scanRow.
	sel string

	get, list, insert, number, takeover, cas, keepAlive, keepAliveMany, del string

	// Txn's, in the order it sends them (see Txn).
	txnLock, txnPlace, txnRead, txnPut, txnDelete, txnClean string
}

// newStatements builds the statements over n. Every statement that writes
// a row or bumps its beat sets recorded to the server's clock_timestamp()
// (the time of the call, where now() would be the start of the
// transaction), if the table has the column; over a table without it,
// statements read NULL in its place. The column is shown to people and
// never judged.
func newStatements(n names) statements {
	sel, ret, stamp := cols+`, NULL::timestamptz`, prefixed("t")+`, NULL::timestamptz`, ``
	if n.recorded {
		sel, ret, stamp = cols+`, recorded`, prefixed("t")+`, t.recorded`, `, recorded = clock_timestamp()`
	}
	return statements{
		sel:  sel,
		get:  `SELECT ` + sel + ` FROM ` + n.tbl + ` WHERE key = $1`,
		list: `SELECT ` + sel + ` FROM ` + n.tbl + ` WHERE starts_with(key, $1) ORDER BY key`,
		// A create is two statements sent together in one implicit
		// transaction: a placeholder row (rev 0), then its revision. The
		// revision is drawn only once the row is in and holds the key, so
		// it is above that of every write the key had before. Drawn in the
		// INSERT itself, it would be drawn before the insert waits on a row
		// being written or deleted, and a write of a higher revision could
		// commit (and the row go) meanwhile: the create would then go in
		// with a lower revision than an earlier write, its token too.
		insert: `INSERT INTO ` + n.tbl + ` (` + cols + `) VALUES ($1, $2, 0, 0, $3, 0) ON CONFLICT (key) DO NOTHING`,
		number: `WITH r AS (SELECT nextval('` + n.seq + `') AS rev)
			UPDATE ` + n.tbl + ` t SET rev = ` + drawn("$2") + `, create_rev = r.rev` + stamp + ` FROM r WHERE t.key = $1 AND t.rev = 0 RETURNING ` + ret,
		// A takeover names the revision and beat this store saw unchanged
		// for the TTL: a keep-alive in between makes it match nothing.
		takeover: `WITH r AS (SELECT nextval('` + n.seq + `') AS rev)
			UPDATE ` + n.tbl + ` t SET value = $2, rev = ` + drawn("$6") + `, create_rev = r.rev, ttl_ms = $3, beat = t.beat + 1` + stamp + `
			FROM r WHERE t.key = $1 AND t.rev = $4 AND t.beat = $5 RETURNING ` + ret,
		cas: `WITH r AS (SELECT nextval('` + n.seq + `') AS rev)
			UPDATE ` + n.tbl + ` t SET value = $2, rev = ` + drawn("$6") + `, ttl_ms = $3, beat = t.beat + 1` + stamp + `
			FROM r WHERE t.key = $1 AND t.rev = $4 AND t.beat = $5 RETURNING ` + ret,
		keepAlive: `UPDATE ` + n.tbl + ` SET ttl_ms = $3, beat = beat + 1` + stamp + ` WHERE key = $1 AND rev = $2 RETURNING ` + sel,
		// The rows are locked in key order, as Txn locks them, so a batch
		// and a transaction over the same keys never deadlock.
		keepAliveMany: `WITH v AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[]) AS v(key, rev, ttl)),
			l AS (SELECT t.key, v.rev, v.ttl FROM ` + n.tbl + ` t JOIN v ON t.key = v.key AND t.rev = v.rev ORDER BY t.key FOR UPDATE OF t)
			UPDATE ` + n.tbl + ` t SET ttl_ms = l.ttl, beat = t.beat + 1` + stamp + ` FROM l WHERE t.key = l.key AND t.rev = l.rev RETURNING ` + ret,
		del: `DELETE FROM ` + n.tbl + ` WHERE key = $1 AND rev = $2 RETURNING ` + sel,

		txnLock:  `SELECT pg_advisory_xact_lock(hashtextextended(k, $2)) FROM unnest($1::text[]) WITH ORDINALITY AS u(k, i) ORDER BY i`,
		txnPlace: `INSERT INTO ` + n.tbl + ` (` + cols + `) SELECT k, '', 0, 0, 0, 0 FROM unnest($1::text[]) WITH ORDINALITY AS u(k, i) ORDER BY i ON CONFLICT (key) DO NOTHING`,
		txnRead:  `SELECT ` + sel + ` FROM ` + n.tbl + ` WHERE key = ANY($1) ORDER BY key FOR UPDATE`,
		// A put keeps the token of an entry that is live, and is a create
		// (a new token) over a placeholder or an expired entry.
		txnPut: `WITH r AS (SELECT nextval('` + n.seq + `') AS rev)
			UPDATE ` + n.tbl + ` t SET value = $2, rev = ` + drawn("$5") + `,
				create_rev = CASE WHEN $4 THEN t.create_rev ELSE r.rev END,
				ttl_ms = $3, beat = t.beat + 1` + stamp + `
			FROM r WHERE t.key = $1 RETURNING ` + ret,
		txnDelete: `DELETE FROM ` + n.tbl + ` WHERE key = $1`,
		txnClean:  `DELETE FROM ` + n.tbl + ` WHERE key = ANY($1) AND rev = 0`,
	}
}

// behindMark starts the message of the error a write statement raises
// when the sequence hands out a revision not above the row's or the
// floor the store passes: the sequence went back (reset, recreated, or
// restored behind the table), and writing would let a token go back.
const behindMark = "tenure: sequence behind: revision "

// drawn is the revision a write statement sets: r.rev, the value it drew,
// if that is above the row's revision and above floor (a parameter: the
// highest revision the store has seen); otherwise the statement fails,
// with nothing written, by casting a message to bigint (SQL has no raise
// outside PL/pgSQL, and this needs no function of our own). The message
// depends on the row, so the cast is never folded at planning.
func drawn(floor string) string {
	return `CASE WHEN r.rev > greatest(t.rev, t.create_rev, ` + floor + `::bigint) THEN r.rev
		ELSE ('` + behindMark + `' || r.rev || ' not above ' || greatest(t.rev, t.create_rev, ` + floor + `::bigint))::bigint END`
}

func prefixed(t string) string {
	parts := strings.Split(cols, ", ")
	for i, p := range parts {
		parts[i] = t + "." + p
	}
	return strings.Join(parts, ", ")
}

// Open connects to the database named by connString (a libpq URL or
// key=value string, as pgxpool.ParseConfig reads it) and returns a Store
// that owns the pool. Its connections go only to a server that accepts
// writes: unless connString sets target_session_attrs (read-write or
// primary), Open checks each new connection as read-write does, so that
// of several hosts the primary is used. A connection on which the server
// refused a write as read-only (SQLSTATE 25006: a standby, or a primary
// fenced after a failover) is closed, not reused: the next one goes to
// the server that is the primary by then, without reopening the store.
func Open(ctx context.Context, connString string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("postgres: connection string: %w", backends.ErrInvalid) // pgx's error may quote the password
	}
	if cfg.ConnConfig.ValidateConnect == nil {
		cfg.ConnConfig.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	}
	d := &discarder{}
	if cfg.ConnConfig.Tracer == nil {
		cfg.ConnConfig.Tracer = d
	}
	cfg.AfterRelease = keep
	c, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	if c.pooler == PoolerTransaction {
		// A named prepared statement lives on one server connection; the
		// next transaction may run on another.
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, mapError("open", "", err)
	}
	s, err := newStore(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownsPool = true
	relisten := s.relisten
	d.onReadOnly.Store(&relisten)
	return s, nil
}

// New returns a Store over pool, which the caller keeps and closes after
// the Store. Unless WithoutSetup is given it runs Setup first. ctx bounds
// only opening (Setup and the checks of the objects and the server); 30 s
// do if it has no deadline.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("postgres: nil pool: %w", backends.ErrInvalid)
	}
	return newStore(ctx, pool, opts)
}

func newStore(ctx context.Context, pool *pgxpool.Pool, opts []Option) (*Store, error) {
	c, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	var listen *pgx.ConnConfig
	switch {
	case c.listen != "":
		if listen, err = pgx.ParseConfig(c.listen); err != nil {
			return nil, fmt.Errorf("postgres: listen connection string: %w", backends.ErrInvalid) // pgx's error may quote the password
		}
		if listen.ValidateConnect == nil {
			// As the pool's: a standby cannot LISTEN, nor hear the primary's notices.
			listen.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
		}
	case c.pooler == PoolerNone:
		listen = pool.Config().ConnConfig.Copy()
	}
	if c.pooler == PoolerTransaction {
		switch m := pool.Config().ConnConfig.DefaultQueryExecMode; m {
		case pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol:
		default:
			return nil, fmt.Errorf("postgres: a pool behind a transaction-mode pooler must not prepare statements, and this one's DefaultQueryExecMode is %v: set it to QueryExecModeExec (default_query_exec_mode=exec): %w", m, backends.ErrInvalid)
		}
	}
	n := newNames(c.schema, c.table)
	pctx, cancel := openCtx(ctx)
	defer cancel()
	if err := checkReplication(pctx, pool, c.clk, c.asyncStandbys, c.readOnly); err != nil {
		return nil, err
	}
	mode := setupNone
	switch {
	case c.readOnly:
		mode = setupRead
	case c.setup:
		mode = setupOpen
	}
	if n, err = prepare(pctx, pool, n, mode); err != nil {
		return nil, err
	}
	stopCtx, stop := context.WithCancel(context.Background())
	return &Store{pool: pool, n: n, clk: c.clk, batch: c.batch, readOnly: c.readOnly, pooler: c.pooler, listenCfg: listen, sq: newStatements(n), seen: make(map[string]seen), nonce: rand.Text(), stopCtx: stopCtx, stop: stop}, nil
}

// Table returns the schema and table the store keeps its entries in.
func (s *Store) Table() (schema, table string) { return s.n.schema, s.n.table }

// Pooler returns what the store was told stands between it and the
// server.
func (s *Store) Pooler() Pooler { return s.pooler }

// Capabilities reports every operation as enforced, among processes on
// any hosts, with expiry judged by local observation and no expiry events.
// Behind a transaction-mode pooler without WithListen, it declares no
// watch: followers then time their attempts to the observed expiry.
func (s *Store) Capabilities() backends.Capabilities {
	atomic := backends.CapCreateIfAbsent | backends.CapCompareAndSet | backends.CapCompareAndDelete | backends.CapKeepAlive | backends.CapTxn
	if s.listenCfg != nil {
		atomic |= backends.CapWatch
	}
	return backends.Capabilities{
		Atomic:         atomic,
		Scope:          backends.ScopeDistributed,
		ExpiryJudge:    ExpiryJudge,
		ObservedExpiry: true,
		TTLGranularity: time.Millisecond,
	}
}

// writable is isClosed for a write, which a store opened WithReadOnly
// refuses.
func (s *Store) writable(op, key string) error {
	if err := s.isClosed(op, key); err != nil {
		return err
	}
	if s.readOnly {
		return fmt.Errorf("postgres: %s %q: store opened read-only: %w", op, key, backends.ErrPermission)
	}
	return nil
}

func (s *Store) isClosed(op, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Closed() {
		return fmt.Errorf("postgres: %s %q: %w", op, key, backends.ErrClosed)
	}
	return nil
}

// Close ends every watch and, if the store opened its pool, closes it. It
// does not delete entries.
func (s *Store) Close() error {
	return s.closing.Close(&s.mu, func() error {
		s.stop()
		s.watches.Wait()
		s.bg.Wait()
		if s.ownsPool {
			s.pool.Close()
		}
		return nil
	})
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// ttlMS rounds a TTL up to whole milliseconds.
func ttlMS(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

func scanRow(r pgx.Row) (row, error) {
	var x row
	err := r.Scan(&x.key, &x.value, &x.rev, &x.createRev, &x.ttlMS, &x.beat, &x.recorded)
	return x, err
}

// entry is x as an Entry, without Remaining: the caller judges that.
func (x row) entry() backends.Entry {
	e := backends.Entry{Key: x.key, Value: x.value, Revision: x.rev, CreateRevision: x.createRev, TTL: msDuration(x.ttlMS)}
	// A time an operator set to infinity, or one no store wrote, is none.
	if x.recorded.Valid && x.recorded.InfinityModifier == pgtype.Finite {
		e.Recorded = x.recorded.Time
	}
	return e
}

// judge decides whether x, the answer to a write of this store, is live
// for this store, recording what it saw. now must be read after the answer
// that carried x arrived: an observation is dated no earlier than the write
// it shows, so a takeover comes no sooner than a TTL after the holder's
// last keep-alive. A write's own answer is the newest state of its row, so
// it replaces the sighting even where it is older than one (the server
// lost history: see observe).
func (s *Store) judge(x row, now time.Time) (backends.Entry, bool) {
	e, live, _ := s.sight(x, now, -1)
	return e, live
}

// generation is taken before a read is sent, for observe.
func (s *Store) generation() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// observe is judge for a row this store read, in a request sent at
// generation sent: a row whose revision, or whose beat at the same
// revision, is below what this store had seen of the key before it sent
// the request shows that the server lost writes it had acknowledged (a
// failover to a standby that had not received them, a restore). observe
// then judges nothing on it: it answers ErrUnavailable, and every sighting
// of this store starts again at now, so that no expiry is judged on time
// counted before the loss. (A sighting recorded while the request was in
// flight may be newer than its answer without any loss.)
func (s *Store) observe(op string, x row, now time.Time, sent int64) (backends.Entry, bool, error) {
	e, live, back := s.sight(x, now, sent)
	if back {
		return backends.Entry{}, false, fmt.Errorf("postgres: %s %q: the server answered revision %d beat %d, older than this store saw: it lost acknowledged writes (a failover to a standby that was not synchronous?): %w", op, x.key, x.rev, x.beat, backends.ErrUnavailable)
	}
	return e, live, nil
}

// sight records x and judges it; back reports a row older than a
// sighting recorded at generation sent or before (sent < 0: no check).
func (s *Store) sight(x row, now time.Time, sent int64) (e backends.Entry, live, back bool) {
	s.saw(max(x.rev, x.createRev))
	e = x.entry()
	if e.Value == nil {
		e.Value = []byte{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.seen[x.key]
	if sent >= 0 && ok && o.gen <= sent && (x.rev < o.rev || (x.rev == o.rev && x.beat < o.beat)) {
		for k, v := range s.seen {
			v.at = now
			s.seen[k] = v
		}
		back = true
	}
	if x.ttlMS == 0 {
		// Kept as a sighting without expiry, so that a row going back
		// is seen for entries without a TTL too.
		s.gen++
		s.seen[x.key] = seen{rev: x.rev, beat: x.beat, at: now, gen: s.gen}
		return e, true, back
	}
	if back || !ok || o.rev != x.rev || o.beat != x.beat {
		s.gen++
		s.seen[x.key] = seen{rev: x.rev, beat: x.beat, ttl: e.TTL, at: now, gen: s.gen}
		e.Remaining = e.TTL
		return e, true, back
	}
	elapsed := now.Sub(o.at)
	if elapsed >= e.TTL {
		return e, false, false
	}
	e.Remaining = e.TTL - elapsed
	return e, true, false
}

// saw raises the highest revision the store has seen to rev.
func (s *Store) saw(rev int64) {
	for {
		h := s.high.Load()
		if rev <= h || s.high.CompareAndSwap(h, rev) {
			return
		}
	}
}

// writeError maps err, returned by a write of key. A write the server
// refused because the sequence handed out a revision not above the key's
// or above one this store saw wrote nothing; the store then moves the
// sequence forward, as it does when it opens, and the error is transient
// if it could (the caller tries again) and fatal (ErrSchema, or
// ErrPermission if the role may not move it) if not.
func (s *Store) writeError(ctx context.Context, op, key string, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "22P02" || !strings.Contains(pe.Message, behindMark) {
		return mapError(op, key, err)
	}
	detail := pe.Message[strings.Index(pe.Message, behindMark)+len(behindMark):]
	detail = strings.TrimRight(detail, `"`)
	if ferr := forward(ctx, s.pool, s.n, s.high.Load()); ferr != nil {
		return fmt.Errorf("postgres: %s %q: sequence %s handed out revision %s; nothing was written: %w", op, key, s.n.seq, detail, ferr)
	}
	return fmt.Errorf("postgres: %s %q: sequence %s handed out revision %s, and was moved forward; nothing was written, try again: %w", op, key, s.n.seq, detail, backends.ErrUnavailable)
}

// forget drops what the store saw of key, once it is gone.
func (s *Store) forget(key string) {
	s.mu.Lock()
	delete(s.seen, key)
	s.mu.Unlock()
}

// read fetches key and judges it. found is false if there is no row;
// live is false if the row is expired for this store.
func (s *Store) read(ctx context.Context, op, key string) (x row, e backends.Entry, found, live bool, err error) {
	sent := s.generation()
	x, err = scanRow(s.pool.QueryRow(ctx, s.sq.get, key))
	if errors.Is(err, pgx.ErrNoRows) {
		s.forget(key)
		return x, e, false, false, nil
	}
	if err != nil {
		return x, e, false, false, mapError(op, key, err)
	}
	e, live, err = s.observe(op, x, s.clk.Now(), sent)
	if err != nil {
		return x, e, false, false, err
	}
	return x, e, true, live, nil
}

// Get returns the live entry for key.
func (s *Store) Get(ctx context.Context, key string) (backends.Entry, error) {
	if err := backends.ValidateKey(key); err != nil {
		return backends.Entry{}, fmt.Errorf("postgres: get: %w", err)
	}
	if err := s.isClosed("get", key); err != nil {
		return backends.Entry{}, err
	}
	_, e, _, live, err := s.read(ctx, "get", key)
	if err != nil {
		return backends.Entry{}, err
	}
	if !live {
		return backends.Entry{}, fmt.Errorf("postgres: get %q: %w", key, backends.ErrNotFound)
	}
	return e, nil
}

// List returns the live entries whose keys start with prefix, in byte
// order of their keys.
func (s *Store) List(ctx context.Context, prefix string) ([]backends.Entry, error) {
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("postgres: list: %w", err)
	}
	if err := s.isClosed("list", prefix); err != nil {
		return nil, err
	}
	sent := s.generation()
	rows, err := s.pool.Query(ctx, s.sq.list, prefix)
	if err != nil {
		return nil, mapError("list", prefix, err)
	}
	var xs []row
	for rows.Next() {
		x, err := scanRow(rows)
		if err != nil {
			rows.Close()
			return nil, mapError("list", prefix, err)
		}
		xs = append(xs, x)
	}
	if err := rows.Err(); err != nil {
		return nil, mapError("list", prefix, err)
	}
	now := s.clk.Now()
	out := []backends.Entry{}
	present := make(map[string]bool, len(xs))
	var back error
	for _, x := range xs {
		present[x.key] = true
		e, live, err := s.observe("list", x, now, sent)
		if err != nil && back == nil {
			back = err
		}
		if live {
			out = append(out, e)
		}
	}
	s.mu.Lock()
	for k := range s.seen {
		if strings.HasPrefix(k, prefix) && !present[k] {
			delete(s.seen, k)
		}
	}
	s.mu.Unlock()
	if back != nil {
		return nil, back
	}
	return out, nil
}

// CreateIfAbsent writes key if it is absent, or expired for this store.
func (s *Store) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (_ backends.Entry, err error) {
	defer func() { err = s.withSyncHint(err) }()
	if err := check.Write(key, 0, value, ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("postgres: create: %w", err)
	}
	return s.create(ctx, "create", key, value, ttl)
}

func (s *Store) create(ctx context.Context, op, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	if err := s.writable(op, key); err != nil {
		return backends.Entry{}, err
	}
	if value == nil {
		value = []byte{}
	}
	for range createTries {
		x, err := s.insert(ctx, key, value, ttl)
		if err == nil {
			e, _ := s.judge(x, s.clk.Now())
			return e, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return backends.Entry{}, s.writeError(ctx, op, key, err)
		}
		old, cur, found, live, err := s.read(ctx, op, key)
		if err != nil {
			return backends.Entry{}, err
		}
		if !found {
			continue // deleted since the insert: try again
		}
		if live {
			return backends.Entry{}, fmt.Errorf("postgres: %w", &backends.ConflictError{Op: op, Key: key, Current: cur, Found: true})
		}
		x, err = scanRow(s.pool.QueryRow(ctx, s.sq.takeover, key, value, ttlMS(ttl), old.rev, old.beat, s.high.Load()))
		if err == nil {
			e, _ := s.judge(x, s.clk.Now())
			return e, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return backends.Entry{}, s.writeError(ctx, op, key, err)
		}
		// Kept alive, written or deleted since it was read: read again.
	}
	return backends.Entry{}, fmt.Errorf("postgres: %s %q: the key kept changing under %d attempts: %w", op, key, createTries, backends.ErrUnavailable)
}

// insert creates key if no row holds it, in one round trip; pgx.ErrNoRows
// if one does.
func (s *Store) insert(ctx context.Context, key string, value []byte, ttl time.Duration) (row, error) {
	b := &pgx.Batch{}
	b.Queue(s.sq.insert, key, value, ttlMS(ttl))
	b.Queue(s.sq.number, key, s.high.Load())
	br := s.pool.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return row{}, err
	}
	x, err := scanRow(br.QueryRow())
	if cerr := br.Close(); err == nil && cerr != nil {
		return row{}, cerr
	}
	return x, err
}

// CompareAndSet writes key if its live revision is rev; rev 0 creates.
func (s *Store) CompareAndSet(ctx context.Context, key string, rev int64, value []byte, ttl time.Duration) (_ backends.Entry, err error) {
	defer func() { err = s.withSyncHint(err) }()
	if err := check.Write(key, rev, value, ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("postgres: cas: %w", err)
	}
	if rev == 0 {
		return s.create(ctx, "cas", key, value, ttl)
	}
	if err := s.writable("cas", key); err != nil {
		return backends.Entry{}, err
	}
	if value == nil {
		value = []byte{}
	}
	for range createTries {
		old, cur, found, live, err := s.read(ctx, "cas", key)
		if err != nil {
			return backends.Entry{}, err
		}
		if !found || !live {
			return backends.Entry{}, fmt.Errorf("postgres: %w", &backends.ConflictError{Op: "cas", Key: key, Expected: rev})
		}
		if old.rev != rev {
			return backends.Entry{}, fmt.Errorf("postgres: %w", &backends.ConflictError{Op: "cas", Key: key, Expected: rev, Current: cur, Found: true})
		}
		x, err := scanRow(s.pool.QueryRow(ctx, s.sq.cas, key, value, ttlMS(ttl), old.rev, old.beat, s.high.Load()))
		if err == nil {
			e, _ := s.judge(x, s.clk.Now())
			return e, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return backends.Entry{}, s.writeError(ctx, "cas", key, err)
		}
	}
	return backends.Entry{}, fmt.Errorf("postgres: cas %q: the key kept changing under %d attempts: %w", key, createTries, backends.ErrUnavailable)
}

// CompareAndDelete deletes key if its live revision is rev.
func (s *Store) CompareAndDelete(ctx context.Context, key string, rev int64) (err error) {
	defer func() { err = s.withSyncHint(err) }()
	if err := backends.ValidateKey(key); err != nil {
		return fmt.Errorf("postgres: delete: %w", err)
	}
	if err := check.Revision(rev, true); err != nil {
		return fmt.Errorf("postgres: delete %q: %w", key, err)
	}
	if err := s.writable("delete", key); err != nil {
		return err
	}
	x, err := scanRow(s.pool.QueryRow(ctx, s.sq.del, key, rev))
	if err == nil {
		// Deleted. If this store had already judged the entry expired, it
		// was absent for it: say so, as for any absent key. Removing the
		// row harms nobody: any store could have taken it over.
		_, live := s.judge(x, s.clk.Now())
		s.forget(key)
		if !live {
			return fmt.Errorf("postgres: %w", &backends.ConflictError{Op: "delete", Key: key, Expected: rev})
		}
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return mapError("delete", key, err)
	}
	_, cur, found, live, err := s.read(ctx, "delete", key)
	if err != nil {
		return err
	}
	if !found || !live {
		return fmt.Errorf("postgres: %w", &backends.ConflictError{Op: "delete", Key: key, Expected: rev})
	}
	return fmt.Errorf("postgres: %w", &backends.ConflictError{Op: "delete", Key: key, Expected: rev, Current: cur, Found: true})
}

// KeepAlive sets key's TTL to ttl from now if its live revision is rev. It
// bumps the row's beat, which every other store watches for, and leaves
// the revision and value as they were. One statement, unless this store
// had already judged the entry expired.
func (s *Store) KeepAlive(ctx context.Context, key string, rev int64, ttl time.Duration) (_ backends.Entry, err error) {
	defer func() { err = s.withSyncHint(err) }()
	if err := backends.ValidateKey(key); err != nil {
		return backends.Entry{}, fmt.Errorf("postgres: keepalive: %w", err)
	}
	if err := check.Revision(rev, true); err != nil {
		return backends.Entry{}, fmt.Errorf("postgres: keepalive %q: %w", key, err)
	}
	if err := check.KeepAliveTTL(ttl); err != nil {
		return backends.Entry{}, fmt.Errorf("postgres: keepalive %q: %w", key, err)
	}
	if err := s.writable("keepalive", key); err != nil {
		return backends.Entry{}, err
	}
	if s.expiredHere(key, rev) {
		// Expired as far as this store knows; unless someone kept it alive
		// since, it is absent.
		old, _, found, live, err := s.read(ctx, "keepalive", key)
		if err != nil {
			return backends.Entry{}, err
		}
		if !found || !live || old.rev != rev {
			return backends.Entry{}, s.keepAliveConflict(ctx, key, rev)
		}
	}
	if s.batch > 0 {
		return s.keepAliveBatched(ctx, key, rev, ttl)
	}
	x, err := scanRow(s.pool.QueryRow(ctx, s.sq.keepAlive, key, rev, ttlMS(ttl)))
	if err == nil {
		e, _ := s.judge(x, s.clk.Now())
		return e, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return backends.Entry{}, mapError("keepalive", key, err)
	}
	return backends.Entry{}, s.keepAliveConflict(ctx, key, rev)
}

func (s *Store) keepAliveConflict(ctx context.Context, key string, rev int64) error {
	_, cur, found, live, err := s.read(ctx, "keepalive", key)
	if err != nil {
		return err
	}
	if !found || !live {
		return fmt.Errorf("postgres: %w", &backends.ConflictError{Op: "keepalive", Key: key, Expected: rev})
	}
	return fmt.Errorf("postgres: %w", &backends.ConflictError{Op: "keepalive", Key: key, Expected: rev, Current: cur, Found: true})
}

// expiredHere reports whether the last observation of key at rev is a TTL
// old or more.
func (s *Store) expiredHere(key string, rev int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.seen[key]
	if !ok || o.rev != rev {
		return false
	}
	return o.ttl > 0 && s.clk.Now().Sub(o.at) >= o.ttl
}
