package shardstest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/shards"
)

// Spans records the terms of a group's members with the keys each covers
// (its shards.Span), across changes of count: no key may lie in the spans
// of two terms acting at once, which Spans checks at every term's start.
type Spans struct {
	t   testing.TB
	sig electortest.Signal

	mu       sync.Mutex
	acting   []*spanTerm // guarded by mu
	terms    []*spanTerm // every term begun; guarded by mu
	overlaps int         // pairs of acting terms found sharing keys; guarded by mu
}

type spanTerm struct {
	id    string
	span  shards.Span
	token int64
	begin time.Time
}

// NewSpans returns an empty record.
func NewSpans(t testing.TB) *Spans { return &Spans{t: t} }

// Overlap reports whether some key lies in both spans: a key of hash h is
// in shard h mod c, so shards a of count p and b of count q share keys
// exactly when a ≡ b (mod gcd(p, q)).
func Overlap(a, b shards.Span) bool {
	g := gcd(a.Count, b.Count)
	return a.Shard%g == b.Shard%g
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// OnAcquired returns the OnAcquired of member id, whose Member *m is set
// before it starts: it records the term's span, checks it against every
// acting term, and acts until ctx is done.
func (s *Spans) OnAcquired(id string, m **shards.Member) func(ctx context.Context, shard int, term elector.Term) {
	return func(ctx context.Context, shard int, term elector.Term) {
		span, ok := (*m).SpanOf(term)
		if !ok || span.Shard != shard {
			s.t.Errorf("%s: SpanOf(term of shard %d, key %q) = %+v, %v", id, shard, term.Key, span, ok)
		}
		st := &spanTerm{id: id, span: span, token: term.Token, begin: time.Now()}
		s.mu.Lock()
		for _, o := range s.acting {
			if Overlap(o.span, span) {
				s.overlaps++
				s.t.Errorf("%s acts on %+v (token %d) while %s acts on %+v (token %d): keys with two owners", id, span, term.Token, o.id, o.span, o.token)
			}
		}
		s.acting = append(s.acting, st)
		s.terms = append(s.terms, st)
		s.mu.Unlock()
		s.sig.Notify()
		<-ctx.Done()
		s.mu.Lock()
		s.acting = slices.DeleteFunc(s.acting, func(o *spanTerm) bool { return o == st })
		s.mu.Unlock()
		s.sig.Notify()
	}
}

// Settled reports whether the acting terms are exactly the shards of
// count placed on the live members ids, one term each.
func (s *Spans) Settled(count int, ids ...string) bool {
	want := shards.Place(count, ids)
	s.mu.Lock()
	defer s.mu.Unlock()
	got := make([]string, count)
	for _, st := range s.acting {
		if st.span.Count != count || got[st.span.Shard] != "" {
			return false
		}
		got[st.span.Shard] = st.id
	}
	return slices.Equal(got, want)
}

// Await waits until cond holds, looking again at each term's start and
// end, and fails the test after limit.
func (s *Spans) Await(what string, limit time.Duration, cond func() bool) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	if err := electortest.Until(ctx, what, cond, &s.sig); err != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		var acting []string
		for _, st := range s.acting {
			acting = append(acting, fmt.Sprintf("%s:%d/%d", st.id, st.span.Shard, st.span.Count))
		}
		s.t.Fatalf("%v; acting %v", err, acting)
	}
}

// Begun counts the terms begun of count shards, by shard.
func (s *Spans) Begun(count int) map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[int]int{}
	for _, st := range s.terms {
		if st.span.Count == count {
			out[st.span.Shard]++
		}
	}
	return out
}

// Overlaps counts the pairs of acting terms found sharing keys.
func (s *Spans) Overlaps() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overlaps
}

// start starts the members ids of a group of count shards, each over a
// store of its own from newStore, their terms recorded in s, and stops
// them at the test's end.
func (s *Spans) start(t testing.TB, count int, timing elector.Config, newStore func(i int) backends.Store, ids []string) []*shards.Member {
	var ms []*shards.Member
	for i, id := range ids {
		store := newStore(i)
		t.Cleanup(func() { _ = store.Close() })
		var m *shards.Member
		var err error
		m, err = shards.New(store, shards.Config{Group: "g", Identity: id, Count: count, Elector: timing, OnAcquired: s.OnAcquired(id, &m)})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := m.Stop(ctx); err != nil {
				t.Errorf("stop %s: %v", id, err)
			}
		})
		ms = append(ms, m)
	}
	return ms
}

