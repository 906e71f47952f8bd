package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tenure-go/tenure/backends"
)

// DefaultSchema and DefaultTable name where a store keeps its entries
// unless WithTable says otherwise.
const (
	DefaultSchema = "public"
	DefaultTable  = "tenure_entries"
)

// identRE is what a schema or table name may be: a lower-case SQL
// identifier short enough that the names derived from a table (its
// sequence and trigger function, 63 bytes at most) fit.
var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

func checkIdent(what, name string) error {
	if !identRE.MatchString(name) {
		return fmt.Errorf("postgres: %s name %q: want lower-case letters, digits and _, starting with a letter or _, at most 48 bytes: %w", what, name, backends.ErrInvalid)
	}
	return nil
}

// names are the quoted SQL names of one store's objects.
type names struct {
	schema, table string // unquoted, validated
	tbl           string // "schema"."table"
	// seq is the sequence the store draws revisions from: the one the
	// table's rev column owns, found when the store opens (newSeq until
	// then).
	seq string
	// seqSchema and seqName are seq's parts, unquoted.
	seqSchema, seqName string
	// newSeq is the name Setup gives a sequence it creates, table$rev: no
	// table a store accepts has a $ in its name, so it names no other
	// store's table or sequence. legacySeq, table_rev, is the name earlier
	// versions gave it, which a table called table_rev could hold.
	newSeq, legacySeq string
	fn                string // "schema"."table_notify"
	trigger           string // "table_notify"
	channel           string // the NOTIFY channel, at most 63 bytes
	lockSeed          int64  // seeds the hash of a key's advisory lock, so tables do not share locks
	// recorded reports that the table has the recorded column (see
	// recordedCol), found when the store opens: a table made by an
	// earlier version may lack it.
	recorded bool
}

func newNames(schema, table string) names {
	h := fnv.New64a()
	h.Write([]byte(schema + "." + table))
	n := names{
		schema:    schema,
		table:     table,
		tbl:       pgx.Identifier{schema, table}.Sanitize(),
		newSeq:    pgx.Identifier{schema, table + "$rev"}.Sanitize(),
		legacySeq: pgx.Identifier{schema, table + "_rev"}.Sanitize(),
		fn:        pgx.Identifier{schema, table + "_notify"}.Sanitize(),
		trigger:   pgx.Identifier{table + "_notify"}.Sanitize(),
		channel:   fmt.Sprintf("tenure_%016x", h.Sum64()),
		lockSeed:  int64(h.Sum64()),
	}
	n.useSeq(schema, table+"$rev")
	return n
}

// useSeq makes schema.name the sequence n's statements draw from.
func (n *names) useSeq(schema, name string) {
	n.seq = pgx.Identifier{schema, name}.Sanitize()
	n.seqSchema, n.seqName = schema, name
}

func (n names) where() string { return n.schema + "." + n.table }

// notifyLimit is the largest NOTIFY payload the trigger sends with the
// value in it (the server's limit is 8000 bytes); a larger one is sent
// without the value, and the watch reads it.
const notifyLimit = 7800

