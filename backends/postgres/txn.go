package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/check"
)

// Txn checks conds and applies ops in one read-committed transaction:
//
//  1. a transaction-scoped advisory lock per key, taken in key order, so
//     that two transactions over the same keys queue instead of
//     deadlocking;
//  2. a placeholder row (rev 0) inserted for every key that has none, so
//     that a key that is absent stays absent: a concurrent create waits on
//     the placeholder's index entry until the transaction ends;
//  3. every key's row read FOR UPDATE, so no keep-alive, write or delete
//     lands between the check and the writes;
//  4. the conditions judged on those rows, then the writes; placeholders
//     left over are deleted before the commit and never seen by anyone.
//
// The conditions are first checked alone: one SELECT of every key, a
// snapshot of one instant, and no locks. A transaction they refuse ends
// there, having cost one statement: most transactions a follower sends
// meet a held claim, and taking locks and writing placeholders only to
// roll them back would cost the server five statements each time. A
// transaction without operations only checks. Conditions that hold are
// checked again under the locks, which decide.
//
// A serialization failure or deadlock reported by the server is transient
// (ErrUnavailable): nothing was written.
func (s *Store) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	if err := check.Txn(conds, ops); err != nil {
		return backends.TxnResult{}, err
	}
	if err := s.isClosed("txn", ""); err != nil {
		return backends.TxnResult{}, err
	}
	var keys []string
	for _, c := range conds {
		keys = append(keys, c.Key)
	}
	for _, o := range ops {
		keys = append(keys, o.Key)
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	if len(keys) == 0 {
		return backends.TxnResult{Entries: []backends.Entry{}}, nil
	}

	if len(conds) > 0 {
		if err := s.checkOnly(ctx, keys, conds); err != nil {
			return backends.TxnResult{}, err
		}
	}
	if len(ops) == 0 {
		return backends.TxnResult{Entries: []backends.Entry{}}, nil
	}

	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return backends.TxnResult{}, mapError("txn", keys[0], err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	fail := func(err error) (backends.TxnResult, error) {
		return backends.TxnResult{}, mapError("txn", keys[0], err)
	}

	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(k, $2)) FROM unnest($1::text[]) WITH ORDINALITY AS u(k, i) ORDER BY i`, keys, s.n.lockSeed); err != nil {
		return fail(err)
	}
	// A row can vanish between the insert that found it and the read that
	// locks it (a release); insert and read again until every key has its
	// row locked. Only single-row writes interleave here: other
	// transactions over these keys wait on the advisory locks.
	byKey := make(map[string]row, len(keys))
	for range createTries {
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.n.tbl+` (`+cols+`) SELECT k, '', 0, 0, 0, 0 FROM unnest($1::text[]) WITH ORDINALITY AS u(k, i) ORDER BY i ON CONFLICT (key) DO NOTHING`, keys); err != nil {
			return fail(err)
		}
		rows, err := tx.Query(ctx, `SELECT `+cols+` FROM `+s.n.tbl+` WHERE key = ANY($1) ORDER BY key FOR UPDATE`, keys)
		if err != nil {
			return fail(err)
		}
		for rows.Next() {
			x, err := scanRow(rows)
			if err != nil {
				rows.Close()
				return fail(err)
			}
			byKey[x.key] = x
		}
		if err := rows.Err(); err != nil {
			return fail(err)
		}
		if len(byKey) == len(keys) {
			break
		}
	}
	now := s.clk.Now()
	type state struct {
		x    row
		e    backends.Entry
		live bool // a real row, not expired for this store
	}
	st := make(map[string]state, len(keys))
	for _, k := range keys {
		x, ok := byKey[k]
		if !ok {
			return backends.TxnResult{}, fmt.Errorf("postgres: txn %q: the key kept being deleted under %d attempts: %w", k, createTries, backends.ErrUnavailable)
		}
		var e backends.Entry
		live := false
		if x.rev != 0 {
			e, live = s.judge(x, now)
		}
		st[k] = state{x: x, e: e, live: live}
	}
	for _, c := range conds {
		cur := st[c.Key]
		if c.Revision == 0 && !cur.live {
			continue
		}
		if c.Revision != 0 && cur.live && cur.x.rev == c.Revision {
			continue
		}
		ce := &backends.ConflictError{Op: "txn", Key: c.Key, Expected: c.Revision}
		if cur.live {
			ce.Current, ce.Found = cur.e, true
		}
		return backends.TxnResult{}, fmt.Errorf("postgres: %w", ce)
	}

	res := backends.TxnResult{Entries: make([]backends.Entry, len(ops))}
	written := make([]row, 0, len(ops))
	for i, o := range ops {
		cur := st[o.Key]
		switch o.Kind {
		case backends.OpPut:
			v := o.Value
			if v == nil {
				v = []byte{}
			}
			x, err := scanRow(tx.QueryRow(ctx, `WITH r AS (SELECT nextval('`+s.n.seq+`') AS rev)
				UPDATE `+s.n.tbl+` t SET value = $2, rev = r.rev,
					create_rev = CASE WHEN $4 THEN t.create_rev ELSE r.rev END,
					ttl_ms = $3, beat = t.beat + 1
				FROM r WHERE t.key = $1 RETURNING `+prefixed("t"), o.Key, v, ttlMS(o.TTL), cur.live))
			if err != nil {
				return fail(err)
			}
			written = append(written, x)
			ttl := msDuration(x.ttlMS)
			res.Entries[i] = backends.Entry{Key: x.key, Value: x.value, Revision: x.rev, CreateRevision: x.createRev, TTL: ttl, Remaining: ttl}
		case backends.OpDelete:
			if cur.live {
				if _, err := tx.Exec(ctx, `DELETE FROM `+s.n.tbl+` WHERE key = $1`, o.Key); err != nil {
					return fail(err)
				}
				res.Entries[i] = backends.Entry{Key: o.Key, Revision: cur.x.rev, CreateRevision: cur.x.createRev}
			} else {
				res.Entries[i] = backends.Entry{Key: o.Key}
			}
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM `+s.n.tbl+` WHERE key = ANY($1) AND rev = 0`, keys); err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	now = s.clk.Now()
	for _, x := range written {
		s.judge(x, now)
	}
	for i, o := range ops {
		if o.Kind == backends.OpDelete && res.Entries[i].Revision != 0 {
			s.forget(o.Key)
		}
	}
	return res, nil
}

