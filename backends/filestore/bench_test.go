package filestore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/internal/wire"
)

// benchValue is a claim as the Locker writes it.
var benchValue = wire.EncodeClaim(wire.Claim{ID: "indexer-7", Nonce: "0123456789abcdef"})

// rawPublish is the floor of every write: a temp file written, fsynced and
// renamed over the target, then the directory fsynced.
func rawPublish(dir, target string, data []byte) error {
	tmp := filepath.Join(dir, "raw.tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, target)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// rawData is as large as the file a claim write produces.
func rawData() []byte {
	return encodeRecord(record{Key: "bench/claim", Value: benchValue, Revision: 12345, CreateRevision: 12345,
		TTL: 10 * time.Second, BootID: "867ba638-726c-4655-838e-f3be27e93734", Expiry: 1 << 50})
}

// BenchmarkRawPublish is the baseline the store's writes are measured
// against, on the same disk (the test's temp directory).
func BenchmarkRawPublish(b *testing.B) {
	dir := b.TempDir()
	data := rawData()
	for b.Loop() {
		if err := rawPublish(dir, "target", data); err != nil {
			b.Fatal(err)
		}
	}
}

func benchStore(b *testing.B) *Store {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "store"), WithCreate())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkCreateIfAbsent(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if _, err := s.CreateIfAbsent(ctx, "bench/"+strconv.Itoa(i), benchValue, 10*time.Second); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompareAndSet(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	e, err := s.CreateIfAbsent(ctx, "bench/claim", benchValue, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if e, err = s.CompareAndSet(ctx, "bench/claim", e.Revision, benchValue, 10*time.Second); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKeepAlive(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	e, err := s.CreateIfAbsent(ctx, "bench/claim", benchValue, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err = s.KeepAlive(ctx, "bench/claim", e.Revision, 10*time.Second); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	if _, err := s.CreateIfAbsent(ctx, "bench/claim", benchValue, 10*time.Second); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Get(ctx, "bench/claim"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVersusRaw interleaves a raw publish and a store write on the same
// disk, timing each, and reports the store's cost as a multiple of the raw
// one: disk noise hits both alike.
func BenchmarkVersusRaw(b *testing.B) {
	for _, op := range []string{"create", "cas"} {
		b.Run(op, func(b *testing.B) {
			s := benchStore(b)
			rawDir := b.TempDir()
			data := rawData()
			ctx := context.Background()
			e, err := s.CreateIfAbsent(ctx, "bench/claim", benchValue, 10*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			wall := clock.New()
			var raw, store time.Duration
			i := 0
			for b.Loop() {
				i++
				t0 := wall.Now()
				if err := rawPublish(rawDir, "target", data); err != nil {
					b.Fatal(err)
				}
				t1 := wall.Now()
				if op == "create" {
					_, err = s.CreateIfAbsent(ctx, "bench/"+strconv.Itoa(i), benchValue, 10*time.Second)
				} else {
					e, err = s.CompareAndSet(ctx, "bench/claim", e.Revision, benchValue, 10*time.Second)
				}
				if err != nil {
					b.Fatal(err)
				}
				raw += t1.Sub(t0)
				store += wall.Since(t1)
			}
			b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "raw-ns/op")
			b.ReportMetric(float64(store.Nanoseconds())/float64(b.N), "store-ns/op")
			b.ReportMetric(float64(store)/float64(raw), "x-raw")
		})
	}
}

// BenchmarkHandover measures a graceful handover between two processes: this
// process releases a claim (CompareAndDelete) and a child process, watching
// the key, sees the delete event and takes the claim. It reports the
// latency from the start of the release to the event in the child (p50,
// p99) and to the child's successful create.
func BenchmarkHandover(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "store")
	s, err := Open(context.Background(), dir, WithCreate())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := startChild(b, "handover", nil, envDir+"="+dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if got := c.recv(ctx); got != "watching" {
		b.Fatalf("child said %q", got)
	}
	wall := clock.New()
	var evLat, takeLat []time.Duration
	for b.Loop() {
		e, err := s.CreateIfAbsent(ctx, "claim", benchValue, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		t0 := wall.Now()
		if err := s.CompareAndDelete(ctx, "claim", e.Revision); err != nil {
			b.Fatal(err)
		}
		if got := c.recv(ctx); got != "event" {
			b.Fatalf("child said %q, want event", got)
		}
		evLat = append(evLat, wall.Since(t0))
		if got := c.recv(ctx); !strings.HasPrefix(got, "took ") {
			b.Fatalf("child said %q, want took", got)
		}
		takeLat = append(takeLat, wall.Since(t0))
		if got := c.recv(ctx); got != "released" {
			b.Fatalf("child said %q, want released", got)
		}
	}
	b.StopTimer()
	b.ReportMetric(pct(evLat, 50), "event-p50-ms")
	b.ReportMetric(pct(evLat, 99), "event-p99-ms")
	b.ReportMetric(pct(takeLat, 50), "takeover-p50-ms")
	b.ReportMetric(pct(takeLat, 99), "takeover-p99-ms")
}

func pct(ds []time.Duration, p int) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[(len(s)-1)*p/100].Microseconds()) / 1000
}

// childHandover watches "claim"; on every delete it did not cause itself it
// says "event", takes the claim ("took <token>") and releases it again
// ("released").
func childHandover() error {
	s, err := Open(context.Background(), os.Getenv(envDir), WithCreate())
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := s.Watch(ctx, "claim")
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	say := func(l string) { out.WriteString(l + "\n"); out.Flush() }
	say("watching")
	own := int64(0)
	for ev := range events {
		if ev.Kind != backends.EventDelete || ev.Entry.Key != "claim" || ev.Entry.Revision == own {
			continue
		}
		say("event")
		e, err := s.CreateIfAbsent(ctx, "claim", []byte("child"), 10*time.Second)
		if err != nil {
			return err
		}
		say(fmt.Sprintf("took %d", e.CreateRevision))
		own = e.Revision
		if err := s.CompareAndDelete(ctx, "claim", e.Revision); err != nil && !errors.Is(err, backends.ErrConflict) {
			return err
		}
		say("released")
	}
	return nil
}

// BenchmarkLockHold measures a conditional write (a claim's keep-alive, the
// write a holder repeats most) and how long it holds its key's operation
// lock: the window in which a process that stops also stops every other
// writer of that key. It reports the mean and the 99th percentile hold.
func BenchmarkLockHold(b *testing.B) {
	var held []time.Duration
	lockHeldHook = func(d time.Duration) { held = append(held, d) }
	defer func() { lockHeldHook = nil }()
	s := benchStore(b)
	ctx := context.Background()
	e, err := s.CreateIfAbsent(ctx, "bench/claim", benchValue, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	held = held[:0]
	for b.Loop() {
		if _, err = s.KeepAlive(ctx, "bench/claim", e.Revision, 10*time.Second); err != nil {
			b.Fatal(err)
		}
	}
	var sum time.Duration
	for _, d := range held {
		sum += d
	}
	slices.Sort(held)
	b.ReportMetric(float64(sum.Microseconds())/float64(len(held)), "hold-mean-µs")
	b.ReportMetric(float64(held[len(held)*99/100].Microseconds()), "hold-p99-µs")
}

// BenchmarkBurst measures a burst of writes from one Store, as a shard
// member leaving or taking over many shards makes: each iteration writes 64
// keys at once (a compare-and-set each). It reports when the writes were
// acknowledged, from the burst's start (ack-p50-ms, ack-max-ms, over every
// write of every burst), and how many directory fsyncs each write needed
// (dir-syncs/write).
func BenchmarkBurst(b *testing.B) {
	const keys = 64
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "store"), WithCreate())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	revs := make([]int64, keys)
	for i := range keys {
		e, err := s.CreateIfAbsent(ctx, fmt.Sprintf("burst/%d", i), benchValue, time.Hour)
		if err != nil {
			b.Fatal(err)
		}
		revs[i] = e.Revision
	}
	s.dirSync.mu.Lock()
	syncs0 := s.dirSync.begun
	s.dirSync.mu.Unlock()
	var acks []time.Duration
	ack := make([]time.Duration, keys)
	for b.Loop() {
		start := time.Now()
		var wg sync.WaitGroup
		for i := range keys {
			wg.Go(func() {
				e, err := s.CompareAndSet(ctx, fmt.Sprintf("burst/%d", i), revs[i], benchValue, time.Hour)
				if err != nil {
					b.Error(err)
					return
				}
				ack[i], revs[i] = time.Since(start), e.Revision
			})
		}
		wg.Wait()
		acks = append(acks, ack...)
	}
	b.StopTimer()
	s.dirSync.mu.Lock()
	syncs := s.dirSync.begun - syncs0
	s.dirSync.mu.Unlock()
	b.ReportMetric(pct(acks, 50), "ack-p50-ms")
	b.ReportMetric(pct(acks, 100), "ack-max-ms")
	b.ReportMetric(float64(syncs)/float64(len(acks)), "dir-syncs/write")
}

// BenchmarkDecode decodes the file of a claim with a full history (16
// earlier states, half of them tombstones): the read every write does
// twice and every watch does at each change of a key it watches.
func BenchmarkDecode(b *testing.B) {
	r := record{Key: "group/shard/17", Value: benchValue, Revision: 40, CreateRevision: 40,
		TTL: 2 * time.Second, BootID: "867ba638-726c-4655-838e-f3be27e93734", Expiry: 1 << 50}
	for i := range histMax {
		p := r // newest first: a tombstone of revision 39, its put, 38, ...
		p.History = nil
		p.Revision = r.Revision - 1 - int64(i/2)
		p.CreateRevision = p.Revision
		if i%2 == 0 {
			p.Deleted, p.Value, p.TTL, p.BootID, p.Expiry = true, nil, 0, "", 0
		}
		r.History = append(r.History, p)
	}
	if err := checkRecord(r); err != nil {
		b.Fatal(err)
	}
	raw := encodeRecord(r)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeRecord(raw); err != nil {
			b.Fatal(err)
		}
	}
}