// ddl creates a store's objects; every statement is idempotent.
func (n names) ddl() []string {
	return []string{
		`CREATE SCHEMA IF NOT EXISTS ` + pgx.Identifier{n.schema}.Sanitize(),
		// rev 0 marks a placeholder row a transaction inserts to lock an
		// absent key; it is never committed.
		`CREATE TABLE IF NOT EXISTS ` + n.tbl + ` (
			key        text COLLATE "C" PRIMARY KEY,
			value      bytea  NOT NULL,
			rev        bigint NOT NULL,
			create_rev bigint NOT NULL,
			ttl_ms     bigint NOT NULL,
			beat       bigint NOT NULL,
			recorded   timestamptz
		)`,
		// A table made by an earlier version lacks recorded. Added
		// without a default, the column costs no rewrite of the table;
		// the rows already there keep NULL until their next write.
		`ALTER TABLE ` + n.tbl + ` ADD COLUMN IF NOT EXISTS recorded timestamptz`,
		// The table owns its sequence, so that pg_dump -t carries it and no
		// migration drops one without the other. A table made by an
		// earlier version keeps the sequence it has, which is adopted; any
		// other table gets one of its own. A sequence is made with cache 1
		// (a cache lets sessions hand out values out of order), a positive
		// increment and no cycle.
		`DO $$
		DECLARE legacy regclass := to_regclass('` + n.legacySeq + `');
		BEGIN
			IF EXISTS (SELECT 1 FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
				WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
				AND d.refobjid = '` + n.tbl + `'::regclass AND d.deptype IN ('a', 'i')
				AND d.refobjsubid = (SELECT attnum FROM pg_attribute WHERE attrelid = '` + n.tbl + `'::regclass AND attname = 'rev')) THEN
				RETURN;
			END IF;
			IF legacy IS NOT NULL AND (SELECT relkind FROM pg_class WHERE oid = legacy) = 'S'
				AND NOT EXISTS (SELECT 1 FROM pg_depend WHERE classid = 'pg_class'::regclass AND objid = legacy AND deptype IN ('a', 'i')) THEN
				ALTER SEQUENCE ` + n.legacySeq + ` OWNED BY ` + n.tbl + `.rev;
			ELSE
				CREATE SEQUENCE ` + n.newSeq + ` AS bigint INCREMENT BY 1 MINVALUE 1 NO CYCLE CACHE 1 OWNED BY ` + n.tbl + `.rev;
			END IF;
		END $$`,
		`CREATE OR REPLACE FUNCTION ` + n.fn + `() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE p text;
		BEGIN
			IF TG_OP = 'DELETE' THEN
				IF OLD.rev = 0 THEN RETURN NULL; END IF;
				p := json_build_object('k', OLD.key, 'r', OLD.rev, 'c', OLD.create_rev, 'd', true)::text;
			ELSE
				IF NEW.rev = 0 OR (TG_OP = 'UPDATE' AND OLD.rev = NEW.rev) THEN RETURN NULL; END IF;
				p := json_build_object('k', NEW.key, 'r', NEW.rev, 'c', NEW.create_rev, 't', NEW.ttl_ms, 'v', encode(NEW.value, 'base64'))::text;
				IF octet_length(p) > ` + fmt.Sprint(notifyLimit) + ` THEN
					p := json_build_object('k', NEW.key, 'r', NEW.rev, 'c', NEW.create_rev, 't', NEW.ttl_ms, 'big', true)::text;
				END IF;
			END IF;
			PERFORM pg_notify('` + n.channel + `', p);
			RETURN NULL;
		END $$`,
		`CREATE OR REPLACE TRIGGER ` + n.trigger + ` AFTER INSERT OR UPDATE OR DELETE ON ` + n.tbl +
			` FOR EACH ROW EXECUTE FUNCTION ` + n.fn + `()`,
	}
}

// Setup creates the schema, table, sequence and trigger a store with opts
// keeps its entries in, if they are missing, and moves the sequence past
// the highest revision in the table. It is idempotent and safe to run
// from many processes at once. New runs it unless WithoutSetup is given;
// run it yourself (or the statements it runs, which SetupSQL returns)
// where the store's role may not create objects. A table made by an
// earlier version keeps its sequence (TABLE_rev), which Setup makes the
// table own, and gets the recorded column. Altering a table in use waits
// for its writers, and holds up the writers behind it, for at most 5 s;
// Setup then fails as unavailable.
func Setup(ctx context.Context, pool *pgxpool.Pool, opts ...Option) error {
	o, err := newOptions(opts)
	if err != nil {
		return err
	}
	ctx, cancel := openCtx(ctx)
	defer cancel()
	_, err = prepare(ctx, pool, newNames(o.schema, o.table), setupAll)
	return err
}

// SetupSQL returns the statements Setup runs, for a migration tool. They
// do not move the sequence forward: a store does that when it opens, or
// refuses to open if its role may not.
func SetupSQL(opts ...Option) (string, error) {
	o, err := newOptions(opts)
	if err != nil {
		return "", err
	}
	return strings.Join(newNames(o.schema, o.table).ddl(), ";\n") + ";\n", nil
}

