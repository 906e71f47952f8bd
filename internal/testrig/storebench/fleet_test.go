package storebench_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/tenure-go/tenure/backends"
	"github.com/tenure-go/tenure/backends/memstore"
	"github.com/tenure-go/tenure/internal/testrig/storebench"
)

// refusing is a store on which nobody can take a claim.
type refusing struct{ *memstore.Store }

func (refusing) CreateIfAbsent(context.Context, string, []byte, time.Duration) (backends.Entry, error) {
	return backends.Entry{}, errors.New("refused")
}

func (refusing) CompareAndSet(context.Context, string, int64, []byte, time.Duration) (backends.Entry, error) {
	return backends.Entry{}, errors.New("refused")
}

func (refusing) Txn(context.Context, []backends.Cond, []backends.Op) (backends.TxnResult, error) {
	return backends.TxnResult{}, errors.New("refused")
}

// fatalTB records the first fatal message and ends the goroutine that
// called it, as testing.T's Fatal does.
type fatalTB struct {
	testing.TB
	fatal chan string
}

func (f fatalTB) Helper() {}

func (f fatalTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }

func (f fatalTB) Fatalf(format string, args ...any) {
	f.fatal <- fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestStartFleetGivesUp checks that when a claim gets no leader within the
// limit, StartFleet stops its electors and fails the run instead of waiting
// for ever.
func TestStartFleetGivesUp(t *testing.T) {
	cfg := storebench.Default()
	cfg.TTL, cfg.Renew, cfg.Limit = time.Second, 50*time.Millisecond, 100*time.Millisecond
	tb := fatalTB{TB: t, fatal: make(chan string, 1)}
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		storebench.StartFleet(tb, cfg, []backends.Store{refusing{memstore.New()}}, 2, nil)
	}()
	select {
	case <-ended:
	case <-clock.New().After(30 * time.Second): // a bound on waiting, not a measurement
		t.Fatal("StartFleet neither returned nor failed within 30s")
	}
	select {
	case msg := <-tb.fatal:
		if want := "0 of 2 claims had a leader"; !strings.Contains(msg, want) {
			t.Errorf("StartFleet failed with %q, want it to say %q", msg, want)
		}
	default:
		t.Error("StartFleet returned, though nobody could take a claim")
	}
}
