package nats

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/nats/natstest"
	"github.com/tenure-go/tenure/clocktest"
)

// TestWatchCostDoesNotGrowWithKeys checks what one message and one expiry
// cost a store whose watch serves a watcher per key, as a process running an
// elector per claim has: a message is matched against the watchers of its
// own key only, and the expiry timer, woken for one due entry, looks at
// that entry and the next one queued, not at every key it has seen. Before,
// every message was checked against every watcher and every wake of the
// timer went through every sighting, both under the store's mutex: at
// 10,000 claims that mutex was held so long that renewals timed out, and a
// sixth of the claims never led.
func TestWatchCostDoesNotGrowWithKeys(t *testing.T) {
	const keys = 2000
	const ttl = 10 * time.Second
	ctx := within(t, 60*time.Second)
	clk := clocktest.New(time.Time{})
	s := bareStore(clk)
	var watchers, sightings int // guarded by s.mu (the hook runs under it)
	s.examined = func(watcher bool) {
		if watcher {
			watchers++
		} else {
			sightings++
		}
	}
	// count returns how many watchers and sightings were looked at since
	// it was last called.
	count := func() (int, int) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w, n := watchers, sightings
		watchers, sightings = 0, 0
		return w, n
	}

	key := func(i int) string { return fmt.Sprintf("claims/%05d", i) }
	ws := make([]*watcher, keys)
	set := newWatcherSet()
	for i := range ws {
		ws[i] = &watcher{ctx: context.Background(), prefix: s.subj + encodeKey(key(i)), ch: make(chan backends.Event, 4)}
		set.add(ws[i])
	}
	it := &chanIter{msgs: make(chan fakeMsg)}
	h := &hub{it: it, start: 1, ctx: context.Background(), done: make(chan struct{}), watchers: set}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { s.follow(h) })
	wg.Go(func() { s.expire(h, stop) })
	defer func() {
		close(it.msgs)
		close(stop)
		wg.Wait()
	}()

	// Key 0 is written a second before the others, so it expires alone.
	it.msgs <- msg(key(0), 1, ttl, 0, 0)
	wantEvent(t, "key 0 created", nextEvent(t, ws[0], "create"), backends.EventPut, key(0), 1)
	clk.Add(time.Second)
	for i := 1; i < keys; i++ {
		it.msgs <- msg(key(i), uint64(i+1), ttl, 0, 0)
		wantEvent(t, "created", nextEvent(t, ws[i], "create"), backends.EventPut, key(i), int64(i+1))
	}
	if err := clk.BlockUntil(ctx, 1); err != nil { // the expiry timer waits for key 0
		t.Fatal(err)
	}

	count()
	it.msgs <- msg(key(7), keys+1, ttl, 0, 0)
	wantEvent(t, "key 7 written again", nextEvent(t, ws[7], "write"), backends.EventPut, key(7), keys+1)
	if w, _ := count(); w != 1 {
		t.Errorf("one message of key 7 looked at %d watchers of %d keys, want 1", w, keys)
	}

	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	count()
	clk.Add(ttl - time.Second)
	wantEvent(t, "key 0 expired", nextEvent(t, ws[0], "expiry"), backends.EventDelete, key(0), 1)
	if err := clk.BlockUntil(ctx, 1); err != nil { // the timer waits for the next one
		t.Fatal(err)
	}
	if w, n := count(); w != 1 || n > 3 {
		t.Errorf("the expiry of key 0 looked at %d watchers and %d sightings of %d keys, want 1 and at most 3", w, n, keys)
	}
	for i := 1; i < keys; i++ {
		if len(ws[i].ch) > 0 {
			t.Fatalf("key %d: event %v before its expiry", i, <-ws[i].ch)
		}
	}
}

// TestWatchesNeedNoGoroutineEach checks that a Watch costs the process no
// goroutine of its own while it runs (the shared consumer has its few,
// whatever the number of watches): with an elector per claim, a goroutine
// per watch was a goroutine per claim. Before, each Watch started one to
// wait for its ctx, and 500 watches were 500 goroutines more.
func TestWatchesNeedNoGoroutineEach(t *testing.T) {
	const watches = 500
	srv := natstest.Start(t)
	s := open(t, srv.URL(), newBucketName(), 1)
	ctx := within(t, 60*time.Second)
	first, err := s.Watch(ctx, "first") // starts the shared consumer
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	wctx, cancel := context.WithCancel(ctx)
	chans := make([]<-chan backends.Event, watches)
	for i := range chans {
		if chans[i], err = s.Watch(wctx, fmt.Sprintf("claims/%05d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := runtime.NumGoroutine() - before; n > watches/10 {
		t.Errorf("%d watches added %d goroutines, want at most %d", watches, n, watches/10)
	}
	cancel()
	for _, ch := range chans {
		for range ch {
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range first {
	}
}
