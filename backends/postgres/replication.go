package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tenure-go/tenure/backends"
)

// WithAsyncStandbys makes New accept a primary that streams to standbys
// it does not replicate to synchronously. New refuses such a primary
// otherwise: promoting an asynchronous standby can lose keep-alives and
// writes the primary had acknowledged, and with them the store's promise
// of one holder (see the package doc). Give it only where no asynchronous
// standby is ever promoted while claims are live.
func WithAsyncStandbys() Option {
	return func(o *options) { o.asyncStandbys = true }
}

// replicationSQL reads, on the server a store opened on, whether it is a
// standby, its settings for synchronous replication, the physical
// standbys streaming from it (not a logical walsender, which holds an
// active logical slot, nor a base backup being taken; a cascading standby
// is not seen here), and those whose
// synchronous state this role may not see (NULL without pg_read_all_stats)
// or that synchronous_standby_names does not name ('async').
const replicationSQL = `WITH r AS (
	SELECT sync_state FROM pg_stat_replication s
	WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots l WHERE l.slot_type = 'logical' AND l.active_pid = s.pid)
	AND coalesce(s.state, '') <> 'backup' AND s.application_name IS DISTINCT FROM 'pg_basebackup'
)
SELECT pg_is_in_recovery(), current_setting('synchronous_standby_names'), current_setting('synchronous_commit'),
	(SELECT count(*) FROM r),
	(SELECT count(*) FROM r WHERE sync_state IS NULL),
	(SELECT count(*) FROM r WHERE sync_state = 'async'),
	(SELECT count(*) FROM r WHERE sync_state IN ('sync', 'quorum'))`

