package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/check"
)

// Txn checks conds and applies ops in one read-committed transaction,
// all-or-nothing: the conditions are decided under a lock of every key's
// row (a placeholder row for a key that is absent, so that it stays absent
// until the transaction ends), and two transactions over the same keys
// queue instead of deadlocking. A transaction its conditions refuse costs
// one round trip and takes no lock; one with conditions that commits costs
// three, one without conditions two. A transaction without operations only
// checks.
//
// A serialization failure or deadlock reported by the server is transient
// (ErrUnavailable): nothing was written.
func (s *Store) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (_ backends.TxnResult, err error) {
	defer func() { err = s.withSyncHint(err) }()
	if err := check.Txn(conds, ops); err != nil {
		return backends.TxnResult{}, fmt.Errorf("postgres: txn: %w", err)
	}
	if err := s.isClosed("txn", ""); err != nil {
		return backends.TxnResult{}, err
	}
	if len(ops) > 0 {
		if err := s.writable("txn", ""); err != nil {
			return backends.TxnResult{}, err
		}
	}
	keys := txnKeys(conds, ops)
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

	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return backends.TxnResult{}, mapError("txn", keys[0], err)
	}
	// Released to the pool only with no transaction open: the pool drops
	// a connection left in one, as after a failed rollback.
	defer pc.Release()
	conn := pc.Conn()
	defer s.endTxn(ctx, conn)

	sent := s.generation()
	byKey, err := s.lockRows(ctx, conn, keys)
	if err != nil {
		return backends.TxnResult{}, mapError("txn", keys[0], err)
	}
	st, err := s.txnStates(byKey, keys, sent)
	if err != nil {
		return backends.TxnResult{}, err
	}
	if err := txnCheck(conds, st); err != nil {
		return backends.TxnResult{}, err
	}

	// The writes, the removal of the placeholders left over and the commit
	// go out together.
	b, res := s.txnBatch(ops, keys, st)
	br := conn.SendBatch(ctx, b)
	written, err := readTxnBatch(br, ops, res)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The locks go before the sequence may be moved forward, which
		// waits for every writer of the table.
		s.endTxn(ctx, conn)
		return backends.TxnResult{}, s.writeError(ctx, "txn", keys[0], err)
	}
	now := s.clk.Now()
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

