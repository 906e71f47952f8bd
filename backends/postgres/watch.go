package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tenure-go/tenure/backends"
)

// watchBuffer is how many events a watch holds for a slow consumer before
// it ends the stream rather than block or skip.
const watchBuffer = 256

// markerWithin bounds the wait for a watch's start marker to come back
// through the listening connection.
const markerWithin = 15 * time.Second

// closeWithin bounds closing the listening connection.
const closeWithin = 5 * time.Second

// notice is the payload the table's trigger sends, or a watch's start
// marker.
type notice struct {
	Key       string `json:"k"`
	Rev       int64  `json:"r"`
	CreateRev int64  `json:"c"`
	TTLMS     int64  `json:"t"`
	Value     []byte `json:"v"` // base64 in JSON
	Deleted   bool   `json:"d"`
	Big       bool   `json:"big"`  // the value did not fit: read it
	Start     int64  `json:"sync"` // a watch's start marker, not a write
	From      string `json:"from"` // the marker's store: others share the channel
}

// hub is a Store's one listening connection and the watches it feeds.
type hub struct {
	mu     sync.Mutex
	conn   *pgx.Conn           // guarded by mu; nil while not listening
	subs   map[int64]*watchSub // guarded by mu
	nextID int64               // guarded by mu

	// dropMu guards drop, which ends conn's reader. It is a lock of its
	// own, taken under mu or alone, since relisten runs from the pool's
	// tracer, in a query that may be sent while mu is held.
	dropMu sync.Mutex
	drop   context.CancelFunc
}

// watchSub is one Watch call's stream.
type watchSub struct {
	prefix string
	ch     chan backends.Event
	active bool          // guarded by hub.mu: its start marker has come through
	ready  chan struct{} // closed when active or ended
	stop   func() bool   // unregisters the ctx callback
}

// Watch streams the writes to keys under prefix. Every Watch of a Store
// shares one LISTEN connection of its own (never through a
// transaction-mode pooler, which does not keep a LISTEN); the trigger
// notifies at commit, in commit order, so events come in the order the
// writes took effect. A watch starts with a marker sent through the same
// channel: writes committed before the marker are not delivered to it,
// writes after it are. Nothing is replayed after a disconnect: when the
// connection breaks, every stream ends, and the consumer reads again and
// watches again (on a new connection). A stream also ends when ctx ends,
// the store is closed, or its consumer falls watchBuffer events behind.
// Expiry yields no event (Capabilities.ExpiryEvents is false): it is each
// store's own judgement, not a write. Keep-alives yield none either.
// Events carry no Entry.Recorded (it is zero): a read of the key has it.
func (s *Store) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	if err := backends.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("postgres: watch: %w", err)
	}
	if err := s.isClosed("watch", prefix); err != nil {
		return nil, err
	}
	if s.listenCfg == nil {
		return nil, fmt.Errorf("postgres: watch %q: a transaction-mode pooler keeps no LISTEN, and no direct connection was given to listen on (WithListen, or listen= in a store URL): %w", prefix, backends.ErrUnsupported)
	}
	h := &s.hub
	h.mu.Lock()
	if h.conn == nil {
		if err := s.listen(ctx); err != nil {
			h.mu.Unlock()
			return nil, err
		}
	}
	h.nextID++
	id := h.nextID
	sub := &watchSub{prefix: prefix, ch: make(chan backends.Event, watchBuffer), ready: make(chan struct{})}
	if h.subs == nil {
		h.subs = make(map[int64]*watchSub)
	}
	h.subs[id] = sub
	sub.stop = context.AfterFunc(ctx, func() { h.end(id) })
	h.mu.Unlock()

	marker := fmt.Sprintf(`{"sync":%d,"from":%q}`, id, s.nonce)
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, s.n.channel, marker); err != nil {
		h.end(id)
		return nil, mapError("watch", prefix, err)
	}
	// The marker comes back within a round trip or two; one that does not
	// come at all is a LISTEN that did not hold, as behind a
	// transaction-mode pooler, where it would be waited for for ever.
	t := time.NewTimer(markerWithin) // a bound on a network answer, not a judgement of expiry
	defer t.Stop()
	select {
	case <-sub.ready:
	case <-ctx.Done():
		h.end(id)
		return nil, fmt.Errorf("postgres: watch %q: %w", prefix, ctx.Err())
	case <-t.C:
		h.end(id)
		return nil, fmt.Errorf("postgres: watch %q: the listening connection heard nothing of its own notice within %v: a transaction-mode pooler (PgBouncer's pool_mode = transaction) in the way keeps no LISTEN; say so with pooler=transaction (WithPooler), and give a direct connection to listen on with listen= (WithListen): %w", prefix, markerWithin, backends.ErrUnavailable)
	}
	return sub.ch, nil
}