// checkOnly checks conds against one read of keys.
func (s *Store) checkOnly(ctx context.Context, keys []string, conds []backends.Cond) error {
	rows, err := s.pool.Query(ctx, `SELECT `+cols+` FROM `+s.n.tbl+` WHERE key = ANY($1)`, keys)
	if err != nil {
		return mapError("txn", keys[0], err)
	}
	var xs []row
	for rows.Next() {
		x, err := scanRow(rows)
		if err != nil {
			rows.Close()
			return mapError("txn", keys[0], err)
		}
		xs = append(xs, x)
	}
	if err := rows.Err(); err != nil {
		return mapError("txn", keys[0], err)
	}
	now := s.clk.Now()
	live := make(map[string]backends.Entry, len(xs))
	present := make(map[string]bool, len(xs))
	for _, x := range xs {
		present[x.key] = true
		if e, ok := s.judge(x, now); ok {
			live[x.key] = e
		}
	}
	for _, k := range keys {
		if !present[k] {
			s.forget(k) // gone; an expired row is remembered, or it would look new at the next read
		}
	}
	for _, c := range conds {
		e, ok := live[c.Key]
		if (c.Revision == 0 && !ok) || (ok && e.Revision == c.Revision) {
			continue
		}
		ce := &backends.ConflictError{Op: "txn", Key: c.Key, Expected: c.Revision}
		if ok {
			ce.Current, ce.Found = e, true
		}
		return fmt.Errorf("postgres: %w", ce)
	}
	return nil
}