// ErrSchema is wrapped by the error a store returns when an object it uses
// is not what it needs: the table, its columns or its unique key, the
// sequence (its kind, cache, increment or cycle) or the trigger, or a
// sequence behind the highest revision in the table that the store may not
// move forward. The error names the object and what is wrong with it. It
// wraps backends.ErrCorrupt: it is fatal, and nothing was written.
var ErrSchema = fmt.Errorf("objects not as the store needs them: %w", backends.ErrCorrupt)

// wantCols are the table's columns and their types (and the key's
// collation, on which List's order rests).
var wantCols = []string{"key text C", "value bytea ", "rev bigint ", "create_rev bigint ", "ttl_ms bigint ", "beat bigint "}

// recordedCol is the column that keeps the server's time of a row's last
// write or keep-alive, for display only (Entry.Recorded), and its type. It
// is optional: a table made by an earlier version lacks it, and a store
// over such a table records no time. If it is there, it must have this
// type.
const recordedCol = "recorded timestamp with time zone "

// objects is what the catalog says of a store's objects.
type objects struct {
	tableKind  *string  // relkind of the table; nil: missing
	cols       []string // "name type collation" of each column
	recorded   bool     // cols has recordedCol (of whatever type)
	keyUnique  bool     // a unique index on key alone, as ON CONFLICT (key) needs
	trigger    bool     // the notify trigger, enabled
	seqSchema  *string  // the sequence the rev column owns; nil: none
	seqName    *string
	legacyKind *string // relkind of what holds the legacy sequence name
	legacyOwn  bool    // the legacy sequence is owned by some column
}

// inspect reads what the catalog says of n's objects, in one statement.
func inspect(ctx context.Context, pool *pgxpool.Pool, n names) (objects, error) {
	var o objects
	err := pool.QueryRow(ctx, `WITH t AS (SELECT to_regclass($1) AS oid), l AS (SELECT to_regclass($2) AS oid),
		rev AS (SELECT attnum FROM pg_attribute, t WHERE attrelid = t.oid AND attname = 'rev' AND NOT attisdropped),
		owned AS (SELECT ns.nspname, s.relname FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
			JOIN pg_namespace ns ON ns.oid = s.relnamespace, t, rev
			WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
			AND d.refobjid = t.oid AND d.refobjsubid = rev.attnum AND d.deptype IN ('a', 'i') ORDER BY s.oid LIMIT 1)
		SELECT (SELECT relkind::text FROM pg_class, t WHERE pg_class.oid = t.oid),
			coalesce((SELECT array_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || coalesce(c.collname, '') ORDER BY a.attnum)
				FROM pg_attribute a LEFT JOIN pg_collation c ON c.oid = a.attcollation, t
				WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped), '{}'),
			EXISTS (SELECT 1 FROM pg_index i, t WHERE i.indrelid = t.oid AND i.indisunique AND i.indimmediate AND i.indpred IS NULL
				AND i.indnatts = 1 AND i.indkey[0] = (SELECT attnum FROM pg_attribute WHERE attrelid = t.oid AND attname = 'key' AND NOT attisdropped)),
			EXISTS (SELECT 1 FROM pg_trigger, t WHERE tgrelid = t.oid AND tgname = $3 AND tgenabled <> 'D'),
			(SELECT nspname::text FROM owned), (SELECT relname::text FROM owned),
			(SELECT relkind::text FROM pg_class, l WHERE pg_class.oid = l.oid),
			EXISTS (SELECT 1 FROM pg_depend, l WHERE classid = 'pg_class'::regclass AND objid = l.oid AND deptype IN ('a', 'i'))`,
		n.tbl, n.legacySeq, n.table+"_notify").Scan(&o.tableKind, &o.cols, &o.keyUnique, &o.trigger, &o.seqSchema, &o.seqName, &o.legacyKind, &o.legacyOwn)
	name, _, _ := strings.Cut(recordedCol, " ")
	for _, c := range o.cols {
		if strings.HasPrefix(c, name+" ") {
			o.recorded = true
		}
	}
	return o, mapError("open", n.where(), err)
}

// complete reports whether every object is there and the table owns its
// sequence: Setup has nothing to do.
func (o objects) complete() bool {
	return o.tableKind != nil && o.trigger && o.seqName != nil && o.recorded
}

