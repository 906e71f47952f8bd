package shardstest

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
)

// tracer records, while it is on, the store calls and watch events of every
// member of a Group, on this process's monotonic clock, for the breakdown of
// a handover that BenchLeave reports.
type tracer struct {
	listed atomic.Int64 // entries returned by the members' lists, always counted

	mu   sync.Mutex
	on   bool    // guarded by mu
	recs []trace // guarded by mu
}

// trace is one recorded call's answer or one event.
type trace struct {
	at     time.Time
	member string
	what   string // "create", "delete", "event-delete", "watch-ended"
	key    string
	sent   time.Time // when the call was sent (calls only)
	ok     bool      // the call succeeded
}

func (t *tracer) add(r trace) {
	t.mu.Lock()
	if t.on {
		t.recs = append(t.recs, r)
	}
	t.mu.Unlock()
}

// start forgets what was recorded and records from now on.
func (t *tracer) start() {
	t.mu.Lock()
	t.recs, t.on = nil, true
	t.mu.Unlock()
}

// stop stops recording and returns what was recorded.
func (t *tracer) stop() []trace {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.on = false
	return slices.Clone(t.recs)
}

// tracedStore is a member's store with its claim writes and its watch's
// deletions recorded, and the entries its lists return counted.
type tracedStore struct {
	backends.Store
	t      *tracer
	member string
}

func (s *tracedStore) CreateIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (backends.Entry, error) {
	sent := time.Now()
	e, err := s.Store.CreateIfAbsent(ctx, key, value, ttl)
	s.t.add(trace{at: time.Now(), member: s.member, what: "create", key: key, sent: sent, ok: err == nil})
	return e, err
}

func (s *tracedStore) List(ctx context.Context, prefix string) ([]backends.Entry, error) {
	es, err := s.Store.List(ctx, prefix)
	s.t.listed.Add(int64(len(es)))
	return es, err
}

func (s *tracedStore) CompareAndDelete(ctx context.Context, key string, rev int64) error {
	sent := time.Now()
	err := s.Store.CompareAndDelete(ctx, key, rev)
	s.t.add(trace{at: time.Now(), member: s.member, what: "delete", key: key, sent: sent, ok: err == nil})
	return err
}

// Watch implements backends.Watcher if the inner store does (the Group's
// fault wrapper declares watch only then).
func (s *tracedStore) Watch(ctx context.Context, prefix string) (<-chan backends.Event, error) {
	in, err := s.Store.(backends.Watcher).Watch(ctx, prefix)
	if err != nil {
		return nil, err
	}
	out := make(chan backends.Event)
	go func() {
		defer close(out)
		defer func() {
			if ctx.Err() == nil {
				s.t.add(trace{at: time.Now(), member: s.member, what: "watch-ended"})
			}
		}()
		for ev := range in {
			if ev.Kind == backends.EventDelete {
				s.t.add(trace{at: time.Now(), member: s.member, what: "event-delete", key: ev.Entry.Key})
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// Txn implements backends.Txner if the inner store does. A transaction
// that creates a key (a put conditioned on the key's absence: how a
// Locker over a store with Txn acquires) is recorded as a create of it.
func (s *tracedStore) Txn(ctx context.Context, conds []backends.Cond, ops []backends.Op) (backends.TxnResult, error) {
	sent := time.Now()
	res, err := s.Store.(backends.Txner).Txn(ctx, conds, ops)
	at := time.Now()
	for _, op := range ops {
		if op.Kind == backends.OpPut && slices.Contains(conds, backends.Cond{Key: op.Key}) {
			s.t.add(trace{at: at, member: s.member, what: "create", key: op.Key, sent: sent, ok: err == nil})
		}
	}
	return res, err
}

// traced wraps inner for member: the wrapper has Watch and Txn only if
// inner does.
func (t *tracer) traced(inner backends.Store, member string) backends.Store {
	s := &tracedStore{Store: inner, t: t, member: member}
	_, w := inner.(backends.Watcher)
	_, x := inner.(backends.Txner)
	switch {
	case w && x:
		return s
	case w:
		return struct {
			backends.Store
			backends.Watcher
		}{s, s}
	case x:
		return struct {
			backends.Store
			backends.Txner
		}{s, s}
	}
	return struct{ backends.Store }{s}
}

// breakdown is where the time of graceful leaves went, per shard handed
// over: the times from Stop of the steps, in the order they happen.
type breakdown struct {
	left     []time.Duration // the leaver's release of its membership answered
	leftSeen []time.Duration // another member's watch reported that release
	released []time.Duration // the leaver's release of the shard answered
	seen     []time.Duration // the new owner's watch reported the deletion
	sent     []time.Duration // the new owner's winning attempt sent
	acquire  []time.Duration // how long that attempt took, sent to answered
	attempts int             // acquisition attempts by the other members
	shards   int             // shards counted
	ends     int             // group watches that ended on their own
}

// add adds the records of a leave of leaver that began at start, for the
// shards it owned.
func (b *breakdown) add(recs []trace, start time.Time, leaver string, owned []int) {
	for _, r := range recs {
		if r.what == "watch-ended" {
			b.ends++
		}
		if r.member == leaver && r.what == "delete" && r.key == "g/member/"+leaver {
			b.left = append(b.left, r.at.Sub(start))
		}
		if r.member != leaver && r.what == "event-delete" && r.key == "g/member/"+leaver {
			b.leftSeen = append(b.leftSeen, r.at.Sub(start))
		}
	}
	for _, shard := range owned {
		key := "g/shard/" + strconv.Itoa(shard)
		var released, won trace
		for _, r := range recs {
			if r.key != key {
				continue
			}
			switch {
			case r.member == leaver && r.what == "delete" && released.at.IsZero():
				released = r
			case r.member != leaver && r.what == "create":
				b.attempts++
				if r.ok && won.at.IsZero() {
					won = r
				}
			}
		}
		b.shards++
		if released.at.IsZero() || won.at.IsZero() {
			continue // released by expiry, or taken by no one yet
		}
		for _, r := range recs {
			if r.key == key && r.member == won.member && r.what == "event-delete" && !r.at.Before(released.sent) {
				b.seen = append(b.seen, r.at.Sub(start))
				break
			}
		}
		b.released = append(b.released, released.at.Sub(start))
		b.sent = append(b.sent, won.sent.Sub(start))
		b.acquire = append(b.acquire, won.at.Sub(won.sent))
	}
}

// report reports the medians, in milliseconds (and the maxima of the
// release and of the winning attempt's sending), the attempts per shard and
// the group watches that ended.
func (b *breakdown) report(tb testing.TB) {
	rep, ok := tb.(interface{ ReportMetric(float64, string) })
	if !ok {
		return
	}
	for _, m := range []struct {
		ds   []time.Duration
		unit string
		max  bool // report the maximum too
	}{{b.left, "left", false}, {b.leftSeen, "left-seen", true}, {b.released, "released", true}, {b.seen, "seen", false}, {b.sent, "sent", true}, {b.acquire, "acquire", false}} {
		if len(m.ds) == 0 {
			continue // nothing of the kind was traced: no metric, rather than a zero
		}
		p50, mx := Quantiles(m.ds)
		rep.ReportMetric(p50, m.unit+"-ms")
		if m.max {
			rep.ReportMetric(mx, m.unit+"-max-ms")
		}
	}
	if b.shards > 0 {
		rep.ReportMetric(float64(b.attempts)/float64(b.shards), "attempts/shard")
	}
	rep.ReportMetric(float64(b.ends), "watch-ends")
}
