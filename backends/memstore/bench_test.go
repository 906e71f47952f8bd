package memstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
)

// The benchmarks run on the real clock (the default), with TTLs, as claims
// are written in production.
const benchTTL = 10 * time.Second

// BenchmarkCreateIfAbsent creates fresh keys, 4096 to a store, so that it
// measures the create and not the growth of one ever larger map.
func BenchmarkCreateIfAbsent(b *testing.B) {
	const perStore = 4096
	ctx := context.Background()
	keys := make([]string, perStore)
	for i := range keys {
		keys[i] = "claims/" + strconv.Itoa(i)
	}
	value := []byte("holder")
	s := memstore.New()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%perStore == 0 && i > 0 {
			b.StopTimer()
			s.Close()
			s = memstore.New()
			b.StartTimer()
		}
		if _, err := s.CreateIfAbsent(ctx, keys[i%perStore], value, benchTTL); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	s.Close()
}

func BenchmarkCompareAndSet(b *testing.B) {
	ctx := context.Background()
	value := []byte("holder")
	b.Run("success", func(b *testing.B) {
		s := memstore.New()
		defer s.Close()
		e, _ := s.CreateIfAbsent(ctx, "k", value, benchTTL)
		b.ReportAllocs()
		for b.Loop() {
			var err error
			if e, err = s.CompareAndSet(ctx, "k", e.Revision, value, benchTTL); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("conflict", func(b *testing.B) {
		s := memstore.New()
		defer s.Close()
		e, _ := s.CreateIfAbsent(ctx, "k", value, benchTTL)
		s.CompareAndSet(ctx, "k", e.Revision, value, benchTTL)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.CompareAndSet(ctx, "k", e.Revision, value, benchTTL); err == nil {
				b.Fatal("stale CompareAndSet succeeded")
			}
		}
	})
}

func BenchmarkKeepAlive(b *testing.B) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	e, _ := s.CreateIfAbsent(ctx, "k", []byte("holder"), benchTTL)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.KeepAlive(ctx, "k", e.Revision, benchTTL); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	s.CreateIfAbsent(ctx, "k", []byte("holder"), benchTTL)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get(ctx, "k"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTxn10 conditions on and writes 10 keys in one transaction.
func BenchmarkTxn10(b *testing.B) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	conds := make([]backends.Cond, 10)
	ops := make([]backends.Op, 10)
	for i := range conds {
		key := "txn/" + strconv.Itoa(i)
		e, _ := s.CreateIfAbsent(ctx, key, []byte("v"), benchTTL)
		conds[i] = backends.Cond{Key: key, Revision: e.Revision}
		ops[i] = backends.Op{Kind: backends.OpPut, Key: key, Value: []byte("v"), TTL: benchTTL}
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := s.Txn(ctx, conds, ops)
		if err != nil {
			b.Fatal(err)
		}
		for i, e := range res.Entries {
			conds[i].Revision = e.Revision
		}
	}
}
