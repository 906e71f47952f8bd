package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"

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
	seq           string // "schema"."table_rev"
	fn            string // "schema"."table_notify"
	trigger       string // "table_notify"
	channel       string // the NOTIFY channel, at most 63 bytes
	lockSeed      int64  // seeds the hash of a key's advisory lock, so tables do not share locks
}

func newNames(schema, table string) names {
	h := fnv.New64a()
	h.Write([]byte(schema + "." + table))
	return names{
		schema:   schema,
		table:    table,
		tbl:      pgx.Identifier{schema, table}.Sanitize(),
		seq:      pgx.Identifier{schema, table + "_rev"}.Sanitize(),
		fn:       pgx.Identifier{schema, table + "_notify"}.Sanitize(),
		trigger:  pgx.Identifier{table + "_notify"}.Sanitize(),
		channel:  fmt.Sprintf("tenure_%016x", h.Sum64()),
		lockSeed: int64(h.Sum64()),
	}
}

// notifyLimit is the largest NOTIFY payload the trigger sends with the
// value in it (the server's limit is 8000 bytes); a larger one is sent
// without the value, and the watch reads it.
const notifyLimit = 7800

// ddl creates a store's objects; every statement is idempotent.
func (n names) ddl() []string {
	return []string{
		`CREATE SCHEMA IF NOT EXISTS ` + pgx.Identifier{n.schema}.Sanitize(),
		`CREATE SEQUENCE IF NOT EXISTS ` + n.seq + ` AS bigint`,
		// rev 0 marks a placeholder row a transaction inserts to lock an
		// absent key; it is never committed.
		`CREATE TABLE IF NOT EXISTS ` + n.tbl + ` (
			key        text COLLATE "C" PRIMARY KEY,
			value      bytea  NOT NULL,
			rev        bigint NOT NULL,
			create_rev bigint NOT NULL,
			ttl_ms     bigint NOT NULL,
			beat       bigint NOT NULL
		)`,
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
// keeps its entries in, if they are missing. It is idempotent and safe to
// run from many processes at once. New runs it unless WithoutSetup is
// given; run it yourself (or the statements it runs, which SetupSQL
// returns) where the store's role may not create objects.
func Setup(ctx context.Context, pool *pgxpool.Pool, opts ...Option) error {
	o, err := options(opts)
	if err != nil {
		return err
	}
	return setup(ctx, pool, newNames(o.schema, o.table))
}

// SetupSQL returns the statements Setup runs, for a migration tool.
func SetupSQL(opts ...Option) (string, error) {
	o, err := options(opts)
	if err != nil {
		return "", err
	}
	return strings.Join(newNames(o.schema, o.table).ddl(), ";\n") + ";\n", nil
}

func setup(ctx context.Context, pool *pgxpool.Pool, n names) error {
	if ok, err := present(ctx, pool, n); err != nil || ok {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return mapError("setup", n.schema+"."+n.table, err)
	}
	defer rollback(ctx, tx)
	// Concurrent CREATE ... IF NOT EXISTS of one name can still collide
	// in the catalog: one lock per table serializes the stores that set
	// it up at the same time.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "tenure setup "+n.tbl); err != nil {
		return mapError("setup", n.schema+"."+n.table, err)
	}
	for _, q := range n.ddl() {
		if _, err := tx.Exec(ctx, q); err != nil {
			return mapError("setup", n.schema+"."+n.table, err)
		}
	}
	return mapError("setup", n.schema+"."+n.table, tx.Commit(ctx))
}

// present reports whether the table, its sequence and its trigger exist,
// so that a store whose role may not create objects opens over objects
// made by someone else without running DDL.
func present(ctx context.Context, pool *pgxpool.Pool, n names) (bool, error) {
	var ok bool
	err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL
		AND EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass($1) AND tgname = $3)`,
		n.tbl, n.seq, n.table+"_notify").Scan(&ok)
	return ok, mapError("setup", n.schema+"."+n.table, err)
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