// BenchResize measures changes of count of a running group of members
// members over stores from newStore: each iteration doubles count and then
// halves it back. settled-ms: from Resize's call until every shard of the
// new count is acting on the member it is placed on (the longest key's
// wait); resize-ms: until Resize returned; ends/old-shard: the terms of
// the old count that ended per old shard (one handover each); overlaps:
// pairs of acting terms that shared a key (must be 0).
func BenchResize(b *testing.B, count, members int, timing elector.Config, newStore func(i int) backends.Store) {
	s := NewSpans(b)
	var ids []string
	for i := range members {
		ids = append(ids, fmt.Sprintf("m%02d", i))
	}
	s.start(b, count, timing, newStore, ids)
	s.Await("settle", 5*time.Minute, func() bool { return s.Settled(count, ids...) })
	admin := newStore(members)
	b.Cleanup(func() { _ = admin.Close() })
	var settled, resized []time.Duration
	ended := 0
	moves := 0
	b.ResetTimer()
	for b.Loop() {
		for _, to := range []int{2 * count, count} {
			from := count
			if to == count {
				from = 2 * count
			}
			before := s.ended(from)
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			err := shards.Resize(ctx, admin, "g", to)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			resized = append(resized, time.Since(start))
			s.Await("settle", 5*time.Minute, func() bool { return s.Settled(to, ids...) })
			settled = append(settled, s.lastBegin().Sub(start))
			ended += s.ended(from) - before
			moves += from
		}
	}
	b.StopTimer()
	p50, mx := Quantiles(settled)
	b.ReportMetric(p50, "settled-ms")
	b.ReportMetric(mx, "settled-max-ms")
	p50, _ = Quantiles(resized)
	b.ReportMetric(p50, "resize-ms")
	b.ReportMetric(float64(ended)/float64(moves), "ends/old-shard")
	b.ReportMetric(float64(s.Overlaps()), "overlaps")
}

// ended counts the terms of count shards that have ended.
func (s *Spans) ended(count int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.terms {
		if st.span.Count == count && !slices.Contains(s.acting, st) {
			n++
		}
	}
	return n
}

// lastBegin is when the latest term began.
func (s *Spans) lastBegin() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last time.Time
	for _, st := range s.terms {
		if st.begin.After(last) {
			last = st.begin
		}
	}
	return last
}

// ResizeScenario runs three members of a group of 8 shards, each over a
// store of its own from newStore, and changes the count to 16 and back to
// 8 with shards.Resize while they run: no key has two owners acting at
// once, each shard of the new count begins exactly one term, on the
// member it is placed on, and every member routes by the new count.
func ResizeScenario(t *testing.T, timing elector.Config, newStore func(i int) backends.Store, limit time.Duration) {
	sp := NewSpans(t)
	ids := []string{"a", "b", "c"}
	ms := sp.start(t, 8, timing, newStore, ids)
	sp.Await("8 shards settle", limit, func() bool { return sp.Settled(8, ids...) })
	admin := newStore(len(ids))
	t.Cleanup(func() { _ = admin.Close() })
	for _, step := range []struct{ from, to int }{{8, 16}, {16, 8}} {
		before := sp.Begun(step.to)
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		start := time.Now()
		err := shards.Resize(ctx, admin, "g", step.to)
		cancel()
		if err != nil {
			t.Fatalf("Resize(%d): %v", step.to, err)
		}
		sp.Await(fmt.Sprintf("%d shards settle", step.to), limit, func() bool { return sp.Settled(step.to, ids...) })
		t.Logf("%d to %d shards: settled %v after Resize began", step.from, step.to, time.Since(start))
		after := sp.Begun(step.to)
		for shard := range step.to {
			if n := after[shard] - before[shard]; n != 1 {
				t.Errorf("%d to %d: shard %d of %d began %d terms, want 1", step.from, step.to, shard, step.to, n)
			}
		}
		for i, m := range ms {
			if got := m.Count(); got != step.to {
				t.Errorf("%s: Count() = %d after the change to %d", ids[i], got, step.to)
			}
		}
	}
}
