package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/elector"
	"github.com/tenure-go/tenure/internal/testrig/electortest"
	"github.com/tenure-go/tenure/internal/testrig/shardstest"
	"github.com/tenure-go/tenure/shards"
)

// shardLog records which member owns which shard, and fails on two owners
// of one shard at once or a token that does not increase. It is an
// electortest.Source that changes whenever a shard gains or loses its
// owner.
type shardLog struct {
	t   *testing.T
	sig electortest.Signal
	mu  sync.Mutex
	// owner and token are guarded by mu.
	owner map[int]string
	token map[int]int64
}

func (l *shardLog) acquired(who string) func(context.Context, int, elector.Term) {
	return func(ctx context.Context, shard int, term elector.Term) {
		l.mu.Lock()
		if o, ok := l.owner[shard]; ok {
			l.t.Errorf("shard %d: %s acquired it while %s owns it", shard, who, o)
		}
		if term.Token <= l.token[shard] {
			l.t.Errorf("shard %d: %s's token %d after %d", shard, who, term.Token, l.token[shard])
		}
		l.owner[shard], l.token[shard] = who, term.Token
		l.mu.Unlock()
		l.sig.Notify()
		<-ctx.Done()
		l.mu.Lock()
		delete(l.owner, shard)
		l.mu.Unlock()
		l.sig.Notify()
	}
}

func (l *shardLog) Changed() <-chan struct{} { return l.sig.Changed() }

func (l *shardLog) owned(who string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, o := range l.owner {
		if o == who {
			n++
		}
	}
	return n
}

// TestShards runs two shard members over the store, each on its own
// store: the shards spread over both, and when one member stops the other
// owns them all; no shard ever has two owners, and each shard's tokens
// increase.
func TestShards(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	log := &shardLog{t: t, owner: map[int]string{}, token: map[int]int64{}}
	const count = 4
	start := func(who string) *shards.Member {
		m, err := shards.New(open(t, dsn, tbl), shards.Config{
			Group:      "kv",
			Identity:   who,
			Count:      count,
			Elector:    elector.Config{TTL: time.Second},
			OnAcquired: log.acquired(who),
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		return m
	}
	stop := func(m *shards.Member) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := m.Stop(ctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}
	ctx := testCtx(t)
	wait := func(what string, cond func() bool) {
		t.Helper()
		if err := electortest.Until(ctx, what, cond, log); err != nil {
			t.Fatalf("%v (a owns %d, b owns %d)", err, log.owned("a"), log.owned("b"))
		}
	}
	a := start("a")
	wait("a owns every shard", func() bool { return log.owned("a") == count })
	b := start("b")
	wait("the shards spread over a and b", func() bool { return log.owned("a") > 0 && log.owned("b") > 0 && log.owned("a")+log.owned("b") == count })
	stop(a)
	wait("b owns every shard", func() bool { return log.owned("b") == count })
	stop(b)
}

// TestShardsResize changes the count of a running group of three members,
// each on its own store, from 8 to 16 shards and back
// (shardstest.ResizeScenario): no key has two owners acting at once, and
// each new shard is taken once.
func TestShardsResize(t *testing.T) {
	srv := sharedServer(t)
	dsn, tbl := srv.DSN(srv.NewDatabase(t)), newTable()
	shardstest.ResizeScenario(t, elector.Config{TTL: time.Second}, func(int) backends.Store { return open(t, dsn, tbl) }, time.Minute)
}