// lacksOnlyRecorded reports whether the one thing Setup would do is add
// the recorded column.
func (o objects) lacksOnlyRecorded() bool {
	return o.tableKind != nil && o.trigger && o.seqName != nil && !o.recorded
}

// sequence finds the sequence revisions come from: the one the rev column
// owns, else one an earlier version made under the legacy name.
func (o objects) sequence(n names) (schema, name string, ok bool) {
	if o.seqName != nil {
		return *o.seqSchema, *o.seqName, true
	}
	if o.legacyKind != nil && *o.legacyKind == "S" && !o.legacyOwn {
		return n.schema, n.table + "_rev", true
	}
	return "", "", false
}

// problems lists what is wrong with the table for a store, one phrase
// each; nothing if it is missing (the caller reports that).
func (o objects) problems(n names) []string {
	if o.tableKind == nil {
		return nil
	}
	if *o.tableKind != "r" && *o.tableKind != "p" {
		return []string{fmt.Sprintf("%s is a %s, not a table", n.tbl, kindName(*o.tableKind))}
	}
	var ps []string
	have := make(map[string]string, len(o.cols))
	for _, c := range o.cols {
		name, rest, _ := strings.Cut(c, " ")
		have[name] = rest
	}
	for _, w := range wantCols {
		name, rest, _ := strings.Cut(w, " ")
		switch got, ok := have[name]; {
		case !ok:
			ps = append(ps, fmt.Sprintf("%s has no column %s", n.tbl, name))
		case got != rest:
			ps = append(ps, fmt.Sprintf("column %s of %s is %q, want %q", name, n.tbl, strings.TrimSpace(got), strings.TrimSpace(rest)))
		}
	}
	name, rest, _ := strings.Cut(recordedCol, " ")
	if got, ok := have[name]; ok && got != rest {
		ps = append(ps, fmt.Sprintf("column %s of %s is %q, want %q (or no such column)", name, n.tbl, strings.TrimSpace(got), strings.TrimSpace(rest)))
	}
	if !o.keyUnique {
		ps = append(ps, fmt.Sprintf("%s has no unique index on key alone", n.tbl))
	}
	return ps
}

func kindName(k string) string {
	switch k {
	case "r":
		return "table"
	case "p":
		return "partitioned table"
	case "S":
		return "sequence"
	case "i", "I":
		return "index"
	case "v":
		return "view"
	case "m":
		return "materialized view"
	case "c":
		return "composite type"
	case "f":
		return "foreign table"
	case "t":
		return "TOAST table"
	}
	return "relation of kind " + k
}

// setupMode says what prepare may do to a store's objects.
type setupMode int

const (
	// setupNone changes nothing (WithoutSetup).
	setupNone setupMode = iota
	// setupRead changes nothing and leaves the sequence be, behind the
	// table or not (WithReadOnly): a store that writes nothing draws no
	// revision, and its role may lack the privileges to read or move
	// the sequence.
	setupRead
	// setupOpen runs the DDL if something is missing, as New does; if
	// the one thing missing is the recorded column and the DDL fails (a
	// role that may not alter the table, or a table held by writers for
	// longer than setupLockWait), the store opens without it.
	setupOpen
	// setupAll runs the DDL if something is missing, and fails if it
	// fails, as Setup does.
	setupAll
)