// checkReplication refuses, with an error wrapping backends.ErrUnsupported
// that names the setting, a primary with standbys it does not replicate
// to synchronously, unless the caller accepted them (WithAsyncStandbys);
// and, with ErrUnavailable, a server that is itself a standby. A primary
// that waits at every commit for a synchronous standby and has none
// streaming (a standby being rebuilt, or a promoted standby that kept the
// old primary's synchronous_standby_names), on which every write would
// wait, is asked again every syncPoll until one streams; when ctx ends
// first, the error wraps ErrUnavailable and names the setting. A store
// opened read-only (readOnly) is refused only a standby: it makes no
// commits to wait for, nor claims a promoted standby could lose.
func checkReplication(ctx context.Context, pool *pgxpool.Pool, clk clock.Clock, acceptAsync, readOnly bool) error {
	var waited error
	for {
		wait, err := checkReplicationOnce(ctx, pool, acceptAsync, readOnly)
		if !wait {
			if waited != nil && ctx.Err() != nil {
				return waited // ended while asking again
			}
			return err
		}
		waited = err
		t := clk.Timer(syncPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// syncPoll is how often an open asks again whether a synchronous standby
// streams.
const syncPoll = 250 * time.Millisecond

// checkReplicationOnce is one check of checkReplication; wait says that
// err is the condition it waits out.
func checkReplicationOnce(ctx context.Context, pool *pgxpool.Pool, acceptAsync, readOnly bool) (wait bool, err error) {
	var (
		inRecovery                   bool
		standbyNames, commit         string
		standbys, unseen, asyncCount int64
		syncCount                    int64
	)
	err = pool.QueryRow(ctx, replicationSQL).Scan(&inRecovery, &standbyNames, &commit, &standbys, &unseen, &asyncCount, &syncCount)
	if err != nil {
		return false, mapError("open", "", err)
	}
	if inRecovery {
		return false, fmt.Errorf("postgres: open: the server is a standby (in recovery), which cannot be written: connect to the primary (target_session_attrs=read-write): %w", backends.ErrUnavailable)
	}
	if readOnly {
		return false, nil
	}
	if standbyNames != "" && commit != "off" && commit != "local" && unseen == 0 && syncCount == 0 {
		// Every commit would wait for a standby that is not there, and a
		// write cancelled at its deadline would stay committed on the
		// primary alone.
		return true, fmt.Errorf("postgres: open: synchronous_standby_names is %q and no synchronous standby streams from the server, so every commit waits for one: start the standby, or clear synchronous_standby_names on a primary left without one (after a failover): %w", standbyNames, backends.ErrUnavailable)
	}
	if standbys == 0 || acceptAsync {
		return false, nil
	}
	const optIn = "or accept them with WithAsyncStandbys (URL: async_standbys=accept) if no asynchronous standby is ever promoted while claims are live"
	switch {
	case standbyNames == "":
		return false, fmt.Errorf("postgres: open: the server streams to %s and synchronous_standby_names is empty: a promoted standby may lack acknowledged writes and give a claim two holders; set synchronous_standby_names, %s: %w", nStandbys(standbys), optIn, backends.ErrUnsupported)
	case commit == "off" || commit == "local":
		return false, fmt.Errorf("postgres: open: the server streams to %s and synchronous_commit is %q, which does not wait for them; set synchronous_commit to on, remote_write or remote_apply, %s: %w", nStandbys(standbys), commit, optIn, backends.ErrUnsupported)
	case unseen > 0:
		return false, fmt.Errorf("postgres: open: the server streams to %s and this role may not read their sync_state in pg_stat_replication: grant it pg_read_all_stats (or pg_monitor), %s: %w", nStandbys(standbys), optIn, backends.ErrUnsupported)
	case asyncCount > 0:
		return false, fmt.Errorf("postgres: open: %d of the server's %s %s asynchronous (synchronous_standby_names %q does not name them): add them to synchronous_standby_names, %s: %w", asyncCount, nStandbys(standbys), isAre(asyncCount), standbyNames, optIn, backends.ErrUnsupported)
	}
	return false, nil
}

// nStandbys is "1 standby" or "n standbys".
func nStandbys(n int64) string {
	if n == 1 {
		return "1 standby"
	}
	return fmt.Sprintf("%d standbys", n)
}

// isAre is the verb that agrees with n.
func isAre(n int64) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// syncHintEvery is how seldom a store whose writes time out asks the
// server whether it waits for a synchronous standby that is not there;
// syncHintWithin bounds the asking.
const (
	syncHintEvery  = 5 * time.Second
	syncHintWithin = 2 * time.Second
)

// withSyncHint is err, the error of a write, with the reason a commit
// may never have returned when the store last found one: the server has
// synchronous_standby_names set and no synchronous standby streaming (a
// promoted standby that kept the old primary's setting), which a store
// already open sees only as writes that time out. A write that timed out
// (its ctx's deadline) starts a check, at most one every syncHintEvery,
// on a connection of its own with its own deadline, without waiting for
// it: the write returns at once, and a later one carries what the check
// found. The error keeps its class (transient): the standby may return.
func (s *Store) withSyncHint(err error) error {
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	s.mu.Lock()
	if !s.closing.Closed() && !s.hintRunning && (s.hintAt.IsZero() || s.clk.Since(s.hintAt) >= syncHintEvery) {
		s.hintRunning = true
		s.bg.Add(1)
		go s.checkSyncStandby()
	}
	hint := s.hint
	s.mu.Unlock()
	if hint == "" {
		return err
	}
	return fmt.Errorf("%w (%s)", err, hint)
}

// checkSyncStandby asks the server, on a new connection, whether every
// commit waits for a synchronous standby that does not stream, and
// records the answer for withSyncHint. A check that fails changes
// nothing.
func (s *Store) checkSyncStandby() {
	defer s.bg.Done()
	hint, ok := s.askSyncStandby()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hintRunning = false
	s.hintAt = s.clk.Now()
	if ok {
		s.hint = hint
	}
}

func (s *Store) askSyncStandby() (string, bool) {
	ctx, cancel := context.WithTimeout(s.stopCtx, syncHintWithin)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return "", false
	}
	defer conn.Close(context.Background())
	var (
		inRecovery                   bool
		standbyNames, commit         string
		standbys, unseen, asyncCount int64
		syncCount                    int64
	)
	if err := conn.QueryRow(ctx, replicationSQL).Scan(&inRecovery, &standbyNames, &commit, &standbys, &unseen, &asyncCount, &syncCount); err != nil {
		return "", false
	}
	if inRecovery || standbyNames == "" || commit == "off" || commit == "local" || unseen > 0 || syncCount > 0 {
		return "", true
	}
	return fmt.Sprintf("synchronous_standby_names is %q and no synchronous standby streams from the server, so every commit waits for one: start the standby, or clear synchronous_standby_names on a primary left without one (after a failover)", standbyNames), true
}