// txnKeys is every key a transaction names, sorted, each once: the order
// its rows are locked in.
func txnKeys(conds []backends.Cond, ops []backends.Op) []string {
	var keys []string
	for _, c := range conds {
		keys = append(keys, c.Key)
	}
	for _, o := range ops {
		keys = append(keys, o.Key)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// txnState is a key's row as a transaction locked it.
type txnState struct {
	x    row
	e    backends.Entry
	live bool // a real row, not expired for this store
}

// txnStates judges each key's locked row (byKey) as this store sees it now;
// sent is the generation before the rows were read. A key without a row
// kept being deleted under every attempt to lock it.
func (s *Store) txnStates(byKey map[string]row, keys []string, sent int64) (map[string]txnState, error) {
	now := s.clk.Now()
	st := make(map[string]txnState, len(keys))
	for _, k := range keys {
		x, ok := byKey[k]
		if !ok {
			return nil, fmt.Errorf("postgres: txn %q: the key kept being deleted under %d attempts: %w", k, createTries, backends.ErrUnavailable)
		}
		var e backends.Entry
		live := false
		if x.rev != 0 {
			var err error
			if e, live, err = s.observe("txn", x, now, sent); err != nil {
				return nil, err
			}
		}
		st[k] = txnState{x: x, e: e, live: live}
	}
	return st, nil
}

// txnCheck judges the conditions on the locked rows: the first that does
// not hold is a *ConflictError.
func txnCheck(conds []backends.Cond, st map[string]txnState) error {
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
		return fmt.Errorf("postgres: %w", ce)
	}
	return nil
}

// txnBatch is the batch of a transaction's writes, the removal of the
// placeholders left over and the commit, and its result so far: the
// entries of its deletes (a put's comes from its answer).
func (s *Store) txnBatch(ops []backends.Op, keys []string, st map[string]txnState) (*pgx.Batch, backends.TxnResult) {
	b := &pgx.Batch{}
	res := backends.TxnResult{Entries: make([]backends.Entry, len(ops))}
	for i, o := range ops {
		cur := st[o.Key]
		switch o.Kind {
		case backends.OpPut:
			v := o.Value
			if v == nil {
				v = []byte{}
			}
			b.Queue(s.sq.txnPut, o.Key, v, ttlMS(o.TTL), cur.live, s.high.Load())
		case backends.OpDelete:
			if cur.live {
				b.Queue(s.sq.txnDelete, o.Key)
				res.Entries[i] = backends.Entry{Key: o.Key, Revision: cur.x.rev, CreateRevision: cur.x.createRev}
			} else {
				res.Entries[i] = backends.Entry{Key: o.Key}
			}
		}
	}
	b.Queue(s.sq.txnClean, keys)
	b.Queue("COMMIT")
	return b, res
}

// readTxnBatch reads the answers of txnBatch's batch into res, in the
// order it queued them, and returns the rows the puts wrote. An error
// means the transaction did not commit, or may not have.
func readTxnBatch(br pgx.BatchResults, ops []backends.Op, res backends.TxnResult) ([]row, error) {
	written := make([]row, 0, len(ops))
	for i, o := range ops {
		switch {
		case o.Kind == backends.OpPut:
			x, err := scanRow(br.QueryRow())
			if err != nil {
				return written, err
			}
			written = append(written, x)
			res.Entries[i] = x.entry()
			res.Entries[i].Remaining = res.Entries[i].TTL
		case res.Entries[i].Revision != 0:
			if _, err := br.Exec(); err != nil {
				return written, err
			}
		}
	}
	if _, err := br.Exec(); err != nil {
		return written, err
	}
	tag, err := br.Exec()
	if err != nil {
		return written, err
	}
	if tag.String() != "COMMIT" {
		return written, pgx.ErrTxCommitRollback
	}
	return written, nil
}

// endTxn rolls back conn's transaction if one is open. The rollback is
// bounded by ctx, or by closeWithin if ctx has no deadline or has ended:
// a server that stops answering must not hold the caller. A connection
// whose rollback did not complete is closed (pgx closes it when the
// rollback's context ends), so the pool never hands it out again.
func (s *Store) endTxn(ctx context.Context, conn *pgx.Conn) {
	if conn.IsClosed() || conn.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := cleanupCtx(ctx)
	defer cancel()
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil && !conn.IsClosed() {
		closeConn(conn)
	}
}

// cleanupCtx bounds a statement that ends what a call began (a
// rollback): by ctx while ctx is live and has a deadline, else by
// closeWithin.
func cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok && ctx.Err() == nil {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), closeWithin)
}

// lockRows begins a read-committed transaction on conn and locks the row
// of every key, inserting a placeholder (rev 0) for a key that has none,
// and returns the rows by key: one round trip, or more if a row went
// between its insert and its read. A key missing from the result kept
// vanishing.
func (s *Store) lockRows(ctx context.Context, conn *pgx.Conn, keys []string) (map[string]row, error) {
	byKey := make(map[string]row, len(keys))
	for try := range createTries {
		b := &pgx.Batch{}
		if try == 0 {
			b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
			b.Queue(s.sq.txnLock, keys, s.n.lockSeed)
		}
		b.Queue(s.sq.txnPlace, keys)
		b.Queue(s.sq.txnRead, keys)
		br := conn.SendBatch(ctx, b)
		err := func() error {
			for range b.Len() - 1 {
				if _, err := br.Exec(); err != nil {
					return err
				}
			}
			rows, err := br.Query()
			if err != nil {
				return err
			}
			for rows.Next() {
				x, err := scanRow(rows)
				if err != nil {
					rows.Close()
					return err
				}
				byKey[x.key] = x
			}
			return rows.Err()
		}()
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		if len(byKey) == len(keys) {
			break
		}
	}
	return byKey, nil
}

// checkOnly checks conds against one read of keys.
func (s *Store) checkOnly(ctx context.Context, keys []string, conds []backends.Cond) error {
	sent := s.generation()
	rows, err := s.pool.Query(ctx, `SELECT `+s.sq.sel+` FROM `+s.n.tbl+` WHERE key = ANY($1)`, keys)
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
		e, ok, err := s.observe("txn", x, now, sent)
		if err != nil {
			return err
		}
		if ok {
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
