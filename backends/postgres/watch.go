package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tenure-go/tenure/backends"
)

// watchBuffer is how many events a watch holds for a slow consumer before
// it ends the stream rather than block or skip.
const watchBuffer = 256

// closeWithin bounds closing a watch's connection.
const closeWithin = 5 * time.Second

// notice is the payload the table's trigger sends.
type notice struct {
	Key       string `json:"k"`
	Rev       int64  `json:"r"`
	CreateRev int64  `json:"c"`
	TTLMS     int64  `json:"t"`
	Value     []byte `json:"v"` // base64 in JSON
	Deleted   bool   `json:"d"`
	Big       bool   `json:"big"` // the value did not fit: read it
}

// Watch streams the writes to keys under prefix through LISTEN/NOTIFY, on
// a connection of its own (never through a transaction-mode pooler, which
// does not keep a LISTEN). The trigger notifies at commit, in commit
// order, so the events come in the order the writes took effect. Nothing
// is replayed after a disconnect: the stream ends when the connection
// breaks, ctx ends or the store is closed, and the consumer reads again
// and watches again. Expiry yields no event (Capabilities.ExpiryEvents is
// false): expiry is each store's own judgement, not a write. Keep-alives
// yield none either.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("postgres: watch %q: %w", prefix, backends.ErrClosed)
	}
	s.watches.Add(1) // under mu: Close waits for this watch if it started
	s.mu.Unlock()
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		s.watches.Done()
		return nil, mapError("watch", prefix, err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.n.channel}.Sanitize()); err != nil {
		closeConn(conn)
		s.watches.Done()
		return nil, mapError("watch", prefix, err)
	}
	ch := make(chan backends.Event, watchBuffer)
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.stopCtx, cancel)
	go func() {
		defer s.watches.Done()
		defer close(ch)
		defer cancel()
		defer stop()
		defer closeConn(conn)
		for {
			n, err := conn.WaitForNotification(wctx)
			if err != nil {
				return // ctx ended, the store closed or the connection broke
			}
			var m notice
			if err := json.Unmarshal([]byte(n.Payload), &m); err != nil {
				return // not ours to skip: end the stream
			}
			if !strings.HasPrefix(m.Key, prefix) {
				continue
			}
			ev, ok := s.event(wctx, conn, m)
			if !ok {
				return
			}
			select {
			case ch <- ev:
			default:
				return // the consumer fell behind: end rather than block or skip
			}
		}
	}()
	return ch, nil
}

// event turns a notice into an Event; a value too large for the notice is
// read on the watch's connection, and if it has been overwritten since,
// the stream ends.
func (s *Store) event(ctx context.Context, conn *pgx.Conn, m notice) (backends.Event, bool) {
	if m.Deleted {
		return backends.Event{Kind: backends.EventDelete, Entry: backends.Entry{Key: m.Key, Revision: m.Rev, CreateRevision: m.CreateRev}}, true
	}
	v := m.Value
	if m.Big {
		err := conn.QueryRow(ctx, `SELECT value FROM `+s.n.tbl+` WHERE key = $1 AND rev = $2`, m.Key, m.Rev).Scan(&v)
		if err != nil {
			return backends.Event{}, false
		}
	}
	if v == nil {
		v = []byte{}
	}
	ttl := msDuration(m.TTLMS)
	return backends.Event{Kind: backends.EventPut, Entry: backends.Entry{Key: m.Key, Value: v, Revision: m.Rev, CreateRevision: m.CreateRev, TTL: ttl, Remaining: ttl}}, true
}

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeWithin)
	defer cancel()
	c.Close(ctx)
}