// end closes watch id's stream if it is still open.
func (h *hub) end(id int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.endLocked(id)
}

func (h *hub) endLocked(id int64) {
	sub, ok := h.subs[id]
	if !ok {
		return
	}
	delete(h.subs, id)
	sub.stop()
	if !sub.active {
		close(sub.ready)
	}
	close(sub.ch)
}

// listen opens the listening connection and starts its reader. h.mu is
// held.
func (s *Store) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, s.listenCfg.Copy())
	if err != nil {
		return mapError("watch", "", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.n.channel}.Sanitize()); err != nil {
		closeConn(conn)
		return mapError("watch", "", err)
	}
	s.mu.Lock()
	if s.closing.Closed() {
		s.mu.Unlock()
		closeConn(conn)
		return fmt.Errorf("postgres: watch: %w", backends.ErrClosed)
	}
	s.watches.Add(1) // under mu: Close, which marks the store closed under mu, waits for it
	s.mu.Unlock()
	ctx, drop := context.WithCancel(s.stopCtx)
	s.hub.conn = conn
	s.hub.dropMu.Lock()
	s.hub.drop = drop
	s.hub.dropMu.Unlock()
	go s.deliver(ctx, conn)
	return nil
}

// relisten ends the listening connection, and with it every stream, when
// a server refused one of the store's writes as read-only: the listening
// connection may be on that server, which no longer sees the writes (a
// fenced old primary), and a watch's start marker, sent through the pool
// to the new primary, would never come back through it. The next Watch
// listens on the server that accepts writes.
func (s *Store) relisten() {
	h := &s.hub
	h.dropMu.Lock()
	defer h.dropMu.Unlock()
	if h.drop != nil {
		h.drop()
	}
}

// deliver hands out the notices of conn until it breaks or the store closes,
// then ends every stream.
func (s *Store) deliver(ctx context.Context, conn *pgx.Conn) {
	defer s.watches.Done()
	h := &s.hub
	defer func() {
		closeConn(conn)
		h.mu.Lock()
		if h.conn == conn {
			h.conn = nil
			h.dropMu.Lock()
			h.drop()
			h.drop = nil
			h.dropMu.Unlock()
		}
		for id := range h.subs {
			h.endLocked(id)
		}
		h.mu.Unlock()
	}()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return // the store closed, the connection broke or was dropped: nothing is replayed
		}
		var m notice
		if err := json.Unmarshal([]byte(n.Payload), &m); err != nil {
			return // not ours to skip: end every stream
		}
		if m.Start != 0 {
			if m.From != s.nonce {
				continue // another store's watch starting
			}
			h.mu.Lock()
			if sub, ok := h.subs[m.Start]; ok && !sub.active {
				sub.active = true
				close(sub.ready)
			}
			h.mu.Unlock()
			continue
		}
		ev, ok := s.event(conn, m)
		if !ok {
			return
		}
		h.mu.Lock()
		for id, sub := range h.subs {
			if !sub.active || !strings.HasPrefix(m.Key, sub.prefix) {
				continue
			}
			select {
			case sub.ch <- copyEvent(ev):
			default:
				h.endLocked(id) // the consumer fell behind: end rather than block or skip
			}
		}
		h.mu.Unlock()
	}
}

func copyEvent(ev backends.Event) backends.Event {
	if ev.Entry.Value != nil {
		ev.Entry.Value = append([]byte{}, ev.Entry.Value...)
	}
	return ev
}

// event turns a notice into an Event; a value too large for the notice is
// read on the listening connection, and if it has been overwritten since,
// every stream ends.
func (s *Store) event(conn *pgx.Conn, m notice) (backends.Event, bool) {
	if m.Deleted {
		return backends.Event{Kind: backends.EventDelete, Entry: backends.Entry{Key: m.Key, Revision: m.Rev, CreateRevision: m.CreateRev}}, true
	}
	v := m.Value
	if m.Big {
		ctx, cancel := context.WithTimeout(s.stopCtx, closeWithin)
		defer cancel()
		if err := conn.QueryRow(ctx, `SELECT value FROM `+s.n.tbl+` WHERE key = $1 AND rev = $2`, m.Key, m.Rev).Scan(&v); err != nil {
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