// prepare makes sure a store's objects are there and fit, running the DDL
// first as mode allows if something is missing, and returns n with the
// sequence the table uses and whether it has the recorded column. It then
// checks the sequence: its settings, and that it is past the highest
// revision in the table.
func prepare(ctx context.Context, pool *pgxpool.Pool, n names, mode setupMode) (names, error) {
	o, err := inspect(ctx, pool, n)
	if err != nil {
		return n, err
	}
	ps := o.problems(n)
	if mode != setupNone && mode != setupRead && !o.complete() && len(ps) == 0 {
		err := runDDL(ctx, pool, n)
		switch {
		case err == nil:
			if o, err = inspect(ctx, pool, n); err != nil {
				return n, err
			}
			ps = o.problems(n)
		case mode == setupOpen && o.lacksOnlyRecorded():
			// The column is for display only: a store over the table as
			// an earlier version made it records no time, and works.
		default:
			return n, err
		}
	}
	if len(ps) > 0 {
		return n, fmt.Errorf("postgres: open %s: %s: %w", n.where(), strings.Join(ps, "; "), ErrSchema)
	}
	schema, name, ok := o.sequence(n)
	if o.tableKind != nil && !ok && o.legacyKind != nil {
		return n, fmt.Errorf("postgres: open %s: %s owns no sequence, and %s is not one it can use (a %s%s): %w",
			n.where(), n.tbl, n.legacySeq, kindName(*o.legacyKind), map[bool]string{true: " owned by another table"}[o.legacyOwn], ErrSchema)
	}
	if o.tableKind == nil || !ok || !o.trigger {
		var missing []string
		if o.tableKind == nil {
			missing = append(missing, "the table")
		}
		if !ok {
			missing = append(missing, "its revision sequence")
		}
		if !o.trigger {
			missing = append(missing, "its notify trigger")
		}
		verb := "is"
		if len(missing) > 1 {
			verb = "are"
		}
		return n, fmt.Errorf("postgres: table %s: %s %s missing (create them with Setup, or with create=true in a store URL): %w", n.tbl, strings.Join(missing, " and "), verb, backends.ErrMissingResource)
	}
	n.useSeq(schema, name)
	n.recorded = o.recorded
	if mode == setupRead {
		return n, nil
	}
	if err := checkSequence(ctx, pool, n, 0); err != nil {
		return n, err
	}
	return n, nil
}

func runDDL(ctx context.Context, pool *pgxpool.Pool, n names) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return mapError("setup", n.where(), err)
	}
	defer rollback(ctx, tx)
	// Concurrent CREATE ... IF NOT EXISTS of one name can still collide
	// in the catalog: one lock per table serializes the stores that set
	// it up at the same time.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, setupLock(n)); err != nil {
		return mapError("setup", n.where(), err)
	}
	// Altering a table in use (adding a column, the trigger) waits for
	// its writers, and every writer queued behind it waits too: give up
	// after setupLockWait.
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = `+fmt.Sprint(setupLockWait.Milliseconds())); err != nil {
		return mapError("setup", n.where(), err)
	}
	for _, q := range n.ddl() {
		if _, err := tx.Exec(ctx, q); err != nil {
			return mapError("setup", n.where(), err)
		}
	}
	return mapError("setup", n.where(), tx.Commit(ctx))
}

func setupLock(n names) string { return "tenure setup " + n.tbl }

// seqState is what a store checks of its sequence.
type seqState struct {
	found              bool
	cache, incr, start int64
	cycle              bool
	last               *int64 // nil: never drawn from (or not readable)
	top                int64  // the highest revision in the table
}

// next is the lowest value the sequence can hand out next.
func (q seqState) next() int64 {
	if q.last == nil {
		return q.start
	}
	return *q.last + q.incr
}

func readSequence(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, n names) (seqState, error) {
	var q seqState
	err := db.QueryRow(ctx, `SELECT s.cache_size, s.increment_by, s.start_value, s.cycle, s.last_value,
			(SELECT coalesce(max(greatest(rev, create_rev)), 0) FROM `+n.tbl+`)
		FROM pg_sequences s WHERE s.schemaname = $1 AND s.sequencename = $2`, n.seqSchema, n.seqName,
	).Scan(&q.cache, &q.incr, &q.start, &q.cycle, &q.last, &q.top)
	if errors.Is(err, pgx.ErrNoRows) {
		return q, nil
	}
	q.found = err == nil
	return q, err
}

// checkSequence checks the settings of n's sequence and that it is past
// the highest revision in the table and past floor (the highest revision
// a store has seen); if it is not, it moves the sequence forward, with
// every write to the table held off meanwhile. The error is fatal
// (ErrSchema or ErrPermission) when the settings are unsafe or the
// sequence is behind and may not be moved.
func checkSequence(ctx context.Context, pool *pgxpool.Pool, n names, floor int64) error {
	q, err := readSequence(ctx, pool, n)
	if err != nil {
		return mapError("open", n.where(), err)
	}
	if err := q.unsafe(n); err != nil {
		return err
	}
	if q.next() > max(q.top, floor) {
		return nil
	}
	return forward(ctx, pool, n, floor)
}

// unsafe refuses settings under which the sequence could hand out values
// out of order or again.
func (q seqState) unsafe(n names) error {
	var ps []string
	if !q.found {
		return fmt.Errorf("postgres: open %s: %s is not a sequence: %w", n.where(), n.seq, ErrSchema)
	}
	if q.cache != 1 {
		ps = append(ps, fmt.Sprintf("cache %d (sessions would hand out cached values out of order; want CACHE 1)", q.cache))
	}
	if q.incr <= 0 {
		ps = append(ps, fmt.Sprintf("increment %d (want a positive INCREMENT BY)", q.incr))
	}
	if q.cycle {
		ps = append(ps, "CYCLE (it would start again from its minimum; want NO CYCLE)")
	}
	if len(ps) == 0 {
		return nil
	}
	return fmt.Errorf("postgres: open %s: sequence %s has %s; alter it and restart every store on the table: %w", n.where(), n.seq, strings.Join(ps, ", "), ErrSchema)
}

// setupLockWait bounds how long Setup's statements wait for the writers
// of a table they alter; Setup then fails as unavailable (lock_timeout,
// 55P03), and the writers it held up go on.
const setupLockWait = 5 * time.Second

// forwardLockWait bounds how long moving a sequence forward waits for
// the writers of its table; it then fails as unavailable (lock_timeout,
// 55P03), and the writers it held up go on.
const forwardLockWait = 5 * time.Second

// openTimeout bounds opening a store (and Setup) when the caller's ctx
// has no deadline.
const openTimeout = 30 * time.Second

// openCtx bounds an open by ctx if it has a deadline, else by openTimeout.
func openCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, openTimeout)
}

// forward moves n's sequence past the highest revision in the table and
// past floor. It holds off every write to the table while it reads and
// moves (LOCK TABLE ... IN EXCLUSIVE MODE lets reads through), so that no
// value is drawn in between and the sequence never moves back.
func forward(ctx context.Context, pool *pgxpool.Pool, n names, floor int64) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return mapError("open", n.where(), err)
	}
	defer rollback(ctx, tx)
	behind := func(err error, q seqState) error {
		return fmt.Errorf("postgres: open %s: sequence %s would hand out %d next, not above revision %d of the table or one a store saw, and cannot be moved forward (SELECT setval('%s', %d) by a role that may): %w",
			n.where(), n.seq, q.next(), max(q.top, floor), n.seq, max(q.top, floor), err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, setupLock(n)); err != nil {
		return mapError("open", n.where(), err)
	}
	// A writer that holds the table (a transaction of a stalled client)
	// would keep the lock from being granted, and every writer queued
	// behind this request waits with it: give up after forwardLockWait.
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = `+fmt.Sprint(forwardLockWait.Milliseconds())); err != nil {
		return mapError("open", n.where(), err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE `+n.tbl+` IN EXCLUSIVE MODE`); err != nil {
		q, _ := readSequence(ctx, pool, n)
		return behind(mapError("open", n.where(), err), q)
	}
	q, err := readSequence(ctx, tx, n)
	if err != nil {
		return mapError("open", n.where(), err)
	}
	if err := q.unsafe(n); err != nil {
		return err
	}
	target := max(q.top, floor)
	if q.next() > target {
		return nil // moved by another store meanwhile
	}
	if _, err := tx.Exec(ctx, `SELECT setval($1::regclass, $2)`, n.seq, target); err != nil {
		return behind(mapError("open", n.where(), err), q)
	}
	return mapError("open", n.where(), tx.Commit(ctx))
}

// rollback ends tx if it is still open, bounded as cleanupCtx says: a
// rollback never waits on a server for good. A connection whose rollback
// failed is not reused: the pool drops a connection left in a
// transaction or closed.
func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := cleanupCtx(ctx)
	defer cancel()
	_ = tx.Rollback(ctx)
}
